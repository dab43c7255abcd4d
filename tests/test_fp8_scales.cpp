// The fp8 scale check on hand-built fp8 traces (real HDF5 files): a tensor-parallel tensor of
// two shards whose bytes decode to the reference's values, so that only the scales can tell a
// shard quantized with its own amax from a right one. Also the check's way through the
// localization, the results store, the MPI codec and the JSON report.
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>
#include <memory>

#include "Hdf5TestFiles.h"
#include "compare/ComparisonJob.h"
#include "compare/FaultDescription.h"
#include "compare/Localization.h"
#include "compare/TaskOutcomesCodec.h"
#include "report/ReportWriters.h"
#include "store/ResultsStore.h"
#include "trace/TraceSet.h"

using namespace ttrace;

namespace {

// E4M3 bit patterns of 1, 2, 3 and 4.
constexpr std::uint8_t kOne = 0x38, kTwo = 0x40, kThree = 0x44, kFour = 0x48;
constexpr std::int32_t kRows = 2, kCols = 4;
const QByteArray kName = "layers.0.attn.qkv";

QString rankFile(const QString& folder, int rank) {
    return folder + QStringLiteral("/rank%1.h5").arg(rank, 5, 10, QLatin1Char('0'));
}

// One fp8 forward_input dataset: `bytes` of a [rows, cols] box at `ranges` (JSON; empty for
// the whole tensor) with `scaleInv`.
void writeFp8(const QString& path, int rank, const std::vector<std::uint8_t>& bytes, hsize_t cols,
              double scaleInv, const QByteArray& ranges) {
    test::RankFileWriter w(path, rank);
    QVERIFY(w.valid());
    const hid_t ds = w.dataset("000000", H5T_STD_U8LE, H5T_NATIVE_UINT8,
                               {static_cast<hsize_t>(kRows), cols}, bytes.data());
    test::RankFileWriter::standardAttributes(ds, kName, "forward_input", 0, "fp8_e4m3",
                                             {kRows, kCols});
    test::RankFileWriter::float64(ds, "scale_inv", scaleInv);
    if (!ranges.isEmpty()) {
        test::RankFileWriter::variableString(ds, "ranges", ranges);
        test::RankFileWriter::variableString(ds, "placements", "{\"tp\": \"Shard(1)\"}");
    }
    H5Dclose(ds);
}

bool addPerturbation(const QString& folder) {
    QFile file(folder + QStringLiteral("/manifest.json"));
    if (!file.open(QIODevice::ReadOnly)) {
        return false;
    }
    QJsonObject manifest = QJsonDocument::fromJson(file.readAll()).object();
    file.close();
    manifest[QStringLiteral("perturbation")] =
        QJsonObject{{QStringLiteral("relative"), 0.00390625}, {QStringLiteral("seed"), 1}};
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate)) {
        return false;
    }
    return file.write(QJsonDocument(manifest).toJson()) > 0;
}

// How a rank stores its shard: the byte of every element and the scale_inv that decodes it.
// Each choice decodes to 2, the reference's value, so only the scale can differ.
struct ShardBytes {
    std::uint8_t byte = kTwo;
    double scaleInv = 1.0;
};
constexpr ShardBytes kRightScale{kTwo, 1.0};
constexpr ShardBytes kHalfScale{kFour, 0.5};              // 4 x 1/2
constexpr ShardBytes kDoubleScale{kOne, 2.0};             // 1 x 2
constexpr ShardBytes kTwoThirdsScale{kThree, 2.0 / 3.0};  // 3 x 2/3

// Reference: 2 everywhere with scale_inv 1; the perturbed reference the same values with
// scale_inv `perturbedScale`; the distributed run splits the columns over two TP ranks, stored
// as `shard1` and `shard0` say.
struct Fp8Traces {
    QTemporaryDir dir;
    QString dist, ref, pert;

    Fp8Traces(double perturbedScale, ShardBytes shard1, ShardBytes shard0 = kRightScale) {
        ref = dir.filePath(QStringLiteral("ref"));
        pert = dir.filePath(QStringLiteral("pert"));
        dist = dir.filePath(QStringLiteral("dist"));
        for (const auto& folder : {ref, pert, dist}) {
            QVERIFY(QDir().mkpath(folder));
        }
        const std::vector<std::uint8_t> whole(kRows * kCols, kTwo);
        QVERIFY(test::writeManifest(ref, 1, QString(), QStringLiteral("reference")));
        writeFp8(rankFile(ref, 0), 0, whole, kCols, 1.0, {});
        QVERIFY(test::writeManifest(pert, 1, QString(), QStringLiteral("perturbed-reference")));
        QVERIFY(addPerturbation(pert));
        writeFp8(rankFile(pert, 0), 0, whole, kCols, perturbedScale, {});

        QVERIFY(test::writeManifest(dist, 2, QStringLiteral("tp")));
        const std::vector<std::uint8_t> left(kRows * kCols / 2, shard0.byte);
        writeFp8(rankFile(dist, 0), 0, left, kCols / 2, shard0.scaleInv, "[[[0,2]],[[0,2]]]");
        const std::vector<std::uint8_t> right(kRows * kCols / 2, shard1.byte);
        writeFp8(rankFile(dist, 1), 1, right, kCols / 2, shard1.scaleInv, "[[[0,2]],[[2,4]]]");
    }
};

struct Compared {
    std::unique_ptr<TraceSet> dist, ref, pert;
    ComparisonOutput output;
};

Compared compare(const Fp8Traces& traces) {
    Compared c;
    c.dist = std::make_unique<TraceSet>(openTraceSet(traces.dist));
    c.ref = std::make_unique<TraceSet>(openTraceSet(traces.ref));
    c.pert = std::make_unique<TraceSet>(openTraceSet(traces.pert));
    c.output = compareTraceSets(*c.dist, *c.ref, c.pert.get(), {});
    return c;
}

QString messages(const Diagnostics& diagnostics) {
    QStringList lines;
    for (const auto& d : diagnostics) {
        lines << d.toString();
    }
    return lines.join(QLatin1Char('\n'));
}

}  // namespace

class TestFp8Scales : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void equalScalesPass() {
        const Fp8Traces traces(1.0, kRightScale);
        const Compared c = compare(traces);
        QCOMPARE(c.output.results.size(), std::size_t{1});
        const TensorResult& r = c.output.results.front();
        QVERIFY2(r.fp8Scales.has_value(), qPrintable(messages(c.output.diagnostics)));
        QCOMPARE(r.fp8Scales->referenceScaleInv, 1.0);
        QCOMPARE(r.fp8Scales->perturbedScaleInv, std::optional<double>(1.0));
        QCOMPARE(r.fp8Scales->maxDifference, 0.0);
        QVERIFY(r.fp8Scales->copiesAgree);
        QVERIFY(r.fp8Scales->mismatches.empty());
        // No perturbed difference: the tensor's theoretical bound is the tolerance.
        QCOMPARE(r.fp8Scales->tolerance, r.threshold.theoretical);
        QVERIFY(!r.isFaulty());
        QVERIFY(!localize(c.output.results).bugFound());
    }

    // Rank 1 quantized its shard with its own amax, half the whole tensor's: its values are
    // exact, its scale is not.
    void differingShardScaleIsReportedOnItsRank() {
        const Fp8Traces traces(1.0, kHalfScale);
        const Compared c = compare(traces);
        QCOMPARE(c.output.results.size(), std::size_t{1});
        const TensorResult& r = c.output.results.front();
        QCOMPARE(r.metrics.relativeError, 0.0);
        QVERIFY(r.fp8Scales.has_value());
        QCOMPARE(r.fp8Scales->mismatches.size(), std::size_t{1});
        const ScaleMismatch& m = r.fp8Scales->mismatches.front();
        QCOMPARE(m.ranks, std::vector<int>{1});
        QCOMPARE(m.scaleInv, 0.5);
        QCOMPARE(m.ratio, 0.5);
        QCOMPARE(m.ranges.toString(), QStringLiteral("[0:2][2:4]"));
        QCOMPARE(r.fp8Scales->maxDifference, 0.5);
        QVERIFY(!r.fp8Scales->copiesAgree);
        QVERIFY(r.isFaulty());
        const QString fault = describeFault(r);
        QVERIFY2(fault.startsWith(QStringLiteral("fp8 scale_inv of shard [0:2][2:4] on rank "
                                                 "1 is 0.5x the reference's")),
                 qPrintable(fault));
        QVERIFY2(fault.contains(QStringLiteral("amax not reduced")), qPrintable(fault));

        const Localization loc = localize(c.output.results);
        QVERIFY(loc.bugFound());
        QVERIFY(loc.rootCause);
        QCOMPARE(loc.rootCause->module, QString::fromLatin1(kName));
        QVERIFY(loc.faultyShard);
        QCOMPARE(loc.faultyShard->ranks, std::vector<int>{1});
        QVERIFY(loc.faultyShard->standsOut);
        QCOMPARE(r.shards[loc.faultyShard->shard].ranks, std::vector<int>{1});
        QVERIFY2(loc.faultyShard->reason.contains(QStringLiteral("on rank 1 is 0.5x")),
                 qPrintable(loc.faultyShard->reason));
    }

    // Every copy carries the same scale: the amax was reduced. A scale other than the
    // reference's then says that the tensor's largest element differs, a difference of values
    // (here none) that the value comparison judges, not a scaling fault.
    void oneScaleOnEveryCopyIsNotAScaleFault() {
        const Fp8Traces traces(1.0, kHalfScale, kHalfScale);
        const Compared c = compare(traces);
        QCOMPARE(c.output.results.size(), std::size_t{1});
        const TensorResult& r = c.output.results.front();
        QVERIFY(r.fp8Scales.has_value());
        QVERIFY(r.fp8Scales->copiesAgree);
        QCOMPARE(r.fp8Scales->maxDifference, 0.5);
        QVERIFY(r.fp8Scales->mismatches.empty());
        QVERIFY(!r.isFaulty());
    }

    // A scale above the reference's cannot come from a shard's own amax (at most the whole
    // tensor's): the description says so.
    void scaleAboveTheReferenceIsDescribedAsSuch() {
        const Fp8Traces traces(1.0, kDoubleScale);
        const Compared c = compare(traces);
        QCOMPARE(c.output.results.size(), std::size_t{1});
        const TensorResult& r = c.output.results.front();
        QVERIFY(r.isFaulty());
        const QString fault = describeFault(r);
        QVERIFY2(fault.contains(QStringLiteral("is 2x the reference's")), qPrintable(fault));
        QVERIFY2(fault.contains(QStringLiteral("an amax above the whole tensor's")),
                 qPrintable(fault));
    }

    // The perturbed reference moved its scale by 10%: a shard whose scale is 2/3 of the
    // reference's is within 8 x 10%. Without that movement it is beyond the tolerance.
    void scaleWithinPerturbationPasses() {
        const Fp8Traces noisy(1.1, kTwoThirdsScale);
        const Compared c = compare(noisy);
        QCOMPARE(c.output.results.size(), std::size_t{1});
        const TensorResult& r = c.output.results.front();
        QVERIFY(r.fp8Scales.has_value());
        QVERIFY(qAbs(r.fp8Scales->tolerance - 0.8) < 1e-12);
        QVERIFY(r.fp8Scales->mismatches.empty());
        QVERIFY(qAbs(r.fp8Scales->maxDifference - 1.0 / 3.0) < 1e-12);
        QVERIFY(!r.isFaulty());

        const Fp8Traces quiet(1.0, kTwoThirdsScale);
        const Compared q = compare(quiet);
        QCOMPARE(q.output.results.size(), std::size_t{1});
        QCOMPARE(q.output.results.front().fp8Scales->mismatches.size(), std::size_t{1});
        QVERIFY(q.output.results.front().isFaulty());
    }

    void scaleCheckTravelsThroughStoreCodecAndReports() {
        const Fp8Traces traces(1.0, kHalfScale);
        Compared c = compare(traces);
        QCOMPARE(c.output.results.size(), std::size_t{1});
        const Fp8ScaleCheck expected = *c.output.results.front().fp8Scales;
        const auto same = [&expected](const std::optional<Fp8ScaleCheck>& got) {
            return got && got->referenceScaleInv == expected.referenceScaleInv &&
                   got->perturbedScaleInv == expected.perturbedScaleInv &&
                   got->tolerance == expected.tolerance &&
                   got->maxDifference == expected.maxDifference &&
                   got->copiesAgree == expected.copiesAgree && got->mismatches.size() == 1 &&
                   got->mismatches[0].ranges == expected.mismatches[0].ranges &&
                   got->mismatches[0].ranks == expected.mismatches[0].ranks &&
                   got->mismatches[0].scaleInv == expected.mismatches[0].scaleInv &&
                   got->mismatches[0].ratio == expected.mismatches[0].ratio;
        };

        QTemporaryDir cache;
        QString error;
        auto store = ResultsStore::open(cache.filePath(QStringLiteral("results.sqlite")), &error);
        QVERIFY2(store, qPrintable(error));
        QVERIFY2(store->save(QStringLiteral("fp"), QStringLiteral("fp8"), c.output, {}, &error),
                 qPrintable(error));
        const auto loaded = store->load(QStringLiteral("fp"));
        QVERIFY(loaded && loaded->results.size() == 1);
        QVERIFY(same(loaded->results.front().fp8Scales));
        QVERIFY(loaded->results.front().isFaulty());

        TaskOutcomes outcomes;
        TaskOutcome outcome;
        outcome.result = c.output.results.front();
        outcomes.finished.push_back(outcome);
        const auto decoded = decodeTaskOutcomes(encodeTaskOutcomes(outcomes));
        QVERIFY(decoded && decoded->finished.size() == 1 && decoded->finished[0].result);
        QVERIFY(same(decoded->finished[0].result->fp8Scales));

        CheckReport report;
        report.comparison = c.output;
        report.localization = localize(report.comparison.results);
        const QJsonObject json = QJsonDocument::fromJson(reportToJson(report)).object();
        const QJsonObject scales = json[QStringLiteral("tensors")]
                                       .toArray()[0]
                                       .toObject()[QStringLiteral("fp8_scales")]
                                       .toObject();
        QCOMPARE(scales[QStringLiteral("reference_scale_inv")].toDouble(), 1.0);
        QCOMPARE(scales[QStringLiteral("copies_agree")].toBool(true), false);
        const QJsonObject mismatch = scales[QStringLiteral("mismatches")].toArray()[0].toObject();
        QCOMPARE(mismatch[QStringLiteral("ratio")].toDouble(), 0.5);
        QCOMPARE(mismatch[QStringLiteral("ranks")].toArray(), QJsonArray{1});
        for (const QString& text : {reportToMarkdown(report), reportToHtml(report)}) {
            QVERIFY2(text.contains(QStringLiteral("fp8 scale vs reference")), qPrintable(text));
            QVERIFY(text.contains(QStringLiteral("amax not reduced")));
        }
    }
};

QTEST_GUILESS_MAIN(TestFp8Scales)
#include "test_fp8_scales.moc"
