// executionOrder: one sequence over a trace set's ranks, from each rank's own order.

#include <QTest>
#include <algorithm>
#include <deque>
#include <vector>

#include "mapping/ExecutionOrder.h"

using namespace ttrace;

namespace {

// Tensors and the records they point to, built piece by piece.
class Tensors {
public:
    // A tensor of `layer` held whole by each of `ranks` (replicas), at `seqs` on them.
    void add(const QString& name, TensorKind kind, int microBatch, int layer,
             const std::vector<std::pair<int, std::int64_t>>& rankSeqs) {
        LogicalTensor tensor;
        tensor.key = TensorKey{name, kind, 0, 0, microBatch};
        tensor.layer = layer;
        Shard shard;
        for (const auto& [rank, seq] : rankSeqs) {
            TensorRecord& record = records_.emplace_back();
            record.rank = rank;
            record.seq = seq;
            record.key = tensor.key;
            shard.replicas.push_back(Replica{{&record}});
        }
        tensor.shards.push_back(std::move(shard));
        tensors.push_back(std::move(tensor));
    }
    std::vector<LogicalTensor> tensors;

    // Their execution order, each seen as the order sees an assembled tensor.
    std::vector<std::int64_t> order() const {
        std::vector<OrderedTensor> ordered;
        for (const auto& tensor : tensors) {
            ordered.push_back(orderedTensor(tensor));
        }
        return executionOrder(ordered);
    }

private:
    std::deque<TensorRecord> records_;  // stable addresses
};

// The tensors' names in executionOrder's order.
QStringList ordered(const Tensors& t) {
    const auto positions = t.order();
    QStringList names(static_cast<qsizetype>(positions.size()));
    for (std::size_t i = 0; i < positions.size(); ++i) {
        names[static_cast<qsizetype>(positions[i])] = t.tensors[i].key.name;
    }
    return names;
}

}  // namespace

class TestExecutionOrder : public QObject {
    Q_OBJECT

private Q_SLOTS:
    // One rank: its own seq, whatever the keys say.
    void oneRankKeepsItsOwnOrder() {
        Tensors t;
        t.add(QStringLiteral("c"), TensorKind::ForwardOutput, 0, 1, {{0, 0}});
        t.add(QStringLiteral("a"), TensorKind::InputGrad, 0, 0, {{0, 2}});
        t.add(QStringLiteral("b"), TensorKind::ForwardOutput, 1, 0, {{0, 1}});
        QCOMPARE(ordered(t),
                 (QStringList{QStringLiteral("c"), QStringLiteral("b"), QStringLiteral("a")}));
    }

    // Replicas tie the ranks' orders together: the same sequence as one rank's.
    void replicasFollowTheirRanks() {
        Tensors t;
        t.add(QStringLiteral("x"), TensorKind::ForwardOutput, 0, 0, {{0, 1}, {1, 1}});
        t.add(QStringLiteral("y"), TensorKind::ForwardOutput, 0, 1, {{0, 0}, {1, 0}});
        t.add(QStringLiteral("z"), TensorKind::OutputGrad, 0, 1, {{0, 2}, {1, 2}});
        QCOMPARE(ordered(t),
                 (QStringList{QStringLiteral("y"), QStringLiteral("x"), QStringLiteral("z")}));
    }

    // Two pipeline stages under 1F1B hold disjoint tensors: per micro-batch, the forward goes
    // through stage 0 then stage 1, the backward through stage 1 then stage 0, and each stage
    // keeps its own order.
    void pipelineStagesFollowTheDataFlow() {
        Tensors t;
        // stage 0 (rank 0, layer 0): F mb0, F mb1, B mb0, B mb1
        t.add(QStringLiteral("F0m0"), TensorKind::ForwardOutput, 0, 0, {{0, 0}});
        t.add(QStringLiteral("F0m1"), TensorKind::ForwardOutput, 1, 0, {{0, 1}});
        t.add(QStringLiteral("B0m0"), TensorKind::InputGrad, 0, 0, {{0, 2}});
        t.add(QStringLiteral("B0m1"), TensorKind::InputGrad, 1, 0, {{0, 3}});
        // stage 1 (rank 1, layer 1): F mb0, B mb0, F mb1, B mb1
        t.add(QStringLiteral("F1m0"), TensorKind::ForwardOutput, 0, 1, {{1, 0}});
        t.add(QStringLiteral("B1m0"), TensorKind::InputGrad, 0, 1, {{1, 1}});
        t.add(QStringLiteral("F1m1"), TensorKind::ForwardOutput, 1, 1, {{1, 2}});
        t.add(QStringLiteral("B1m1"), TensorKind::InputGrad, 1, 1, {{1, 3}});
        const QStringList order = ordered(t);
        const auto before = [&](const char* a, const char* b) {
            return order.indexOf(QLatin1String(a)) < order.indexOf(QLatin1String(b));
        };
        for (const auto& [a, b] : std::vector<std::pair<const char*, const char*>>{
                 {"F0m0", "F1m0"},
                 {"F1m0", "B1m0"},
                 {"B1m0", "B0m0"},  // micro-batch 0
                 {"F0m1", "F1m1"},
                 {"F1m1", "B1m1"},
                 {"B1m1", "B0m1"},  // micro-batch 1
                 {"F0m1", "B0m0"},
                 {"B1m0", "F1m1"}}) {  // each rank's own
            QVERIFY2(before(a, b), qPrintable(order.join(QLatin1Char(' '))));
        }
    }

    // All forwards, then all backwards on each stage (GPipe): stage 0's backward of
    // micro-batch 0 waits for stage 1's, which comes after stage 1's forward of micro-batch 1,
    // although micro-batch 0 is earlier.
    void aBackwardWaitsForTheLaterStages() {
        Tensors t;
        t.add(QStringLiteral("F0m0"), TensorKind::ForwardOutput, 0, 0, {{0, 0}});
        t.add(QStringLiteral("F0m1"), TensorKind::ForwardOutput, 1, 0, {{0, 1}});
        t.add(QStringLiteral("B0m0"), TensorKind::OutputGrad, 0, 0, {{0, 2}});
        t.add(QStringLiteral("B0m1"), TensorKind::OutputGrad, 1, 0, {{0, 3}});
        t.add(QStringLiteral("F1m0"), TensorKind::ForwardOutput, 0, 1, {{1, 0}});
        t.add(QStringLiteral("F1m1"), TensorKind::ForwardOutput, 1, 1, {{1, 1}});
        t.add(QStringLiteral("B1m0"), TensorKind::OutputGrad, 0, 1, {{1, 2}});
        t.add(QStringLiteral("B1m1"), TensorKind::OutputGrad, 1, 1, {{1, 3}});
        QCOMPARE(ordered(t).join(QLatin1Char(' ')),
                 QStringLiteral("F0m0 F1m0 F0m1 F1m1 B1m0 B0m0 B1m1 B0m1"));
    }

    // Parameter gradients, recorded at each stage's optimizer step, go in the parameters'
    // order (lower stages first), as on one device, after every micro-batch.
    void parameterGradientsFollowTheStages() {
        Tensors t;
        t.add(QStringLiteral("B0"), TensorKind::OutputGrad, 0, 0, {{0, 0}});
        t.add(QStringLiteral("G0"), TensorKind::ParamGrad, -1, 0, {{0, 1}});
        t.add(QStringLiteral("B1"), TensorKind::OutputGrad, 0, 1, {{1, 0}});
        t.add(QStringLiteral("G1"), TensorKind::ParamGrad, -1, 1, {{1, 1}});
        QCOMPARE(ordered(t).join(QLatin1Char(' ')), QStringLiteral("B1 B0 G0 G1"));
    }

    // Ranks that disagree still give every tensor one place.
    void disagreeingRanksPlaceEveryTensorOnce() {
        Tensors t;
        t.add(QStringLiteral("a"), TensorKind::ForwardOutput, 0, 0, {{0, 0}, {1, 1}});
        t.add(QStringLiteral("b"), TensorKind::ForwardOutput, 0, 0, {{0, 1}, {1, 0}});
        t.add(QStringLiteral("c"), TensorKind::OutputGrad, 0, 0, {{0, 2}, {1, 2}});
        auto positions = t.order();
        std::sort(positions.begin(), positions.end());
        QCOMPARE(positions, (std::vector<std::int64_t>{0, 1, 2}));
        QCOMPARE(ordered(t).back(), QStringLiteral("c"));
    }
};

QTEST_GUILESS_MAIN(TestExecutionOrder)
#include "test_execution_order.moc"
