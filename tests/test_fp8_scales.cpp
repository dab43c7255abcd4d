// The fp8 scale check on hand-built fp8 traces (real HDF5 files): a tensor-parallel tensor of
// two shards whose bytes decode to the reference's values, so that only the scales can tell a
// shard quantized with its own amax from a right one, with one scale per tensor or per row.
// Also the check's way through the localization, the results store, the MPI codec and the
// JSON report, the decoding of per-row scales, and the indexer's messages on malformed ones.
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>

#include "DiagnosticText.h"
#include "Fp8Traces.h"
#include "Hdf5TestFiles.h"
#include "compare/ComparisonJob.h"
#include "compare/FaultDescription.h"
#include "compare/Localization.h"
#include "compare/TaskOutcomesCodec.h"
#include "report/ReportWriters.h"
#include "store/ResultsStore.h"
#include "trace/Hdf5Reader.h"
#include "trace/TraceSet.h"

using namespace ttrace;
using namespace ttrace::test;

namespace {

// The same tensors with trusted runs laid out over two ranks by rows (Shard(0) over `axis`:
// data-parallel "dp", each rank its own samples, or "tp", rows of the same samples), rank r
// of the reference storing its row as `reference[r]` says and the perturbed reference's rows
// scaled by `perturbedScale`; the distributed run splits the columns as in Fp8Traces.
struct LaidOutFp8Traces {
    QTemporaryDir dir;
    QString dist, ref, pert;

    LaidOutFp8Traces(std::array<ShardBytes, 2> reference, double perturbedScale, ShardBytes shard1,
                     const QString& axis = QStringLiteral("dp")) {
        ref = dir.filePath(QStringLiteral("ref"));
        pert = dir.filePath(QStringLiteral("pert"));
        dist = dir.filePath(QStringLiteral("dist"));
        for (const auto& folder : {ref, pert, dist}) {
            QVERIFY(QDir().mkpath(folder));
        }
        const std::array<ShardBytes, 2> perturbed = {ShardBytes{kTwo, perturbedScale},
                                                     ShardBytes{kTwo, perturbedScale}};
        QVERIFY(test::writeManifest(ref, 2, axis, QStringLiteral("reference")));
        QVERIFY(test::writeManifest(pert, 2, axis, QStringLiteral("perturbed-reference")));
        for (const auto& [folder, rows] : {std::pair{ref, reference}, std::pair{pert, perturbed}}) {
            for (int r = 0; r < 2; ++r) {
                const std::vector<std::uint8_t> row(kCols, rows[r].byte);
                writeFp8(rankFile(folder, r), r, row, kCols, rows[r].scaleInv,
                         QByteArray("[[[") + QByteArray::number(r) + ',' +
                             QByteArray::number(r + 1) + "]],[[0,4]]]",
                         1, "{\"" + axis.toUtf8() + "\": \"Shard(0)\"}");
            }
        }
        QVERIFY(test::writeManifest(dist, 2, QStringLiteral("tp")));
        const std::vector<std::uint8_t> left(kRows * kCols / 2, kTwo);
        writeFp8(rankFile(dist, 0), 0, left, kCols / 2, 1.0, "[[[0,2]],[[0,2]]]");
        const std::vector<std::uint8_t> right(kRows * kCols / 2, shard1.byte);
        writeFp8(rankFile(dist, 1), 1, right, kCols / 2, shard1.scaleInv, "[[[0,2]],[[2,4]]]");
    }
};

// One [2, 2] fp8 forward_input shard at `ranges` scaled per column (blocks of [2, 1], scale 1,
// every byte 2): scales laid along the other axis than a per-row reference's.
void writeColumnScaledFp8(const QString& path, int rank, const QByteArray& ranges) {
    test::RankFileWriter w(path, rank);
    QVERIFY(w.valid());
    const std::vector<std::uint8_t> bytes(kRows * kCols / 2, kTwo);
    const hid_t ds =
        w.dataset("000000", H5T_STD_U8LE, H5T_NATIVE_UINT8, {kRows, kCols / 2}, bytes.data());
    test::RankFileWriter::standardAttributes(ds, kName, "forward_input", 0, "fp8_e4m3",
                                             {kRows, kCols});
    w.blockScales(ds, "000000", {static_cast<std::int32_t>(kRows), 1}, {1, kCols / 2},
                  std::vector<double>(kCols / 2, 1.0));
    test::RankFileWriter::variableString(ds, "ranges", ranges);
    test::RankFileWriter::variableString(ds, "placements", "{\"tp\": \"Shard(1)\"}");
    H5Dclose(ds);
}

// One fp8 forward_input shard of the [2, 4] tensor holding columns [first, 4) or [0, first),
// scaled in blocks of [1, 2] tiling it from its first column (scale 1, every byte 2).
void writeColumnsInBlocksOfTwo(const QString& path, int rank, hsize_t begin, hsize_t end) {
    test::RankFileWriter w(path, rank);
    QVERIFY(w.valid());
    const hsize_t cols = end - begin, blocks = (cols + 1) / 2;
    const std::vector<std::uint8_t> bytes(kRows * cols, kTwo);
    const hid_t ds =
        w.dataset("000000", H5T_STD_U8LE, H5T_NATIVE_UINT8, {kRows, cols}, bytes.data());
    test::RankFileWriter::standardAttributes(ds, kName, "forward_input", 0, "fp8_e4m3",
                                             {kRows, kCols});
    w.blockScales(ds, "000000", {1, 2}, {kRows, blocks}, std::vector<double>(kRows * blocks, 1.0));
    test::RankFileWriter::variableString(
        ds, "ranges",
        QStringLiteral("[[[0,%1]],[[%2,%3]]]").arg(kRows).arg(begin).arg(end).toUtf8());
    test::RankFileWriter::variableString(ds, "placements", "{\"tp\": \"Shard(1)\"}");
    H5Dclose(ds);
}

// A [1, 64] fp8 forward_input tensor laid out over two TP ranks as every run of it is: rank r
// holds columns [32 r, 32 r + 32) as one block of [1, 32], scale_inv 1 on rank 0 and 1/2 on
// rank 1 (each decoding to 2), its scales in `scaleFormat` where one is given ("e8m0": MX's
// blocks of 32, exactly as wide as a shard).
struct ThirtyTwoWideShards {
    QTemporaryDir dir;
    QString dist, ref, pert;

    explicit ThirtyTwoWideShards(const char* scaleFormat) {
        ref = dir.filePath(QStringLiteral("ref"));
        pert = dir.filePath(QStringLiteral("pert"));
        dist = dir.filePath(QStringLiteral("dist"));
        for (const auto& [folder, role] : {std::pair{ref, QStringLiteral("reference")},
                                           std::pair{pert, QStringLiteral("perturbed-reference")},
                                           std::pair{dist, QStringLiteral("distributed")}}) {
            QVERIFY(QDir().mkpath(folder));
            QVERIFY(test::writeManifest(folder, 2, QStringLiteral("tp"), role));
            for (int r = 0; r < 2; ++r) {
                test::RankFileWriter w(rankFile(folder, r), r);
                QVERIFY(w.valid());
                const std::vector<std::uint8_t> bytes(32, r == 0 ? kTwo : kFour);
                const hid_t ds =
                    w.dataset("000000", H5T_STD_U8LE, H5T_NATIVE_UINT8, {1, 32}, bytes.data());
                test::RankFileWriter::standardAttributes(ds, kName, "forward_input", 0, "fp8_e4m3",
                                                         {1, 64});
                w.blockScales(ds, "000000", {1, 32}, {1, 1}, {r == 0 ? 1.0 : 0.5});
                if (scaleFormat != nullptr) {
                    test::RankFileWriter::variableString(ds, "scale_format", scaleFormat);
                }
                test::RankFileWriter::variableString(
                    ds, "ranges", r == 0 ? "[[[0,1]],[[0,32]]]" : "[[[0,1]],[[32,64]]]");
                test::RankFileWriter::variableString(ds, "placements", "{\"tp\": \"Shard(1)\"}");
                H5Dclose(ds);
            }
        }
    }
};

// How the distributed run's shards are scaled: in blocks of [1, 2] as the grids say, per
// tensor (scale_inv 1), or per column (writeColumnScaledFp8).
enum class ShardScaling { Grid, PerTensor, PerColumn };

// The [2, 4] tensor scaled per block: the reference (and perturbed reference) as `reference`
// says, in blocks of [1, 4 / its grid's columns]; the distributed run splits the columns over
// two TP ranks, each scaling its [2, 2] half in blocks of [1, 2] as `rank0` and `rank1` say.
// `scaling` may have the ranks scale their halves per tensor or per column instead.
struct BlockScaledTraces {
    QTemporaryDir dir;
    QString dist, ref, pert;

    // With `referenceLaidOut`, the trusted runs split the columns as the distributed run does,
    // each rank scaling its half of a row by the whole row's scale in `reference` (scaled per
    // row).
    // Every run's scales are in `scaleFormat` where one is given.
    BlockScaledTraces(const BlockGrid& reference, const BlockGrid& rank0, const BlockGrid& rank1,
                      ShardScaling scaling = ShardScaling::Grid, bool referenceLaidOut = false,
                      const char* scaleFormat = nullptr) {
        ref = dir.filePath(QStringLiteral("ref"));
        pert = dir.filePath(QStringLiteral("pert"));
        dist = dir.filePath(QStringLiteral("dist"));
        for (const auto& folder : {ref, pert, dist}) {
            QVERIFY(QDir().mkpath(folder));
        }
        const QByteArray left = "[[[0,2]],[[0,2]]]", right = "[[[0,2]],[[2,4]]]";
        const hsize_t referenceBlockCols = kCols / reference.front().size();
        for (const auto& [folder, role] :
             {std::pair{ref, QStringLiteral("reference")},
              std::pair{pert, QStringLiteral("perturbed-reference")}}) {
            if (referenceLaidOut) {
                QVERIFY(test::writeManifest(folder, 2, QStringLiteral("tp"), role));
                writeBlockScaledFp8(rankFile(folder, 0), 0, reference, kCols / 2, left,
                                    scaleFormat);
                writeBlockScaledFp8(rankFile(folder, 1), 1, reference, kCols / 2, right,
                                    scaleFormat);
            } else {
                QVERIFY(test::writeManifest(folder, 1, QString(), role));
                writeBlockScaledFp8(rankFile(folder, 0), 0, reference, referenceBlockCols, {},
                                    scaleFormat);
            }
        }
        QVERIFY(test::writeManifest(dist, 2, QStringLiteral("tp")));
        if (scaling == ShardScaling::PerTensor) {
            const std::vector<std::uint8_t> half(kRows * kCols / 2, kTwo);
            writeFp8(rankFile(dist, 0), 0, half, kCols / 2, 1.0, left);
            writeFp8(rankFile(dist, 1), 1, half, kCols / 2, 1.0, right);
        } else if (scaling == ShardScaling::PerColumn) {
            writeColumnScaledFp8(rankFile(dist, 0), 0, left);
            writeColumnScaledFp8(rankFile(dist, 1), 1, right);
        } else {
            writeBlockScaledFp8(rankFile(dist, 0), 0, rank0, kCols / 2, left, scaleFormat);
            writeBlockScaledFp8(rankFile(dist, 1), 1, rank1, kCols / 2, right, scaleFormat);
        }
    }
};

// The reference scaled per row, 1 and 1/2.
const BlockGrid kReferenceRows = perRow({kOneX, kHalfX});

struct Compared {
    std::unique_ptr<TraceSet> dist, ref, pert;
    ComparisonOutput output;
};

template <typename Traces>
Compared compare(const Traces& traces) {
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

// Every field of two scale checks, mismatches included.
bool sameScaleCheck(const std::optional<Fp8ScaleCheck>& got, const Fp8ScaleCheck& expected) {
    const auto sameMismatch = [](const ScaleMismatch& a, const ScaleMismatch& b) {
        return a.ranges == b.ranges && a.ranks == b.ranks && a.block == b.block &&
               a.scaleInv == b.scaleInv && a.referenceScaleInv == b.referenceScaleInv &&
               a.ratio == b.ratio && a.blocksBeyond == b.blocksBeyond &&
               a.acrossReferenceBlocks == b.acrossReferenceBlocks;
    };
    return got && got->referenceBlock == expected.referenceBlock &&
           got->referenceFormat == expected.referenceFormat &&
           got->referenceTensorScale == expected.referenceTensorScale &&
           got->referenceScaleInv == expected.referenceScaleInv &&
           got->perturbedScaleInv == expected.perturbedScaleInv &&
           got->tolerance == expected.tolerance && got->maxDifference == expected.maxDifference &&
           got->copiesAgree == expected.copiesAgree &&
           got->blocksNotCompared == expected.blocksNotCompared &&
           got->dataParallelBlocks == expected.dataParallelBlocks &&
           std::equal(got->mismatches.begin(), got->mismatches.end(), expected.mismatches.begin(),
                      expected.mismatches.end(), sameMismatch);
}

// A tensor of kRows x kCols fp8 2s, whole in the references (scale_inv 1); the distributed run
// splits its rows over a data-parallel axis and, on a 2 x 2 mesh, its columns over tp: rank r
// holds row r / 2 (dp) and, with tp, columns (r % 2) * 2 onwards, stored as `shards[r]` says.
struct DataParallelFp8Traces : WholeTrustedFp8Runs {
    explicit DataParallelFp8Traces(const std::vector<ShardBytes>& shards)
        : WholeTrustedFp8Runs(1.0) {
        const bool tp = shards.size() == 4;
        QVERIFY(writeManifest(dist, static_cast<int>(shards.size()), QStringLiteral("dp")));
        if (tp) {  // the mesh (dp, tp), tp fastest
            QFile file(dist + QStringLiteral("/manifest.json"));
            QVERIFY(file.open(QIODevice::ReadOnly));
            QJsonObject manifest = QJsonDocument::fromJson(file.readAll()).object();
            file.close();
            manifest[QStringLiteral("mesh")] = QJsonObject{
                {QStringLiteral("axes"), QJsonArray{QStringLiteral("dp"), QStringLiteral("tp")}},
                {QStringLiteral("shape"), QJsonArray{2, 2}}};
            QJsonArray ranks = manifest[QStringLiteral("ranks")].toArray();
            for (int r = 0; r < 4; ++r) {
                QJsonObject rank = ranks[r].toObject();
                rank[QStringLiteral("coords")] = QJsonArray{r / 2, r % 2};
                ranks[r] = rank;
            }
            manifest[QStringLiteral("ranks")] = ranks;
            QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Truncate));
            file.write(QJsonDocument(manifest).toJson());
        }
        for (int r = 0; r < static_cast<int>(shards.size()); ++r) {
            const int row = tp ? r / 2 : r;
            const int cols = tp ? kCols / 2 : kCols;
            const int first = tp ? (r % 2) * cols : 0;
            const std::vector<std::uint8_t> bytes(cols, shards[r].byte);
            writeFp8(
                rankFile(dist, r), r, bytes, cols, shards[r].scaleInv,
                QByteArrayLiteral("[[[%1,%2]],[[%3,%4]]]")
                    .replace("%1", QByteArray::number(row))
                    .replace("%2", QByteArray::number(row + 1))
                    .replace("%3", QByteArray::number(first))
                    .replace("%4", QByteArray::number(first + cols)),
                1, tp ? "{\"dp\": \"Shard(0)\", \"tp\": \"Shard(1)\"}" : "{\"dp\": \"Shard(0)\"}");
        }
    }
};

// The single result's scale check as the results store and the MPI codec give it back.
struct ScaleCheckCopies {
    std::optional<Fp8ScaleCheck> stored, decoded;
};
ScaleCheckCopies throughStoreAndCodec(const ComparisonOutput& output) {
    ScaleCheckCopies copies;
    QTemporaryDir cache;
    QString error;
    auto store = ResultsStore::open(cache.filePath(QStringLiteral("results.sqlite")), &error);
    if (store && store->save(QStringLiteral("fp"), QStringLiteral("fp8"), output, {}, &error)) {
        const auto loaded = store->load(QStringLiteral("fp"));
        if (loaded && loaded->results.size() == 1) {
            copies.stored = loaded->results.front().fp8Scales;
        }
    }
    TaskOutcomes outcomes;
    TaskOutcome outcome;
    outcome.result = output.results.front();
    outcomes.finished.push_back(outcome);
    const auto decoded = decodeTaskOutcomes(encodeTaskOutcomes(outcomes));
    if (decoded && decoded->finished.size() == 1 && decoded->finished[0].result) {
        copies.decoded = decoded->finished[0].result->fp8Scales;
    }
    return copies;
}

// The JSON report's fp8_scales of the first tensor of `output`.
QJsonObject firstScalesJson(const ComparisonOutput& output) {
    CheckReport report;
    report.comparison = output;
    report.localization = localize(report.comparison.results);
    return QJsonDocument::fromJson(reportToJson(report))
        .object()[QStringLiteral("tensors")]
        .toArray()[0]
        .toObject()[QStringLiteral("fp8_scales")]
        .toObject();
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
        // No perturbed difference: the theoretical bound of bf16's round-off is the tolerance,
        // 4 x 1.03 x 2^-7 (forward input of layer 0), not the values' bound, which
        // takes e4m3's epsilon under this fp8 recipe.
        QCOMPARE(r.fp8Scales->tolerance, 4 * 1.03 * std::ldexp(1.0, -7));
        QCOMPARE(r.threshold.theoretical, 4 * 1.03 * std::ldexp(1.0, -3));
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
        const ScaleCheckCopies copies = throughStoreAndCodec(c.output);
        QVERIFY(sameScaleCheck(copies.stored, expected));
        QVERIFY(sameScaleCheck(copies.decoded, expected));

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

    // Every row of each rank carries the whole row's scale: values decode exactly through
    // their row's scale, and each rank's half-row blocks agree with the reference's rows.
    // Data-parallel ranks hold other samples, each quantized with its own amax: rank 1's
    // scale is not the reference's, and that is no fault. Its values lie on another fp8 grid:
    // the tensor's floor is e4m3's epsilon.
    void dataParallelRanksScaleTheirOwnSamples() {
        const DataParallelFp8Traces traces({kRightScale, kHalfScale});
        const Compared c = compare(traces);
        QCOMPARE(c.output.results.size(), std::size_t{1});
        const TensorResult& r = c.output.results.front();
        QVERIFY2(r.fp8Scales.has_value(), qPrintable(messages(c.output.diagnostics)));
        QVERIFY(r.fp8Scales->mismatches.empty());
        QCOMPARE(r.fp8Scales->dataParallelBlocks, std::int64_t{1});
        QCOMPARE(r.fp8Scales->maxDifference, 0.0);
        QCOMPARE(r.threshold.floor, std::ldexp(1.0, -3));
        QVERIFY(!r.isFaulty());
        const auto copies = throughStoreAndCodec(c.output);
        QVERIFY(sameScaleCheck(copies.stored, *r.fp8Scales));
        QVERIFY(sameScaleCheck(copies.decoded, *r.fp8Scales));
        QCOMPARE(firstScalesJson(c.output)[QStringLiteral("data_parallel_blocks")].toInt(), 1);
        // Every rank with the reference's scale: nothing to count, the floor stays bf16's.
        const DataParallelFp8Traces same({kRightScale, kRightScale});
        const Compared sameCompared = compare(same);
        const TensorResult& alike = sameCompared.output.results.front();
        QCOMPARE(alike.fp8Scales->dataParallelBlocks, std::int64_t{0});
        QCOMPARE(alike.threshold.floor, std::ldexp(1.0, -7));
    }

    // On a dp x tp mesh the tensor-parallel peers of one data-parallel rank must agree: rank
    // 3's half of row 1 with its own amax is a mismatch, held to its peer's (the larger)
    // scale, not to the reference's; row 0's peers agree on a scale of their own.
    void tensorParallelPeersOfOneDataParallelRankMustAgree() {
        const DataParallelFp8Traces traces({kHalfScale, kHalfScale, kRightScale, kHalfScale});
        const Compared c = compare(traces);
        const TensorResult& r = c.output.results.front();
        QVERIFY2(r.fp8Scales.has_value(), qPrintable(messages(c.output.diagnostics)));
        QCOMPARE(r.fp8Scales->mismatches.size(), std::size_t{1});
        const ScaleMismatch& m = r.fp8Scales->mismatches.front();
        QCOMPARE(m.ranks, std::vector<int>{3});
        QCOMPARE(m.referenceScaleInv, 1.0);  // rank 2's, the larger of row 1's
        QCOMPARE(m.ratio, 0.5);
        QVERIFY(!r.fp8Scales->copiesAgree);
        QVERIFY(r.isFaulty());
        QCOMPARE(r.fp8Scales->dataParallelBlocks, std::int64_t{3});
    }

    void rowScalesDecodeAndPass() {
        const BlockScaledTraces traces(kReferenceRows, kReferenceRows, kReferenceRows);
        const Compared c = compare(traces);
        QCOMPARE(c.output.results.size(), std::size_t{1});
        const TensorResult& r = c.output.results.front();
        QVERIFY2(r.fp8Scales.has_value(), qPrintable(messages(c.output.diagnostics)));
        QCOMPARE(r.metrics.relativeError, 0.0);  // 2 everywhere, from bytes 2 and 4
        QCOMPARE(r.fp8Scales->referenceBlock, (std::vector<std::int64_t>{1, kCols}));
        QCOMPARE(r.fp8Scales->referenceScaleInv, 1.0);  // the largest row scale
        QCOMPARE(r.fp8Scales->blocksNotCompared, std::int64_t{0});
        QCOMPARE(r.fp8Scales->maxDifference, 0.0);
        QVERIFY(r.fp8Scales->copiesAgree);
        QVERIFY(r.fp8Scales->mismatches.empty());
        QVERIFY(!r.isFaulty());

        // A box across both rows and blocks decodes each element through its own row's scale.
        const auto* record = c.dist->records.data();
        for (const auto& candidate : c.dist->records) {
            record = candidate.rank == 1 ? &candidate : record;
        }
        QCOMPARE(record->scales.block, (std::vector<std::int64_t>{1, kCols / 2}));
        Hdf5Reader reader;
        float out[2] = {0, 0};
        const std::int64_t start[2] = {0, 1}, count[2] = {2, 1};
        QVERIFY(!reader.read(*record, start, count, out));
        QCOMPARE(out[0], 2.0f);  // byte 2 x 1
        QCOMPARE(out[1], 2.0f);  // byte 4 x 1/2
    }

    // Rank 1 scales row 1 by the amax of its own half of the row: a quarter where the whole
    // row's is a half. Its values are exact; the block's scale disagrees with rank 0's block of
    // the same row and is named, down to the block.
    void rowScaleOfOwnPartIsReportedByBlock() {
        const BlockScaledTraces traces(kReferenceRows, kReferenceRows, perRow({kOneX, kQuarterX}));
        const Compared c = compare(traces);
        QCOMPARE(c.output.results.size(), std::size_t{1});
        const TensorResult& r = c.output.results.front();
        QCOMPARE(r.metrics.relativeError, 0.0);
        QVERIFY(r.fp8Scales.has_value());
        QVERIFY(!r.fp8Scales->copiesAgree);
        QCOMPARE(r.fp8Scales->mismatches.size(), std::size_t{1});
        const ScaleMismatch& m = r.fp8Scales->mismatches.front();
        QCOMPARE(m.ranks, std::vector<int>{1});
        QCOMPARE(m.ranges.toString(), QStringLiteral("[0:2][2:4]"));
        QCOMPARE(m.block.toString(), QStringLiteral("[1:2][2:4]"));
        QCOMPARE(m.scaleInv, 0.25);
        QCOMPARE(m.referenceScaleInv, 0.5);
        QCOMPARE(m.ratio, 0.5);
        QCOMPARE(m.blocksBeyond, std::int64_t{1});
        QVERIFY(r.isFaulty());
        const QString fault = describeFault(r);
        QVERIFY2(fault.startsWith(QStringLiteral("fp8 scale_inv of block [1:2][2:4] in shard "
                                                 "[0:2][2:4] on rank 1 is 0.5x the reference's")),
                 qPrintable(fault));
        QVERIFY2(fault.contains(QStringLiteral("amax not reduced across the ranks holding the "
                                               "block")),
                 qPrintable(fault));
        const Localization loc = localize(c.output.results);
        QVERIFY(loc.faultyShard);
        QCOMPARE(loc.faultyShard->ranks, std::vector<int>{1});

        // The block-level fields travel through the store, the codec and the JSON report.
        const ScaleCheckCopies copies = throughStoreAndCodec(c.output);
        QVERIFY(sameScaleCheck(copies.stored, *r.fp8Scales));
        QVERIFY(sameScaleCheck(copies.decoded, *r.fp8Scales));
        const QJsonObject scales = firstScalesJson(c.output);
        QCOMPARE(scales[QStringLiteral("reference_block")].toArray(), (QJsonArray{1, kCols}));
        const QJsonObject mismatch = scales[QStringLiteral("mismatches")].toArray()[0].toObject();
        QCOMPARE(mismatch[QStringLiteral("block_text")].toString(), QStringLiteral("[1:2][2:4]"));
        QCOMPARE(mismatch[QStringLiteral("reference_scale_inv")].toDouble(), 0.5);
        QCOMPARE(mismatch[QStringLiteral("blocks_beyond")].toInt(), 1);
    }

    // The same fault under MXFP8's E8M0 scales (scale_format): the findings and reports name
    // the recipe, and what the scales are travels through the store, the codec and the JSON.
    void mxScalesNameTheirRecipe() {
        const BlockScaledTraces traces(kReferenceRows, kReferenceRows, perRow({kOneX, kQuarterX}),
                                       ShardScaling::Grid, false, "e8m0");
        const Compared c = compare(traces);
        QCOMPARE(c.output.results.size(), std::size_t{1});
        const TensorResult& r = c.output.results.front();
        QVERIFY(r.fp8Scales.has_value());
        QCOMPARE(r.fp8Scales->referenceFormat, std::optional(ScaleFormat::E8M0));
        QVERIFY(!r.fp8Scales->referenceTensorScale);
        QCOMPARE(scaleRecipe(*r.fp8Scales, r.dtype), QStringLiteral("MXFP8"));
        const QString fault = describeFault(r);
        QVERIFY2(fault.startsWith(QStringLiteral("MXFP8 scale_inv of block [1:2][2:4] in shard "
                                                 "[0:2][2:4] on rank 1 is 0.5x the reference's")),
                 qPrintable(fault));
        const ScaleCheckCopies copies = throughStoreAndCodec(c.output);
        QVERIFY(sameScaleCheck(copies.stored, *r.fp8Scales));
        QVERIFY(sameScaleCheck(copies.decoded, *r.fp8Scales));
        const QJsonObject scales = firstScalesJson(c.output);
        QCOMPARE(scales[QStringLiteral("reference_scale_format")].toString(),
                 QStringLiteral("e8m0"));
        QCOMPARE(scales[QStringLiteral("reference_tensor_scale")].toBool(true), false);
        CheckReport report;
        report.comparison = c.output;
        report.localization = localize(report.comparison.results);
        for (const QString& text : {reportToMarkdown(report), reportToHtml(report)}) {
            QVERIFY2(text.contains(QStringLiteral("MXFP8 scale")), qPrintable(text));
        }
        QVERIFY(
            reportToMarkdown(report).contains(QStringLiteral("| Quantized tensors | 1 MXFP8 |")));
        // Without a scale_format the scales are float64 numbers, whatever they hold: "fp8".
        const BlockScaledTraces plain(kReferenceRows, kReferenceRows, perRow({kOneX, kQuarterX}));
        const Compared p = compare(plain);
        QCOMPARE(p.output.results.front().fp8Scales->referenceFormat, std::nullopt);
        QCOMPARE(firstScalesJson(p.output)[QStringLiteral("reference_scale_format")].type(),
                 QJsonValue::Null);
    }

    // Both ranks scale row 1 by a quarter: one scale inside the reference's row block, so the
    // amax was reduced, and a difference from the reference's is one of values.
    void oneRowScaleOnEveryCopyIsNotAScaleFault() {
        const BlockScaledTraces traces(kReferenceRows, perRow({kOneX, kQuarterX}),
                                       perRow({kOneX, kQuarterX}));
        const Compared c = compare(traces);
        QCOMPARE(c.output.results.size(), std::size_t{1});
        const TensorResult& r = c.output.results.front();
        QVERIFY(r.fp8Scales->copiesAgree);
        QCOMPARE(r.fp8Scales->maxDifference, 0.5);
        QVERIFY(r.fp8Scales->mismatches.empty());
        QVERIFY(!r.isFaulty());
    }

    // Shards scaled per tensor against a reference scaled per row: a shard's one block spans
    // both of the reference's rows, so no scale of the reference holds it. Counted, not judged.
    void perTensorShardsAgainstRowScalesAreNotCompared() {
        const BlockScaledTraces traces(kReferenceRows, {}, {}, ShardScaling::PerTensor);
        const Compared c = compare(traces);
        QCOMPARE(c.output.results.size(), std::size_t{1});
        const TensorResult& r = c.output.results.front();
        QVERIFY(r.fp8Scales.has_value());
        QCOMPARE(r.fp8Scales->blocksNotCompared, std::int64_t{2});
        QVERIFY(r.fp8Scales->mismatches.empty());
        QCOMPARE(r.metrics.relativeError, 0.0);
        QVERIFY(!r.isFaulty());
    }

    // Shards scaled per column against a reference scaled per row (MX scales laid along the
    // wrong axis): each block runs across both of the reference's rows, which no cut of the
    // reference's blocks gives. The values decode exactly; the layout is the fault, on both
    // ranks, and it travels through the store, the codec and the reports.
    void blocksAcrossTheReferencesAreALayoutFault() {
        const BlockScaledTraces traces(kReferenceRows, {}, {}, ShardScaling::PerColumn);
        const Compared c = compare(traces);
        QCOMPARE(c.output.results.size(), std::size_t{1});
        const TensorResult& r = c.output.results.front();
        QVERIFY2(r.fp8Scales.has_value(), qPrintable(messages(c.output.diagnostics)));
        QCOMPARE(r.metrics.relativeError, 0.0);
        QCOMPARE(r.fp8Scales->blocksNotCompared, std::int64_t{0});
        QCOMPARE(r.fp8Scales->mismatches.size(), std::size_t{2});
        const ScaleMismatch& m = r.fp8Scales->mismatches.front();
        QVERIFY(m.acrossReferenceBlocks);
        QCOMPARE(m.ranks, std::vector<int>{0});
        QCOMPARE(m.block.toString(), QStringLiteral("[0:2][0:1]"));
        QCOMPARE(m.referenceScaleInv, 1.0);  // row 0's, where the block starts
        QCOMPARE(m.blocksBeyond, std::int64_t{2});
        QVERIFY(r.fp8Scales->mismatches[1].acrossReferenceBlocks);
        QVERIFY(r.isFaulty());
        const QString fault = describeFault(r);
        QVERIFY2(fault.startsWith(QStringLiteral(
                     "fp8 scale block [0:2][0:1] in shard [0:2][0:2] on rank 0 lies across "
                     "the reference's blocks of [1, 4] (2 of its blocks do), also on rank 1: "
                     "its scales run along another axis")),
                 qPrintable(fault));

        const ScaleCheckCopies copies = throughStoreAndCodec(c.output);
        QVERIFY(sameScaleCheck(copies.stored, *r.fp8Scales));
        QVERIFY(sameScaleCheck(copies.decoded, *r.fp8Scales));
        const QJsonObject mismatch =
            firstScalesJson(c.output)[QStringLiteral("mismatches")].toArray()[0].toObject();
        QCOMPARE(mismatch[QStringLiteral("across_reference_blocks")].toBool(), true);
        CheckReport report;
        report.comparison = c.output;
        report.localization = localize(report.comparison.results);
        for (const QString& text : {reportToMarkdown(report), reportToHtml(report)}) {
            QVERIFY2(text.contains(QStringLiteral("laid out otherwise")), qPrintable(text));
        }
    }

    // Blocks of the reference's own shape, [1, 2], on a shard that starts inside one (columns
    // [1, 4)): its first block covers columns 1-2, across two of the reference's. A rank file
    // cannot say whether the recipe aligned it with the whole tensor's grid, so it is not
    // compared; it is no layout fault, and the shard's aligned block is still held to its own.
    void sameBlocksOnAShardStartingInsideOneAreNotCompared() {
        const BlockScaledTraces traces({{kOneX, kOneX}, {kOneX, kOneX}}, {{kOneX}, {kOneX}},
                                       {{kOneX}, {kOneX}});
        writeColumnsInBlocksOfTwo(rankFile(traces.dist, 0), 0, 0, 1);
        writeColumnsInBlocksOfTwo(rankFile(traces.dist, 1), 1, 1, 4);
        const Compared c = compare(traces);
        QCOMPARE(c.output.results.size(), std::size_t{1});
        const TensorResult& r = c.output.results.front();
        QVERIFY2(r.fp8Scales.has_value(), qPrintable(messages(c.output.diagnostics)));
        QCOMPARE(r.metrics.relativeError, 0.0);
        QCOMPARE(r.fp8Scales->blocksNotCompared, std::int64_t{2});  // columns 1-2 of each row
        QVERIFY(r.fp8Scales->mismatches.empty());
        QVERIFY(!r.isFaulty());
    }

    // Blocks of [1, 2] in a 2 x 2 grid: each rank's half-row blocks are the reference's own
    // blocks, found through the shard's column range. Rank 1 carrying the other row's scales
    // shows as differences of exactly those blocks' ratios (one copy per block: values, not
    // scale mismatches).
    void blocksOfAGridMeetTheReferenceBlocksHoldingThem() {
        const BlockGrid reference = {{kOneX, kHalfX}, {kQuarterX, kOneX}};
        const BlockScaledTraces right(reference, {{kOneX}, {kQuarterX}}, {{kHalfX}, {kOneX}});
        const Compared c = compare(right);
        QCOMPARE(c.output.results.size(), std::size_t{1});
        const TensorResult& r = c.output.results.front();
        QVERIFY2(r.fp8Scales.has_value(), qPrintable(messages(c.output.diagnostics)));
        QCOMPARE(r.fp8Scales->referenceBlock, (std::vector<std::int64_t>{1, 2}));
        QCOMPARE(r.metrics.relativeError, 0.0);
        QCOMPARE(r.fp8Scales->maxDifference, 0.0);
        QCOMPARE(r.fp8Scales->blocksNotCompared, std::int64_t{0});

        const BlockScaledTraces swapped(reference, {{kOneX}, {kQuarterX}}, {{kOneX}, {kHalfX}});
        const Compared s = compare(swapped);
        QCOMPARE(s.output.results.size(), std::size_t{1});
        const TensorResult& t = s.output.results.front();
        QCOMPARE(t.metrics.relativeError, 0.0);
        QCOMPARE(t.fp8Scales->maxDifference, 1.0);  // 1 against 1/2 in block [0:1][2:4]
        QVERIFY(t.fp8Scales->copiesAgree);
        QVERIFY(t.fp8Scales->mismatches.empty());
    }

    // A reference laid out over two ranks by rows, scaled per tensor: its pieces carry the
    // whole tensor's scale, and each shard of the distributed run (split by columns) is held
    // to it as to a reference held whole, within the perturbed reference's movement.
    void laidOutReferenceGivesTheWholeTensorsScale() {
        const LaidOutFp8Traces right({kRightScale, kRightScale}, 1.0, kRightScale);
        const Compared c = compare(right);
        QCOMPARE(c.output.results.size(), std::size_t{1});
        const TensorResult& r = c.output.results.front();
        QVERIFY2(r.fp8Scales.has_value(), qPrintable(messages(c.output.diagnostics)));
        QVERIFY(r.fp8Scales->referenceBlock.empty());
        QCOMPARE(r.fp8Scales->referenceScaleInv, 1.0);
        QCOMPARE(r.fp8Scales->perturbedScaleInv, std::optional<double>(1.0));
        QCOMPARE(r.fp8Scales->blocksNotCompared, std::int64_t{0});
        QVERIFY(r.fp8Scales->mismatches.empty());
        QVERIFY(!r.isFaulty());

        const LaidOutFp8Traces half({kRightScale, kRightScale}, 1.0, kHalfScale);
        const Compared h = compare(half);
        QCOMPARE(h.output.results.size(), std::size_t{1});
        const TensorResult& t = h.output.results.front();
        QCOMPARE(t.metrics.relativeError, 0.0);
        QVERIFY(t.fp8Scales.has_value());
        QCOMPARE(t.fp8Scales->mismatches.size(), std::size_t{1});
        QCOMPARE(t.fp8Scales->mismatches.front().ranks, std::vector<int>{1});
        QCOMPARE(t.fp8Scales->mismatches.front().ratio, 0.5);
        QVERIFY(t.isFaulty());
        const Localization loc = localize(h.output.results);
        QVERIFY(loc.faultyShard);
        QCOMPARE(loc.faultyShard->ranks, std::vector<int>{1});

        const LaidOutFp8Traces noisy({kRightScale, kRightScale}, 1.1, kTwoThirdsScale);
        const Compared n = compare(noisy);
        QCOMPARE(n.output.results.size(), std::size_t{1});
        QVERIFY(qAbs(n.output.results.front().fp8Scales->tolerance - 0.8) < 1e-12);
        QVERIFY(!n.output.results.front().isFaulty());
    }

    // The reference's own pieces of the same samples (rows over tp) carry different scales of
    // one tensor (its amax not reduced): said of the reference, naming its rank file; the
    // scales are not checked against it, so a distributed shard with the same wrong scale is
    // not blamed for it.
    void laidOutReferenceScalesThatDisagreeAreItsOwn() {
        const LaidOutFp8Traces traces({kRightScale, kHalfScale}, 1.0, kHalfScale,
                                      QStringLiteral("tp"));
        const Compared c = compare(traces);
        QCOMPARE(c.output.results.size(), std::size_t{1});
        const TensorResult& r = c.output.results.front();
        QVERIFY(!r.fp8Scales.has_value());
        QCOMPARE(r.metrics.relativeError, 0.0);
        QVERIFY(!r.isFaulty());
        const auto said =
            std::find_if(r.diagnostics.begin(), r.diagnostics.end(), [&](const Diagnostic& d) {
                return d.severity == Severity::Warning &&
                       d.file.startsWith(traces.ref + QLatin1Char('/')) &&
                       d.message.startsWith(QStringLiteral(
                           "the reference's fp8 scales disagree with themselves: its block "
                           "[1:2][0:4] on rank 1 carries scale_inv 0.5 where its block "
                           "[0:1][0:4] on rank 0"));
            });
        QVERIFY2(said != r.diagnostics.end(), qPrintable(messages(r.diagnostics)));
        QVERIFY(said->message.endsWith(
            QStringLiteral("this tensor's quantization scales are not checked against it")));
        QVERIFY(!localize(c.output.results).bugFound());
    }

    // Scale blocks exactly as wide as a trusted run's shards are ambiguous: a row's scale
    // split between the shards (which must then agree), or blocks of their own. MX's E8M0
    // scales (scale_format) say which: blocks of 32, whose scales differ with no warning and
    // are checked block by block; without a format the pieces are read as one row's scale
    // that disagrees with itself.
    void microscalingBlocksAsWideAsTheShardsAreTheRecipes() {
        const ThirtyTwoWideShards mx("e8m0");
        const Compared c = compare(mx);
        QCOMPARE(c.output.results.size(), std::size_t{1});
        const TensorResult& r = c.output.results.front();
        QVERIFY2(r.diagnostics.empty(), qPrintable(messages(r.diagnostics)));
        QVERIFY(r.fp8Scales.has_value());
        QCOMPARE(r.fp8Scales->referenceBlock, (std::vector<std::int64_t>{1, 32}));
        QVERIFY(r.fp8Scales->mismatches.empty());
        QCOMPARE(r.fp8Scales->maxDifference, 0.0);
        QVERIFY(!r.isFaulty());

        const ThirtyTwoWideShards plain(nullptr);
        const Compared p = compare(plain);
        const TensorResult& unnamed = p.output.results.front();
        QVERIFY(!unnamed.fp8Scales.has_value());
        QVERIFY2(std::any_of(unnamed.diagnostics.begin(), unnamed.diagnostics.end(),
                             [](const Diagnostic& d) {
                                 return d.message.startsWith(QStringLiteral(
                                     "the reference's fp8 scales disagree with themselves"));
                             }),
                 qPrintable(messages(unnamed.diagnostics)));
    }

    // A reference laid out over data-parallel ranks holds other samples on each, and each
    // rank scaled its own (torchao's fp8 under FSDP2): no warning of the reference's; the
    // whole tensor's scale is the largest, a reduced amax's, its blocks are counted as
    // scaled by their own samples, and a distributed shard scaled by the whole tensor's amax
    // (1, where rank 1 of the reference has 1/2) passes.
    void laidOutDataParallelReferenceScalesItsOwnSamples() {
        const LaidOutFp8Traces traces({kRightScale, kHalfScale}, 1.0, kRightScale);
        const Compared c = compare(traces);
        QCOMPARE(c.output.results.size(), std::size_t{1});
        const TensorResult& r = c.output.results.front();
        QVERIFY2(r.diagnostics.empty(), qPrintable(messages(r.diagnostics)));
        QVERIFY(r.fp8Scales.has_value());
        QCOMPARE(r.fp8Scales->referenceScaleInv, 1.0);
        QCOMPARE(r.fp8Scales->dataParallelBlocks, std::int64_t{1});
        QVERIFY(r.fp8Scales->mismatches.empty());
        QCOMPARE(r.metrics.relativeError, 0.0);
        QVERIFY(!r.isFaulty());
        QVERIFY(!localize(c.output.results).bugFound());
    }

    // A reference laid out as the distributed run is (a trusted commit), scaled per row: each
    // rank's half of a row carries the whole row's scale, so the assembled reference scales
    // per whole row, and a rank that scaled its half by its own amax is found, to the block.
    void laidOutRowScaledReferenceFindsTheBlock() {
        const BlockScaledTraces right(kReferenceRows, kReferenceRows, kReferenceRows,
                                      ShardScaling::Grid, true);
        const Compared c = compare(right);
        QCOMPARE(c.output.results.size(), std::size_t{1});
        const TensorResult& r = c.output.results.front();
        QVERIFY2(r.fp8Scales.has_value(), qPrintable(messages(c.output.diagnostics)));
        QCOMPARE(r.fp8Scales->referenceBlock, (std::vector<std::int64_t>{1, kCols}));
        QCOMPARE(r.fp8Scales->blocksNotCompared, std::int64_t{0});
        QVERIFY(r.fp8Scales->mismatches.empty());
        QVERIFY(!r.isFaulty());

        const BlockScaledTraces own(kReferenceRows, kReferenceRows, perRow({kOneX, kQuarterX}),
                                    ShardScaling::Grid, true);
        const Compared o = compare(own);
        QCOMPARE(o.output.results.size(), std::size_t{1});
        const TensorResult& t = o.output.results.front();
        QVERIFY(t.fp8Scales.has_value());
        QCOMPARE(t.fp8Scales->mismatches.size(), std::size_t{1});
        const ScaleMismatch& m = t.fp8Scales->mismatches.front();
        QCOMPARE(m.ranks, std::vector<int>{1});
        QCOMPARE(m.block.toString(), QStringLiteral("[1:2][2:4]"));
        QCOMPARE(m.referenceScaleInv, 0.5);
        QCOMPARE(m.ratio, 0.5);
        QVERIFY(t.isFaulty());
    }

    // Malformed per-block scales: each is an error naming the file, the dataset and the
    // problem, and the dataset is left out.
    void malformedBlockScalesAreNamed() {
        QTemporaryDir dir;
        QVERIFY(test::writeManifest(dir.path(), 1, QString(), QStringLiteral("reference")));
        {
            test::RankFileWriter w(rankFile(dir.path(), 0), 0);
            const std::vector<std::uint8_t> bytes(8, kTwo);
            const auto add = [&](const char* name, int seq) {
                const hid_t ds =
                    w.dataset(name, H5T_STD_U8LE, H5T_NATIVE_UINT8, {2, 4}, bytes.data());
                test::RankFileWriter::standardAttributes(ds, QByteArray("t") + name,
                                                         "forward_input", seq, "fp8_e4m3", {2, 4});
                return ds;
            };
            hid_t ds = add("a", 0);  // a block of one dimension for a 2-D dataset
            w.blockScales(ds, "a", {4}, {2}, {1.0, 1.0});
            H5Dclose(ds);
            ds = add("b", 1);  // the scales dataset missing
            test::RankFileWriter::int32Array(ds, "scale_block", {1, 4});
            H5Dclose(ds);
            ds = add("c", 2);  // 3 scales where blocks of [1, 4] make 2 x 1
            w.blockScales(ds, "c", {1, 4}, {3, 1}, {1.0, 1.0, 1.0});
            H5Dclose(ds);
            ds = add("d", 3);  // a zero scale
            w.blockScales(ds, "d", {1, 4}, {2, 1}, {1.0, 0.0});
            H5Dclose(ds);
            ds = add("e", 4);  // two scalings
            w.blockScales(ds, "e", {1, 4}, {2, 1}, {1.0, 1.0});
            test::RankFileWriter::float64(ds, "scale_inv", 1.0);
            H5Dclose(ds);
            ds = add("f", 5);  // right: 2 x 2 blocks of [1, 2], MX's powers of two
            w.blockScales(ds, "f", {1, 2}, {2, 2}, {1.0, 0.5, 0.25, 2.0});
            test::RankFileWriter::variableString(ds, "scale_format", "e8m0");
            H5Dclose(ds);
            ds = add("g", 6);  // e8m0 scales that are not all powers of two
            w.blockScales(ds, "g", {1, 4}, {2, 1}, {1.0, 0.3});
            test::RankFileWriter::variableString(ds, "scale_format", "e8m0");
            H5Dclose(ds);
            ds = add("h", 7);  // a scale format no recipe here stores
            w.blockScales(ds, "h", {1, 4}, {2, 1}, {1.0, 1.0});
            test::RankFileWriter::variableString(ds, "scale_format", "ue4m3");
            H5Dclose(ds);
            ds = add("i", 8);  // per tensor, below e8m0's range
            test::RankFileWriter::float64(ds, "scale_inv", std::ldexp(1.0, -130));
            test::RankFileWriter::variableString(ds, "scale_format", "e8m0");
            H5Dclose(ds);
        }
        const TraceSet set = openTraceSet(dir.path());
        QCOMPARE(set.records.size(), std::size_t{1});
        QCOMPARE(set.records.front().scales.scaleInv, (std::vector<double>{1.0, 0.5, 0.25, 2.0}));
        const std::vector<std::pair<QString, QString>> expected = {
            {QStringLiteral("/tensors/a"),
             QStringLiteral("attribute 'scale_block' [4] must give a block extent of at least 1 "
                            "for each of the dataset's 2 dimensions")},
            {QStringLiteral("/tensors/b"),
             QStringLiteral("its scales dataset /scale_inv/b (required by 'scale_block') cannot "
                            "be opened")},
            {QStringLiteral("/tensors/c"),
             QStringLiteral("its scales dataset /scale_inv/c has shape [3, 1], but blocks of "
                            "[1, 4] tile the dataset's shape [2, 4] in [2, 1]")},
            {QStringLiteral("/tensors/d"),
             QStringLiteral("its scales dataset /scale_inv/d holds 0 at flat index 1, not a "
                            "positive finite scale_inv")},
            {QStringLiteral("/tensors/e"),
             QStringLiteral("has both a per-tensor 'scale_inv' and a 'scale_block'")},
            {QStringLiteral("/tensors/g"),
             QStringLiteral("its scale_format is e8m0, but its scale_inv 0.29999999999999999 (at "
                            "flat index 1 of /scale_inv/g) is not a power of two from 2^-127 to "
                            "2^127")},
            {QStringLiteral("/tensors/h"), QStringLiteral("attribute 'scale_format' is 'ue4m3', "
                                                          "not e8m0 or e4m3")},
            {QStringLiteral("/tensors/i"),
             QStringLiteral("its scale_format is e8m0, but its scale_inv 7.3468396926392969e-40 "
                            "is not a power of two from 2^-127 to 2^127")},
        };
        for (const auto& [dataset, message] : expected) {
            QVERIFY2(test::hasRankZeroError(set.diagnostics, dataset, message),
                     qPrintable(dataset + QStringLiteral(": ") + messages(set.diagnostics)));
        }
    }
};

QTEST_GUILESS_MAIN(TestFp8Scales)
#include "test_fp8_scales.moc"
