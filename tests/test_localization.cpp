// Localization rules on in-memory results that describe realistic fault patterns: a forward
// bug and its cascade, a backward-only bug, pipeline ranks, replica mismatches, no fault, and
// inputs that were not captured. Pure logic on values; the engine tests on real traces are
// elsewhere.
#include <QtTest>
#include <algorithm>

#include "compare/FaultDescription.h"
#include "compare/Localization.h"

using namespace ttrace;

namespace {

constexpr double kFine = 0.3;  // a healthy normalized error

ShardResult shard(std::vector<int> ranks, double normalized, std::int64_t start = 0,
                  std::int64_t stop = 8, int replica = 0) {
    ShardResult s;
    s.ranges.dims = {{IndexRange{start, stop}}, {IndexRange{0, 8}}};
    s.ranks = std::move(ranks);
    s.replica = replica;
    s.normalizedError = normalized;
    s.metrics.relativeError = normalized * 1e-3;
    return s;
}

// Builds results in the reference's execution order: each add() takes the next referenceSeq.
class Trace {
public:
    TensorResult& add(const QString& name, TensorKind kind, int layer, double normalized,
                      int microBatch = 0, int iteration = 0) {
        TensorResult r;
        r.key.name = name;
        r.key.kind = kind;
        r.key.iteration = iteration;
        r.key.microBatch = isParameterKind(kind) ? -1 : microBatch;
        r.layer = layer;
        r.threshold.value = 1e-3;
        r.normalizedError = normalized;
        r.metrics.relativeError = normalized * 1e-3;
        r.referenceSeq = nextSeq_++;
        r.shards = {shard({0}, normalized)};
        r.rankSeq[0] = r.referenceSeq;
        results.push_back(std::move(r));
        return results.back();
    }

    // A tensor of micro-batch 0 with its global shape (the gradient-source rules match shapes).
    TensorResult& add(const QString& name, TensorKind kind, int layer, double normalized,
                      std::vector<std::int64_t> globalShape) {
        TensorResult& r = add(name, kind, layer, normalized);
        r.globalShape = std::move(globalShape);
        return r;
    }

    std::size_t indexOf(const QString& name, TensorKind kind, int microBatch = 0,
                        int iteration = 0) const {
        for (std::size_t i = 0; i < results.size(); ++i) {
            const auto& k = results[i].key;
            if (k.name == name && k.kind == kind && k.iteration == iteration &&
                (isParameterKind(kind) || k.microBatch == microBatch)) {
                return i;
            }
        }
        return results.size();
    }

    std::vector<TensorResult> results;

private:
    std::int64_t nextSeq_ = 0;
};

QString mlp(int layer) {
    return QStringLiteral("layers.") + QString::number(layer) + QStringLiteral(".mlp");
}

// A 4-layer model, one iteration and micro-batch: forward, backward in reverse, parameter
// gradients, updated parameters. `normalized(name, kind)` gives each tensor's error.
template <typename Error>
Trace fourLayerModel(Error normalized) {
    Trace t;
    const auto add = [&](const QString& name, TensorKind kind, int layer) {
        t.add(name, kind, layer, normalized(name, kind, layer));
    };
    add(QStringLiteral("embedding"), TensorKind::ForwardOutput, -1);
    for (int l = 0; l < 4; ++l) {
        add(mlp(l), TensorKind::ForwardInput, l);
        add(mlp(l), TensorKind::ForwardOutput, l);
    }
    for (int l = 3; l >= 0; --l) {
        add(mlp(l), TensorKind::OutputGrad, l);
        add(mlp(l), TensorKind::InputGrad, l);
    }
    for (int l = 3; l >= 0; --l) {
        add(mlp(l) + QStringLiteral(".weight"), TensorKind::ParamGrad, l);
    }
    for (int l = 0; l < 4; ++l) {
        add(mlp(l) + QStringLiteral(".weight"), TensorKind::UpdatedParam, l);
    }
    return t;
}

}  // namespace

class TestLocalization : public QObject {
    Q_OBJECT

private Q_SLOTS:
    // Rank lists stay one readable line whatever the size of the job.
    void rankListsStayShort() {
        QCOMPARE(formatRankList({9, 0, 1, 2, 3, 5, 8, 3}), QStringLiteral("0-3, 5, 8-9"));
        QCOMPARE(formatRanks({4, 5}), QStringLiteral("ranks 4-5"));
        QCOMPARE(formatRanks({7}), QStringLiteral("rank 7"));
        QCOMPARE(formatRanks({}), QStringLiteral("no rank"));
        std::vector<int> strided;  // tp rank 0 of 156 data-parallel replicas
        for (int rank = 0; rank < 1248; rank += 8) {
            strided.push_back(rank);
        }
        QCOMPARE(formatRankList(strided),
                 QStringLiteral("0, 8, 16, 24, 32, 40, 48, 56, 64, 72, ..., 1240 (156 ranks)"));
    }

    // A replica mismatch on every data-parallel copy names two pairs, then counts the rest.
    void everyCopyDifferingIsCounted() {
        TensorResult result;
        result.normalizedError = 0.5;
        for (int copy = 1; copy < 1000; ++copy) {
            ReplicaMismatch m;
            m.ranksA = {0};
            m.ranksB = {copy * 8};
            m.differingElements = 64;
            m.maxAbsDifference = copy == 500 ? 0.5 : 0.01;
            result.replicaMismatches.push_back(m);
        }
        const QString text = describeFault(result);
        QVERIFY2(text.startsWith(QStringLiteral("copies on rank 0 and rank 8 differ in 64 "
                                                "elements (max |difference| 0.01); copies on "
                                                "rank 0 and rank 16 differ")),
                 qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("997 more copies differ from their shard's first "
                                              "copy, on ranks 24, 32,")),
                 qPrintable(text));
        QVERIFY2(text.endsWith(QStringLiteral("7992 (997 ranks) (max |difference| 0.5)")),
                 qPrintable(text));
        QVERIFY(text.size() < 400);
    }

    void isFaulty() {
        TensorResult r;
        r.normalizedError = 1.0;
        QVERIFY(!r.isFaulty());  // exactly at the threshold is still round-off
        r.normalizedError = 1.01;
        QVERIFY(r.isFaulty());
        r.normalizedError = 0.2;
        r.metrics.nanDist = 3;
        QVERIFY(r.isFaulty());
        r.metrics.nanRef = 3;  // the reference overflows the same way: not this run's fault
        QVERIFY(!r.isFaulty());
        r.metrics.infDist = 1;
        QVERIFY(r.isFaulty());
        r.metrics.infRef = 1;
        QVERIFY(!r.isFaulty());
        r.replicaMismatches.push_back(ReplicaMismatch{});
        QVERIFY(r.isFaulty());
        r.replicaMismatches.clear();
        QVERIFY(!r.isFaulty());
        r.recomputationMismatches.push_back(RecomputationMismatch{});
        QVERIFY(r.isFaulty());
    }

    // A forward recomputed differently on two of four shards: its first forward is within
    // tolerance, yet it is the first faulty tensor, its module the root cause, and both ranks
    // are named, the shard differing most first.
    void recomputationsNameEveryRankThatDiffered() {
        auto t = fourLayerModel([](const QString& name, TensorKind kind, int) {
            return name.startsWith(QStringLiteral("layers.2")) && isBackwardKind(kind) ? 9.0
                                                                                       : kFine;
        });
        auto& out = t.results[t.indexOf(mlp(1), TensorKind::ForwardOutput)];
        out.shards = {shard({0}, kFine, 0, 2), shard({1}, kFine, 2, 4), shard({2}, kFine, 4, 6),
                      shard({3}, kFine, 6, 8)};
        out.recomputationMismatches = {{out.shards[1].ranges, 1, 2, 16, false},
                                       {out.shards[3].ranges, 3, 9, 16, false}};
        const auto loc = localize(t.results);
        const std::size_t index = t.indexOf(mlp(1), TensorKind::ForwardOutput);
        QCOMPARE(loc.firstFaulty, std::optional<std::size_t>(index));
        QVERIFY(loc.rootCause);
        QCOMPARE(loc.rootCause->module, mlp(1));
        QVERIFY2(loc.rootCause->reason.contains(QStringLiteral(
                     "forward_output[0] recomputed by activation checkpointing on ranks 1, 3 "
                     "differently from its first forward (up to 9 of 16 elements differ)")),
                 qPrintable(loc.rootCause->reason));
        QVERIFY(loc.faultyShard);
        QCOMPARE(loc.faultyShard->shard, std::size_t{3});
        QCOMPARE(loc.faultyShard->ranks, (std::vector<int>{1, 3}));
        QVERIFY2(loc.faultyShard->reason.contains(QStringLiteral("on ranks 1, 3 differs from "
                                                                 "its first forward in 9 of 16 "
                                                                 "elements")),
                 qPrintable(loc.faultyShard->reason));
    }

    void noFaults() {
        auto t = fourLayerModel([](const QString&, TensorKind, int) { return kFine; });
        const auto loc = localize(t.results);
        QVERIFY(!loc.bugFound());
        QCOMPARE(loc.faultyCount, std::size_t{0});
        QVERIFY(!loc.rootCause.has_value());
        QVERIFY(!loc.faultyShard.has_value());
        QVERIFY(loc.perRank.empty());
        QVERIFY(!localize({}).bugFound());
    }

    // A forward bug in layer 2 that every later tensor inherits, backward included.
    void forwardCascade() {
        const auto error = [](const QString& name, TensorKind kind, int layer) {
            if (kind == TensorKind::ForwardInput || kind == TensorKind::ForwardOutput) {
                if (layer > 2 || (layer == 2 && kind == TensorKind::ForwardOutput)) {
                    return 37.5;
                }
                return kFine;
            }
            return name == QStringLiteral("embedding") ? kFine : 12.0;  // all of backward
        };
        auto t = fourLayerModel(error);
        // Two tensor-parallel shards of the faulty output; rank 1's carries the error.
        auto& out = t.results[t.indexOf(mlp(2), TensorKind::ForwardOutput)];
        out.shards = {shard({0}, 0.4, 0, 4), shard({1}, 52.0, 4, 8)};
        // Results arrive in key order, not execution order.
        std::reverse(t.results.begin(), t.results.end());

        const auto loc = localize(t.results);
        QVERIFY(loc.bugFound());
        const std::size_t first = t.indexOf(mlp(2), TensorKind::ForwardOutput);
        QCOMPARE(*loc.firstFaulty, first);
        QCOMPARE(loc.faultyCount, std::size_t{3 + 8 + 4 + 4});  // fwd 2-3, backward, grads, updates
        QVERIFY(loc.rootCause.has_value());
        QCOMPARE(loc.rootCause->module, mlp(2));
        QCOMPARE(loc.rootCause->result, first);
        QCOMPARE(loc.rootCause->input,
                 std::optional<std::size_t>(t.indexOf(mlp(2), TensorKind::ForwardInput)));
        const QString& reason = loc.rootCause->reason;
        QVERIFY2(
            reason.contains(QStringLiteral("forward_input[0] within tolerance (normalized 0.3)")),
            qPrintable(reason));
        QVERIFY2(reason.contains(QStringLiteral("forward_output[0] 37.5x over the threshold")),
                 qPrintable(reason));

        QVERIFY(loc.faultyShard.has_value());
        QCOMPARE(loc.faultyShard->result, first);
        QCOMPARE(loc.faultyShard->shard, std::size_t{1});
        QCOMPARE(loc.faultyShard->ranks, std::vector<int>{1});
        QVERIFY(loc.faultyShard->standsOut);
        QVERIFY2(loc.faultyShard->reason.contains(QStringLiteral("stands out")),
                 qPrintable(loc.faultyShard->reason));
    }

    // The wrong value is computed the same way on every rank: no shard stands out.
    void replicatedWrongValue() {
        Trace t;
        t.add(mlp(0), TensorKind::ForwardInput, 0, kFine);
        auto& out = t.add(mlp(0), TensorKind::ForwardOutput, 0, 20.0);
        out.shards = {shard({0}, 19.0, 0, 4), shard({1}, 21.0, 4, 8), shard({2, 3}, 20.0, 4, 8, 1)};
        const auto loc = localize(t.results);
        QVERIFY(loc.faultyShard.has_value());
        QCOMPARE(loc.faultyShard->ranks, (std::vector<int>{0, 1, 2, 3}));
        QCOMPARE(loc.faultyShard->shard, std::size_t{1});
        QVERIFY(!loc.faultyShard->standsOut);
        QVERIFY2(loc.faultyShard->reason.contains(QStringLiteral("no shard stands out")),
                 qPrintable(loc.faultyShard->reason));
        QVERIFY2(loc.faultyShard->reason.contains(QStringLiteral("common to the ranks")),
                 qPrintable(loc.faultyShard->reason));
    }

    // A module's second input is the faulty one: it is named with its index.
    void tensorsAreNamedWithTheirIndex() {
        Trace t;
        t.add(mlp(0), TensorKind::ForwardOutput, 0, kFine);
        t.add(mlp(1), TensorKind::ForwardInput, 1, kFine).key.index = 0;
        t.add(mlp(1), TensorKind::ForwardInput, 1, 8.0).key.index = 1;
        const auto loc = localize(t.results);
        QVERIFY(loc.rootCause);
        QVERIFY2(loc.rootCause->reason.contains(QStringLiteral("forward_input[1] 8x over")),
                 qPrintable(loc.rootCause->reason));
    }

    // Two of four shards wrong: both stand out against the median, and both ranks are the
    // faulty shard's, not one named and the other left in the reason.
    void everyShardAboveTheThresholdIsNamed() {
        Trace t;
        t.add(mlp(0), TensorKind::ForwardInput, 0, kFine);
        auto& out = t.add(mlp(0), TensorKind::ForwardOutput, 0, 30.0);
        out.shards = {shard({0}, 0.1, 0, 2), shard({1}, 40.0, 2, 4), shard({2}, 0.2, 4, 6),
                      shard({3}, 55.0, 6, 8)};
        const auto loc = localize(t.results);
        QVERIFY(loc.faultyShard);
        QVERIFY(loc.faultyShard->standsOut);
        QCOMPARE(loc.faultyShard->shard, std::size_t{3});
        QCOMPARE(loc.faultyShard->ranks, (std::vector<int>{1, 3}));
        QVERIFY2(loc.faultyShard->reason.contains(
                     QStringLiteral("also above the threshold: shard [2:4][0:8] on rank 1 (40)")),
                 qPrintable(loc.faultyShard->reason));
    }

    // No shard stands out, but their errors differ 3.5x (each rank clipped by its own norm):
    // not "common to the ranks".
    void shardsWithTheirOwnErrorsAreNotCalledCommon() {
        Trace t;
        t.add(mlp(0), TensorKind::ForwardInput, 0, kFine);
        auto& out = t.add(mlp(0), TensorKind::ForwardOutput, 0, 20.0);
        out.shards = {shard({0}, 10.0, 0, 4), shard({1}, 35.0, 4, 8), shard({2}, 12.0, 0, 4, 1),
                      shard({3}, 30.0, 4, 8, 1)};
        const auto loc = localize(t.results);
        QVERIFY(loc.faultyShard);
        QVERIFY(!loc.faultyShard->standsOut);
        QCOMPARE(loc.faultyShard->ranks, (std::vector<int>{0, 1, 2, 3}));
        const QString& reason = loc.faultyShard->reason;
        QVERIFY2(!reason.contains(QStringLiteral("common")), qPrintable(reason));
        QVERIFY2(reason.contains(QStringLiteral("the shards' errors differ (normalized 10 to "
                                                "35): each rank's piece is off by its own "
                                                "amount")),
                 qPrintable(reason));
    }

    // Layer-norm weight gradient not all-reduced on one tensor-parallel rank (TP+SP): the
    // forward and the activation gradients are right, only that param_grad (and what the
    // optimizer makes of it) is wrong.
    void backwardOnlyParamGrad() {
        Trace t;
        for (int l = 0; l < 2; ++l) {
            const QString norm =
                QStringLiteral("layers.") + QString::number(l) + QStringLiteral(".norm");
            for (int mb = 0; mb < 2; ++mb) {
                t.add(norm, TensorKind::ForwardInput, l, kFine, mb);
                t.add(norm, TensorKind::ForwardOutput, l, kFine, mb);
            }
        }
        for (int mb = 0; mb < 2; ++mb) {
            for (int l = 1; l >= 0; --l) {
                const QString norm =
                    QStringLiteral("layers.") + QString::number(l) + QStringLiteral(".norm");
                t.add(norm, TensorKind::OutputGrad, l, mb == 1 && l == 1 ? 0.61 : kFine, mb);
                t.add(norm, TensorKind::InputGrad, l, kFine, mb);
            }
        }
        t.add(QStringLiteral("layers.1.norm.weight"), TensorKind::ParamGrad, 1, kFine);
        auto& bad = t.add(QStringLiteral("layers.0.norm.weight"), TensorKind::ParamGrad, 0, 85.0);
        // Four tensor-parallel copies of the replicated gradient; rank 2's differs.
        bad.shards = {shard({0}, 0.2, 0, 8, 0), shard({1}, 0.2, 0, 8, 1),
                      shard({2}, 160.0, 0, 8, 2), shard({3}, 0.2, 0, 8, 3)};
        for (int rank = 0; rank < 4; ++rank) {
            bad.rankSeq[rank] = bad.referenceSeq;
        }
        ReplicaMismatch mismatch;
        mismatch.ranges = bad.shards[0].ranges;
        mismatch.ranksA = {0};
        mismatch.ranksB = {2};
        mismatch.differingElements = 8;
        mismatch.maxAbsDifference = 0.75;
        bad.replicaMismatches = {mismatch};
        t.add(QStringLiteral("layers.0.norm.weight"), TensorKind::UpdatedParam, 0, 30.0);
        t.add(QStringLiteral("layers.1.norm.weight"), TensorKind::UpdatedParam, 1, kFine);

        const auto loc = localize(t.results);
        const std::size_t gradIndex =
            t.indexOf(QStringLiteral("layers.0.norm.weight"), TensorKind::ParamGrad);
        QCOMPARE(*loc.firstFaulty, gradIndex);
        QCOMPARE(loc.faultyCount, std::size_t{2});
        QCOMPARE(loc.rootCause->module, QStringLiteral("layers.0.norm"));
        QCOMPARE(loc.rootCause->result, gradIndex);
        // The tightest of the module's inputs, over both micro-batches, is quoted.
        QVERIFY(loc.rootCause->input.has_value());
        const auto& input = t.results[*loc.rootCause->input];
        QCOMPARE(input.key.name, QStringLiteral("layers.0.norm"));
        QVERIFY(input.key.kind == TensorKind::OutputGrad ||
                input.key.kind == TensorKind::ForwardInput);
        QVERIFY2(loc.rootCause->reason.contains(QStringLiteral("param_grad 85x over")),
                 qPrintable(loc.rootCause->reason));

        QCOMPARE(loc.faultyShard->ranks, std::vector<int>{2});
        QCOMPARE(loc.faultyShard->shard, std::size_t{2});
        QVERIFY2(loc.faultyShard->reason.contains(QStringLiteral("majority")),
                 qPrintable(loc.faultyShard->reason));

        // Every tensor-parallel rank holds a copy: each one's first fault is that gradient.
        QCOMPARE(loc.perRank.size(), std::size_t{4});
        for (int rank = 0; rank < 4; ++rank) {
            QCOMPARE(loc.perRank[static_cast<std::size_t>(rank)].rank, rank);
            QCOMPARE(loc.perRank[static_cast<std::size_t>(rank)].result, gradIndex);
            QCOMPARE(loc.perRank[static_cast<std::size_t>(rank)].seq,
                     t.results[gradIndex].referenceSeq);
        }
    }

    // A norm's gradient is not reduced and clipping by one total norm then moves every other
    // gradient a little: the first gradient in the order only carries the error; the worst
    // convicts its module, and the reason names the first.
    void clippedGradientsNameTheWorst() {
        Trace t;
        for (const char* module : {"embedding", "layers.0.norm", "layers.0.mlp", "head"}) {
            t.add(QString::fromUtf8(module), TensorKind::ForwardInput, 0, kFine);
            t.add(QString::fromUtf8(module), TensorKind::ForwardOutput, 0, kFine);
        }
        for (const char* module : {"head", "layers.0.mlp", "layers.0.norm", "embedding"}) {
            t.add(QString::fromUtf8(module), TensorKind::OutputGrad, 0, kFine);
        }
        // in parameter order, as the capture records them
        t.add(QStringLiteral("embedding.weight"), TensorKind::ParamGrad, -1, 3.0);
        t.add(QStringLiteral("layers.0.norm.weight"), TensorKind::ParamGrad, 0, 900.0);
        t.add(QStringLiteral("layers.0.mlp.weight"), TensorKind::ParamGrad, 0, 4.0);
        t.add(QStringLiteral("head.weight"), TensorKind::ParamGrad, -1, 5.0);
        const auto loc = localize(t.results);
        QCOMPARE(*loc.firstFaulty,
                 t.indexOf(QStringLiteral("embedding.weight"), TensorKind::ParamGrad));
        QCOMPARE(loc.rootCause->module, QStringLiteral("layers.0.norm"));
        QCOMPARE(loc.rootCause->result,
                 t.indexOf(QStringLiteral("layers.0.norm.weight"), TensorKind::ParamGrad));
        QVERIFY2(loc.rootCause->reason.contains(u"of the 4 faulty parameter gradients") &&
                     loc.rootCause->reason.contains(u"embedding.weight param_grad it0"),
                 qPrintable(loc.rootCause->reason));
        // the faulty shard is looked for in the convicted gradient
        QCOMPARE(*loc.shardTensor(), loc.rootCause->result);

        // Gradients all off by similar amounts (a wrong scale, or the same missing reduction
        // in every norm): the first in the order stays.
        t.results[t.indexOf(QStringLiteral("layers.0.norm.weight"), TensorKind::ParamGrad)]
            .metrics.relativeError = 0.02;
        const auto common = localize(t.results);
        QCOMPARE(common.rootCause->module, QStringLiteral("embedding"));
        QVERIFY(!common.rootCause->reason.contains(u"furthest off"));
    }

    // The optimizer step itself is wrong: the updated parameter convicts it, the gradient is fine.
    void optimizerBug() {
        Trace t;
        t.add(mlp(0) + QStringLiteral(".weight"), TensorKind::Param, 0, 0.0);
        t.add(mlp(0), TensorKind::ForwardInput, 0, kFine);
        t.add(mlp(0), TensorKind::ForwardOutput, 0, kFine);
        t.add(mlp(0) + QStringLiteral(".weight"), TensorKind::ParamGrad, 0, kFine);
        t.add(mlp(0) + QStringLiteral(".weight"), TensorKind::UpdatedParam, 0, 9.0);
        const auto loc = localize(t.results);
        QCOMPARE(loc.rootCause->module, mlp(0));
        QCOMPARE(loc.rootCause->result, std::size_t{4});
        QCOMPARE(loc.rootCause->input, std::optional<std::size_t>(3));  // the tightest input
    }

    // The reason names the inputs that were captured, not every kind that could be one.
    void reasonNamesOnlyCapturedInputs() {
        Trace t;
        t.add(mlp(0) + QStringLiteral(".weight"), TensorKind::Param, 0, kFine);
        t.add(mlp(0), TensorKind::ForwardOutput, 0, kFine);
        t.add(mlp(0) + QStringLiteral(".weight"), TensorKind::UpdatedParam, 0, 9.0);
        const auto loc = localize(t.results);
        const QString& reason = loc.rootCause->reason;
        QVERIFY2(reason.startsWith(QStringLiteral("param ")), qPrintable(reason));
        QVERIFY2(!reason.contains(QStringLiteral("param_grad")), qPrintable(reason));
    }

    // A parameter wrong from the start: no earlier iteration to blame, its loading is.
    void initialParameterIsWrongAsLoaded() {
        Trace t;
        t.add(QStringLiteral("embedding"), TensorKind::ForwardOutput, -1, kFine);
        t.add(mlp(0) + QStringLiteral(".weight"), TensorKind::Param, 0, 40.0);
        t.add(mlp(0), TensorKind::ForwardOutput, 0, 12.0);
        const auto loc = localize(t.results);
        QCOMPARE(loc.rootCause->module, mlp(0));
        QCOMPARE(loc.rootCause->result, std::size_t{1});
        const QString& reason = loc.rootCause->reason;
        QVERIFY2(!reason.contains(QStringLiteral("previous iteration")), qPrintable(reason));
        QVERIFY2(reason.contains(QStringLiteral("initialized or loaded")), qPrintable(reason));
    }

    // Interleaved pipeline: rank 0 owns layers 0-1, rank 1 layers 2-3. The bug is in layer 1's
    // output on rank 0; rank 1 sees it first at its own first tensor.
    void perRankFirstFaults() {
        Trace t;
        struct Entry {
            int layer;
            TensorKind kind;
        };
        const std::vector<Entry> order = {
            {0, TensorKind::ForwardInput}, {0, TensorKind::ForwardOutput},
            {1, TensorKind::ForwardInput}, {1, TensorKind::ForwardOutput},
            {2, TensorKind::ForwardInput}, {2, TensorKind::ForwardOutput},
            {3, TensorKind::ForwardInput}, {3, TensorKind::ForwardOutput},
            {3, TensorKind::OutputGrad},   {3, TensorKind::InputGrad},
            {2, TensorKind::OutputGrad},   {2, TensorKind::InputGrad},
            {1, TensorKind::OutputGrad},   {1, TensorKind::InputGrad},
            {0, TensorKind::OutputGrad},   {0, TensorKind::InputGrad},
        };
        std::map<int, std::int64_t> nextSeq;
        for (const auto& e : order) {
            const bool faulty = e.layer >= 2 ||
                                (e.layer == 1 && e.kind != TensorKind::ForwardInput) ||
                                isBackwardKind(e.kind);
            auto& r = t.add(mlp(e.layer), e.kind, e.layer, faulty ? 5.0 : kFine);
            const int rank = e.layer < 2 ? 0 : 1;
            r.rankSeq.clear();
            r.rankSeq[rank] = nextSeq[rank]++;
            r.shards = {shard({rank}, r.normalizedError)};
        }
        // Rank 2 holds only the embedding, which is fine: it has no first fault.
        auto& embedding = t.add(QStringLiteral("embedding"), TensorKind::ForwardOutput, -1, kFine);
        embedding.rankSeq = {{2, 0}};

        const auto loc = localize(t.results);
        QCOMPARE(*loc.firstFaulty, t.indexOf(mlp(1), TensorKind::ForwardOutput));
        QCOMPARE(loc.rootCause->module, mlp(1));
        QCOMPARE(loc.perRank.size(), std::size_t{2});
        QCOMPARE(loc.perRank[0].rank, 0);
        QCOMPARE(loc.perRank[0].result, t.indexOf(mlp(1), TensorKind::ForwardOutput));
        QCOMPARE(loc.perRank[0].seq, std::int64_t{3});
        QCOMPARE(loc.perRank[1].rank, 1);
        QCOMPARE(loc.perRank[1].result, t.indexOf(mlp(2), TensorKind::ForwardInput));
        QCOMPARE(loc.perRank[1].seq, std::int64_t{0});
    }

    // A gradient of mlp(0) with two copies (ranks 0 and 1) that must be bit-identical and are
    // not, with these normalized errors.
    static Trace twoDisagreeingCopies(double rank0Error, double rank1Error) {
        Trace t;
        t.add(mlp(0), TensorKind::OutputGrad, 0, kFine);
        auto& grad = t.add(mlp(0) + QStringLiteral(".weight"), TensorKind::ParamGrad, 0,
                           std::max(rank0Error, rank1Error));
        grad.shards = {shard({0}, rank0Error, 0, 8, 0), shard({1}, rank1Error, 0, 8, 1)};
        grad.rankSeq = {{0, 10}, {1, 10}};
        ReplicaMismatch mismatch;
        mismatch.ranges = grad.shards[0].ranges;
        mismatch.ranksA = {0};
        mismatch.ranksB = {1};
        mismatch.differingElements = 1;
        mismatch.maxAbsDifference = 0.5;
        grad.replicaMismatches = {mismatch};
        return t;
    }

    // Only two copies, so there is no majority: both ranks are named, the farther one is
    // picked.
    void replicaMismatchTwoCopies() {
        Trace t = twoDisagreeingCopies(0.2, 0.3);
        const auto loc = localize(t.results);
        QVERIFY(loc.bugFound());  // faulty by the mismatch alone (normalized 0.3)
        QCOMPARE(*loc.firstFaulty, std::size_t{1});
        QCOMPARE(loc.rootCause->module, mlp(0));
        QVERIFY2(loc.rootCause->reason.contains(
                     QStringLiteral("differ in 1 element (max |difference| 0.5)")),
                 qPrintable(loc.rootCause->reason));
        QCOMPARE(loc.faultyShard->ranks, std::vector<int>{1});
        QCOMPARE(loc.faultyShard->shard, std::size_t{1});
        const QString& reason = loc.faultyShard->reason;
        QVERIFY2(reason.contains(QStringLiteral("rank 0 and rank 1 disagree")), qPrintable(reason));
        QVERIFY2(reason.contains(QStringLiteral("farther from the reference")), qPrintable(reason));
    }

    // Both copies above the threshold (a layer-norm gradient never all-reduced across
    // tensor-parallel ranks): neither stands out, both are named.
    void replicaMismatchBothCopiesWrong() {
        Trace t = twoDisagreeingCopies(1.5, 2.95);
        const auto loc = localize(t.results);
        QVERIFY(loc.faultyShard);
        QVERIFY(!loc.faultyShard->standsOut);
        QCOMPARE(loc.faultyShard->ranks, (std::vector<int>{0, 1}));
        const QString& reason = loc.faultyShard->reason;
        QVERIFY2(reason.contains(QStringLiteral("both are above the threshold (normalized 1.5 "
                                                "and 2.95)")),
                 qPrintable(reason));
    }

    // Three copies where the first (the comparison's reference copy) is the odd one out.
    void replicaMismatchFirstCopyIsOdd() {
        Trace t;
        auto& p = t.add(mlp(0) + QStringLiteral(".weight"), TensorKind::Param, 0, 0.0);
        p.shards = {shard({0}, 0.0, 0, 8, 0), shard({1}, 0.0, 0, 8, 1), shard({2}, 0.0, 0, 8, 2)};
        for (const int other : {1, 2}) {
            ReplicaMismatch m;
            m.ranges = p.shards[0].ranges;
            m.ranksA = {0};
            m.ranksB = {other};
            m.differingElements = 64;
            m.maxAbsDifference = 1e-3;
            p.replicaMismatches.push_back(m);
        }
        const auto loc = localize(t.results);
        QCOMPARE(loc.faultyShard->ranks, std::vector<int>{0});
        QCOMPARE(loc.faultyShard->shard, std::size_t{0});
        // The first tensor of the run has nothing before it to blame.
        QVERIFY2(loc.rootCause->reason.contains(QStringLiteral("first tensor")),
                 qPrintable(loc.rootCause->reason));
    }

    // Only module outputs were captured: the tensor just before the faulty one stands in for
    // its input.
    void inputNotCapturedFallsBack() {
        Trace t;
        for (int l = 0; l < 4; ++l) {
            t.add(mlp(l), TensorKind::ForwardOutput, l, l >= 2 ? 7.5 : kFine);
        }
        const auto loc = localize(t.results);
        QCOMPARE(loc.rootCause->module, mlp(2));
        QVERIFY(!loc.rootCause->input.has_value());
        const QString& reason = loc.rootCause->reason;
        QVERIFY2(reason.contains(QStringLiteral("forward_input not captured")), qPrintable(reason));
        QVERIFY2(reason.contains(QStringLiteral("preceding tensor layers.1.mlp forward_output[0]")),
                 qPrintable(reason));
    }

    // A pipeline transfer bug: the last output of stage 0 is right, the first input of stage 1
    // is not.
    void faultyInputAfterGoodOutput() {
        Trace t;
        t.add(mlp(1), TensorKind::ForwardInput, 1, kFine);
        t.add(mlp(1), TensorKind::ForwardOutput, 1, kFine);
        t.add(mlp(2), TensorKind::ForwardInput, 2, 14.0);
        t.add(mlp(2), TensorKind::ForwardOutput, 2, 14.0);
        const auto loc = localize(t.results);
        QCOMPARE(loc.rootCause->module, mlp(2));
        QCOMPARE(loc.rootCause->result, std::size_t{2});
        QVERIFY2(loc.rootCause->reason.contains(QStringLiteral("on its way into this module")),
                 qPrintable(loc.rootCause->reason));
    }

    // When every faulty tensor's inputs are faulty too (here the input has no place in the
    // reference order), nothing qualifies: the first faulty tensor's module is named, and
    // the reason says why it is only a guess.
    void cascadeWithoutRootCause() {
        Trace t;
        t.add(mlp(0), TensorKind::ForwardOutput, 0, kFine);
        t.add(mlp(1), TensorKind::ForwardOutput, 1, 6.0);
        auto& input = t.add(mlp(1), TensorKind::ForwardInput, 1, 6.0);
        input.referenceSeq = -1;
        const auto loc = localize(t.results);
        QCOMPARE(*loc.firstFaulty, std::size_t{1});
        QCOMPARE(loc.faultyCount, std::size_t{2});
        QCOMPARE(loc.rootCause->module, mlp(1));
        QCOMPARE(loc.rootCause->result, std::size_t{1});
        QVERIFY(!loc.rootCause->input.has_value());
        QVERIFY2(loc.rootCause->reason.contains(QStringLiteral("no faulty tensor has its inputs "
                                                               "within tolerance")),
                 qPrintable(loc.rootCause->reason));
    }

    // A gradient that goes wrong between the backward of the module that consumed an output
    // and that output (a missing all-reduce, a stale pipeline send): the producer's input
    // gradient is within tolerance, the output gradient is not. The root cause names where
    // the gradient came from.
    void outputGradientNamesItsProducer() {
        const auto loc = localize(
            fourLayerModel([](const QString&, TensorKind kind, int l) {
                const bool wrong =
                    l <= 1 && (kind == TensorKind::OutputGrad || kind == TensorKind::InputGrad ||
                               kind == TensorKind::ParamGrad || kind == TensorKind::UpdatedParam);
                return wrong ? 6.0 : kFine;
            }).results);
        QCOMPARE(loc.rootCause->module, mlp(1));
        const auto& gradient = loc.rootCause->gradient;
        QVERIFY(gradient.has_value());
        QCOMPARE(gradient->from, GradientSource::From::Module);
        QCOMPARE(*loc.rootCause->input, *gradient->upstream);
        const QString& reason = loc.rootCause->reason;
        QVERIFY2(reason.contains(QStringLiteral("its gradient comes from the backward of "
                                                "layers.2.mlp: layers.2.mlp input_grad[0] it0 "
                                                "mb0 is within tolerance")),
                 qPrintable(reason));
        QVERIFY2(
            reason.contains(QStringLiteral("went wrong between that backward and this module")),
            qPrintable(reason));
    }

    // The producer is the nearest module before the output gradient whose input gradient has
    // its shape: operations between modules that change the shape (an uncaptured product of
    // two branches) leave other modules' input gradients in between.
    void producerHasTheGradientsShape() {
        Trace t;
        const std::vector<std::int64_t> hidden{2, 8, 16}, ffn{2, 8, 64};
        t.add(QStringLiteral("ffn.w1"), TensorKind::ForwardOutput, 0, kFine, ffn);
        t.add(QStringLiteral("ffn.w2"), TensorKind::OutputGrad, 0, kFine, hidden);
        t.add(QStringLiteral("ffn.w2"), TensorKind::InputGrad, 0, kFine, ffn);
        t.add(QStringLiteral("ffn.w3"), TensorKind::OutputGrad, 0, kFine, ffn);
        t.add(QStringLiteral("ffn.w3"), TensorKind::InputGrad, 0, kFine, hidden);
        t.add(QStringLiteral("ffn.w1"), TensorKind::OutputGrad, 0, 9.0, ffn);
        const auto loc = localize(t.results);
        QCOMPARE(loc.rootCause->module, QStringLiteral("ffn.w1"));
        QCOMPARE(*loc.rootCause->gradient->upstream,
                 t.indexOf(QStringLiteral("ffn.w2"), TensorKind::InputGrad));
    }

    // The first gradient of a micro-batch's backward has no module's backward before it: it
    // is the loss's, and the reason says so instead of blaming a transfer.
    void firstGradientComesFromTheLoss() {
        Trace t;
        t.add(QStringLiteral("output"), TensorKind::ForwardInput, -1, kFine);
        t.add(QStringLiteral("output"), TensorKind::ForwardOutput, -1, kFine);
        t.add(QStringLiteral("output"), TensorKind::OutputGrad, -1, 40.0);
        t.add(QStringLiteral("output"), TensorKind::InputGrad, -1, 40.0);
        const auto loc = localize(t.results);
        QCOMPARE(loc.rootCause->module, QStringLiteral("output"));
        QVERIFY(loc.rootCause->gradient.has_value());
        QCOMPARE(loc.rootCause->gradient->from, GradientSource::From::Loss);
        QVERIFY(!loc.rootCause->input.has_value());
        const QString& reason = loc.rootCause->reason;
        QVERIFY2(reason.contains(QStringLiteral("its gradient comes from the loss")),
                 qPrintable(reason));
        QVERIFY2(!reason.contains(QStringLiteral("on its way into this module (communication")),
                 qPrintable(reason));
    }

    // A gradient made inside an enclosing module from its output gradient (a router's, by the
    // mixture that weights the experts with the router's output) names the enclosing module,
    // not a module of another shape further up.
    void gradientMadeInsideTheEnclosingModule() {
        Trace t;
        const std::vector<std::int64_t> hidden{2, 8, 16}, experts{2, 8, 4};
        t.add(QStringLiteral("layers.1.mlp"), TensorKind::ForwardOutput, 1, kFine, hidden);
        t.add(QStringLiteral("final_norm"), TensorKind::InputGrad, 1, kFine, experts);
        t.add(QStringLiteral("layers.1.mlp"), TensorKind::OutputGrad, 1, kFine, hidden);
        t.add(QStringLiteral("layers.1.mlp.router"), TensorKind::OutputGrad, 1, 3.0, experts);
        const auto loc = localize(t.results);
        QCOMPARE(loc.rootCause->module, QStringLiteral("layers.1.mlp.router"));
        QCOMPARE(loc.rootCause->gradient->from, GradientSource::From::Enclosing);
        QCOMPARE(*loc.rootCause->input, std::size_t{2});
        QVERIFY2(loc.rootCause->reason.contains(QStringLiteral(
                     "its gradient was made inside layers.1.mlp from that module's output "
                     "gradient: layers.1.mlp output_grad[0] it0 mb0 is within tolerance")),
                 qPrintable(loc.rootCause->reason));
    }

    // A faulty producer makes the output gradient part of the cascade: the producer's module
    // is the root cause, not the module the wrong gradient reaches.
    void faultyProducerIsTheCause() {
        Trace t;
        t.add(mlp(1), TensorKind::ForwardOutput, 1, kFine);
        t.add(mlp(1), TensorKind::OutputGrad, 1, kFine);
        t.add(mlp(1), TensorKind::InputGrad, 1, 5.0);
        t.add(mlp(0), TensorKind::OutputGrad, 0, 5.0);
        const auto loc = localize(t.results);
        QCOMPARE(loc.rootCause->module, mlp(1));
        QVERIFY(!loc.rootCause->gradient.has_value());
    }

    // NaN on one shard where the reference is finite.
    void nonFiniteShardStandsOut() {
        Trace t;
        t.add(mlp(0), TensorKind::ForwardInput, 0, kFine);
        auto& out = t.add(mlp(0), TensorKind::ForwardOutput, 0, 0.5);
        out.metrics.nanDist = 1;
        out.shards = {shard({0}, 0.5, 0, 4), shard({1}, 0.4, 4, 8)};
        out.shards[0].metrics.nanDist = 1;
        const auto loc = localize(t.results);
        QVERIFY(loc.bugFound());
        QVERIFY2(loc.rootCause->reason.contains(QStringLiteral("forward_output[0] has 1 NaN")),
                 qPrintable(loc.rootCause->reason));
        QCOMPARE(loc.faultyShard->ranks, std::vector<int>{0});
    }
};

QTEST_APPLESS_MAIN(TestLocalization)
#include "test_localization.moc"
