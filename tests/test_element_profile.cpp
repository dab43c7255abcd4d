// Element-level profile of one tensor on the real fixtures: the histogram of element errors,
// the downsampled error image (the wrong shard of bug_shard is exactly where its block is)
// and the shard footprints on the 2-D view (zig-zag context-parallel chunks included).
#include <QTest>
#include <algorithm>

#include "TestPaths.h"
#include "compare/ElementErrorProfile.h"
#include "trace/TraceSet.h"

using namespace ttrace;
using ttrace::test::fixture;

namespace {

struct Traces {
    TraceSet dist, ref;
};

Traces open(const QString& caseName) {
    return {openTraceSet(fixture(caseName, QStringLiteral("dist"))),
            openTraceSet(fixture(caseName, QStringLiteral("ref")))};
}

TensorKey key(const char* name, TensorKind kind, int microBatch = 0) {
    TensorKey k;
    k.name = QString::fromUtf8(name);
    k.kind = kind;
    k.microBatch = microBatch;
    return k;
}

QString messages(const Diagnostics& diagnostics) {
    QStringList lines;
    for (const auto& d : diagnostics) {
        lines << d.toString();
    }
    return lines.join(QLatin1Char('\n'));
}

const ShardFootprint* shardOfRank(const ElementErrorProfile& profile, int rank) {
    for (const auto& shard : profile.shards) {
        if (std::find(shard.ranks.begin(), shard.ranks.end(), rank) != shard.ranks.end()) {
            return &shard;
        }
    }
    return nullptr;
}

}  // namespace

class TestElementProfile : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void histogramBinsAreLogSpaced() {
        ErrorHistogram h;
        h.add(0);
        h.add(1e-13);
        h.add(0.25);  // 10^-0.75 <= 0.25 < 10^-0.5
        h.add(ErrorHistogram::lowerEdge(10));
        h.add(1e5);
        h.add(std::numeric_limits<double>::infinity());
        QCOMPARE(h.exact, 1);
        QCOMPARE(h.below, 1);
        QCOMPARE(h.above, 2);
        QCOMPARE(h.bins[(12 - 1) * ErrorHistogram::kBinsPerDecade + 1], 1);
        QCOMPARE(h.bins[10], 1);
        QCOMPARE(h.total(), 6);
        QCOMPARE(h.countAtOrAbove(0.1), 3);
    }

    // bug_shard: rank 5 (dp 0, tp 1) wrote its quarter of layers.1.fc1's [8, 64] output
    // (it0 mb1) 25% too large: rows [0, 4), columns [32, 64).
    void wrongShardIsTheHotBlock() {
        const Traces traces = open(QStringLiteral("bug_shard"));
        const auto outcome = profileElementErrors(
            traces.dist, traces.ref, key("layers.1.fc1", TensorKind::ForwardOutput, 1));
        QVERIFY2(outcome.profile, qPrintable(messages(outcome.diagnostics)));
        const ElementErrorProfile& p = *outcome.profile;
        QCOMPARE(p.globalShape, (std::vector<std::int64_t>{8, 64}));

        // Full resolution: one pixel per element.
        QCOMPARE(p.image.height, 8);
        QCOMPARE(p.image.width, 64);
        for (int r = 0; r < 8; ++r) {
            for (int c = 0; c < 64; ++c) {
                const bool wrong = r < 4 && c >= 32;
                const float e = p.image.at(r, c);
                QVERIFY2(wrong ? (e > 0.24F && e < 0.26F) : e < 0.05F,
                         qPrintable(QStringLiteral("pixel %1,%2: %3").arg(r).arg(c).arg(e)));
            }
        }
        // The 25% errors all sit in the bin [10^-0.75, 10^-0.5); nothing else above 0.05.
        QCOMPARE(p.histogram.total(), 8 * 64);
        QCOMPARE(p.histogram.bins[(12 - 1) * ErrorHistogram::kBinsPerDecade + 1], 4 * 32);
        QCOMPARE(p.histogram.countAtOrAbove(0.05), 4 * 32);

        // The footprint of rank 5's shard is that block, and the four shards tile the tensor.
        QCOMPARE(p.shards.size(), std::size_t{4});
        const ShardFootprint* faulty = shardOfRank(p, 5);
        QVERIFY(faulty);
        QCOMPARE(faulty->rects, (std::vector<ElementRect>{{0, 4, 32, 64}}));
        QVERIFY(!faulty->bounding);
    }

    void downsampledImageKeepsTheBlockMaximum() {
        const Traces traces = open(QStringLiteral("bug_shard"));
        ProfileOptions options;
        options.maxHeight = 4;
        options.maxWidth = 16;
        options.chunkElements = 48;  // many blocks, each cutting shards into pieces
        const auto outcome = profileElementErrors(
            traces.dist, traces.ref, key("layers.1.fc1", TensorKind::ForwardOutput, 1), options);
        QVERIFY2(outcome.profile, qPrintable(messages(outcome.diagnostics)));
        const ErrorImage& image = outcome.profile->image;
        QCOMPARE(image.height, 4);
        QCOMPARE(image.width, 16);
        for (int r = 0; r < 4; ++r) {
            for (int c = 0; c < 16; ++c) {
                // Each pixel is 2 rows x 4 columns.
                QCOMPARE(image.rowStart(r), std::int64_t{2} * r);
                QCOMPARE(image.pixelColumnOf(4 * c + 3), c);
                const bool wrong = r < 2 && c >= 8;
                QCOMPARE(image.at(r, c) > 0.2F, wrong);
            }
        }
        QCOMPARE(outcome.profile->histogram.countAtOrAbove(0.05), 4 * 32);
    }

    // cp_zigzag: [2, 16, 8] Shard(1), rank 0 holds sequence chunks [0, 4) and [12, 16). On the
    // 2-D view (rows b * 16 + s) that is rows [0, 4), [12, 20) and [28, 32).
    void zigzagShardFootprintAndExactData() {
        const Traces traces = open(QStringLiteral("cp_zigzag"));
        const auto outcome = profileElementErrors(traces.dist, traces.ref,
                                                  key("layers.0.attn", TensorKind::ForwardOutput));
        QVERIFY2(outcome.profile, qPrintable(messages(outcome.diagnostics)));
        const ElementErrorProfile& p = *outcome.profile;
        QCOMPARE(p.image.rows, 32);
        QCOMPARE(p.image.columns, 8);
        const ShardFootprint* rank0 = shardOfRank(p, 0);
        QVERIFY(rank0);
        QCOMPARE(rank0->rects,
                 (std::vector<ElementRect>{{0, 4, 0, 8}, {12, 20, 0, 8}, {28, 32, 0, 8}}));
        // Exact slices of the reference: every element equal.
        QCOMPARE(p.histogram.exact, 2 * 16 * 8);
        QCOMPARE(p.histogram.total(), 2 * 16 * 8);
        QVERIFY(std::all_of(p.image.maxError.begin(), p.image.maxError.end(),
                            [](float e) { return e == 0; }));
    }

    // A reference laid out over ranks: cp_zigzag's context-parallel run as the trusted one,
    // its single-device reference as the run checked. The reference's zig-zag pieces are
    // given with the profile; a reference cut as the distributed run is has none.
    void laidOutReferenceShardsAreGiven() {
        const Traces traces = open(QStringLiteral("cp_zigzag"));
        const TensorKey attn = key("layers.0.attn", TensorKind::ForwardOutput);
        const auto outcome = profileElementErrors(traces.ref, traces.dist, attn);
        QVERIFY2(outcome.profile, qPrintable(messages(outcome.diagnostics)));
        const ElementErrorProfile& p = *outcome.profile;
        QCOMPARE(p.shards.size(), std::size_t{1});
        QCOMPARE(p.referenceShards.size(), std::size_t{2});
        const auto rank0 =
            std::find_if(p.referenceShards.begin(), p.referenceShards.end(),
                         [](const ShardFootprint& s) { return s.ranks == std::vector<int>{0}; });
        QVERIFY(rank0 != p.referenceShards.end());
        QCOMPARE(rank0->rects,
                 (std::vector<ElementRect>{{0, 4, 0, 8}, {12, 20, 0, 8}, {28, 32, 0, 8}}));
        QCOMPARE(p.histogram.exact, 2 * 16 * 8);

        const auto alike = profileElementErrors(traces.dist, traces.dist, attn);
        QVERIFY2(alike.profile, qPrintable(messages(alike.diagnostics)));
        QCOMPARE(alike.profile->shards.size(), std::size_t{2});
        QVERIFY(alike.profile->referenceShards.empty());
    }

    // tp_row: the forward output is Partial(sum); summed in float32 it equals the reference.
    void partialSumsAreAddedFirst() {
        const Traces traces = open(QStringLiteral("tp_row"));
        const auto outcome = profileElementErrors(traces.dist, traces.ref,
                                                  key("layers.0.fc2", TensorKind::ForwardOutput));
        QVERIFY2(outcome.profile, qPrintable(messages(outcome.diagnostics)));
        QCOMPARE(outcome.profile->histogram.exact, 4 * 8);
        QCOMPARE(outcome.profile->shards.size(), std::size_t{1});
        QCOMPARE(outcome.profile->shards.front().ranks, (std::vector<int>{0, 1}));
    }

    // bug_replica: rank 1's copy of the gradient has element [0, 0] times 1.5; rank 0's is
    // right. The profile shows the preferred rank's copy.
    void preferredRanksChooseTheCopy() {
        const Traces traces = open(QStringLiteral("bug_replica"));
        const TensorKey grad = key("layers.0.mlp.weight", TensorKind::ParamGrad, -1);
        const auto first = profileElementErrors(traces.dist, traces.ref, grad);
        QVERIFY2(first.profile, qPrintable(messages(first.diagnostics)));
        QCOMPARE(first.profile->histogram.exact, 64);
        ProfileOptions options;
        options.preferredRanks = {1};
        const auto wrong = profileElementErrors(traces.dist, traces.ref, grad, options);
        QVERIFY2(wrong.profile, qPrintable(messages(wrong.diagnostics)));
        QCOMPARE(wrong.profile->histogram.exact, 63);
        QCOMPARE(wrong.profile->histogram.countAtOrAbove(0.3), 1);  // the error of 0.5
        QCOMPARE(wrong.profile->image.at(0, 0), 0.5f);
    }

    void unknownTensorIsADiagnostic() {
        const Traces traces = open(QStringLiteral("tp_row"));
        const auto outcome = profileElementErrors(traces.dist, traces.ref,
                                                  key("no.such.module", TensorKind::ForwardOutput));
        QVERIFY(!outcome.profile);
        QVERIFY(!outcome.cancelled);
        QVERIFY2(messages(outcome.diagnostics).contains(QStringLiteral("no.such.module")),
                 qPrintable(messages(outcome.diagnostics)));
    }

    void cancelStopsBeforeReading() {
        const Traces traces = open(QStringLiteral("bug_shard"));
        std::atomic<bool> cancel{true};
        ProfileOptions options;
        options.cancel = &cancel;
        const auto outcome = profileElementErrors(
            traces.dist, traces.ref, key("layers.1.fc1", TensorKind::ForwardOutput, 1), options);
        QVERIFY(outcome.cancelled);
        QVERIFY(!outcome.profile);
    }
};

QTEST_MAIN(TestElementProfile)
#include "test_element_profile.moc"
