#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>
#include <QXmlStreamReader>
#include <algorithm>
#include <map>
#include <set>

#include "ReportTestData.h"
#include "report/ErrorColorMap.h"
#include "report/HeatmapGrid.h"
#include "report/ReportText.h"
#include "report/ReportWriters.h"

using namespace ttrace;

namespace {

struct SvgCells {
    int cells = 0;
    QStringList firstFault;  // data-result of cells marked first-fault
    int markers = 0;
    bool inSvg = false;
    QString error;
};

// Parses the page as XML (the writer emits XHTML-compatible markup) and collects the heatmap.
SvgCells parseHtml(const QString& html) {
    SvgCells out;
    QXmlStreamReader xml(html);
    int svgs = 0;
    while (!xml.atEnd()) {
        xml.readNext();
        if (!xml.isStartElement()) {
            continue;
        }
        if (xml.name() == u"svg") {
            ++svgs;
        }
        const QStringList classes = xml.attributes()
                                        .value(QLatin1String("class"))
                                        .toString()
                                        .split(QLatin1Char(' '), Qt::SkipEmptyParts);
        if (xml.name() == u"rect" && classes.contains(QStringLiteral("cell"))) {
            ++out.cells;
            if (classes.contains(QStringLiteral("first-fault"))) {
                out.firstFault << xml.attributes().value(QLatin1String("data-result")).toString();
            }
        }
        if (xml.name() == u"rect" && classes.contains(QStringLiteral("first-fault-marker"))) {
            ++out.markers;
        }
    }
    if (xml.hasError()) {
        out.error = QStringLiteral("line %1: %2").arg(xml.lineNumber()).arg(xml.errorString());
    }
    out.inSvg = svgs == 1;
    return out;
}

}  // namespace

// The sample report without its unreadable rank file: every tensor compared, no error.
void removeErrors(CheckReport& report) {
    for (Diagnostics* list : {&report.diagnostics, &report.comparison.diagnostics}) {
        std::erase_if(*list, [](const Diagnostic& d) { return d.severity == Severity::Error; });
    }
}

class TestReport : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void numbers() {
        using report_text::formatNumber;
        QCOMPARE(formatNumber(0), QStringLiteral("0"));
        QCOMPARE(formatNumber(0.00123456), QStringLiteral("0.00123"));
        QCOMPARE(formatNumber(42.04), QStringLiteral("42.0"));
        QCOMPARE(formatNumber(9.996), QStringLiteral("10.0"));
        QCOMPARE(formatNumber(1.5e-5), QStringLiteral("1.50e-05"));
        QCOMPARE(formatNumber(2.5e6), QStringLiteral("2.50e+06"));
        QCOMPARE(formatNumber(std::nan("")), QStringLiteral("NaN"));
        QCOMPARE(formatNumber(-std::numeric_limits<double>::infinity()), QStringLiteral("-inf"));
        QCOMPARE(formatRankList({5, 0, 1, 2, 7, 8}), QStringLiteral("0-2, 5, 7-8"));
    }

    void colorScale() {
        // Blue within tolerance, red over it, a visible step at the threshold.
        const QString below = errorColor(0.999);
        const QString above = errorColor(1.001);
        QVERIFY(below != above);
        QCOMPARE(errorColor(0), errorColor(1e-9));
        QCOMPARE(errorColor(std::nan("")), errorColor(1e9));
        const auto blue = [](const QString& c) { return c.mid(5, 2).toInt(nullptr, 16); };
        const auto red = [](const QString& c) { return c.mid(1, 2).toInt(nullptr, 16); };
        QVERIFY(blue(errorColor(0.01)) > red(errorColor(0.01)));
        QVERIFY(red(errorColor(100)) > blue(errorColor(100)));
    }

    void heatmapGrid() {
        const ComparisonOutput out = test::makeComparison(true);
        const HeatmapGrid grid = buildHeatmapGrid(out.results);
        QCOMPARE(grid.cells.size(), out.results.size());
        // Modules in execution order, grouped by layer.
        QCOMPARE(grid.rows.size(), std::size_t(4));
        QCOMPARE(grid.rows[0].module, QStringLiteral("layers.0.fc1"));
        QCOMPARE(grid.rows[1].module, QStringLiteral("layers.0.fc2"));
        QCOMPARE(grid.rows[2].module, QStringLiteral("layers.1.fc1"));
        QCOMPARE(grid.rows[3].layer, 1);
        // forward_input and forward_output x 2 micro-batches, param_grad once.
        QCOMPARE(grid.columns.size(), std::size_t(5));
        QCOMPARE(grid.columns.front().kind, TensorKind::ForwardInput);
        QCOMPARE(grid.columns.back().kind, TensorKind::ParamGrad);
        std::set<std::pair<std::size_t, std::size_t>> used;
        for (const auto& cell : grid.cells) {
            QVERIFY(used.insert({cell.row, cell.column}).second);  // one tensor per cell
        }
    }

    void heatmapGridGivesWeightAndBiasACellEach() {
        ComparisonOutput out = test::makeComparison(true);
        const auto weight = std::find_if(out.results.begin(), out.results.end(), [](const auto& r) {
            return r.key.kind == TensorKind::ParamGrad;
        });
        QVERIFY(weight != out.results.end());
        TensorResult bias = *weight;
        bias.key.name = bias.key.module() + QStringLiteral(".bias");
        out.results.push_back(bias);
        const HeatmapGrid grid = buildHeatmapGrid(out.results);
        QCOMPARE(grid.cells.size(), out.results.size());
        const HeatmapCell& a = grid.cells[static_cast<std::size_t>(weight - out.results.begin())];
        const HeatmapCell& b = grid.cells.back();
        QCOMPARE(a.row, b.row);  // same module
        QVERIFY(a.column != b.column);
        QVERIFY(grid.columns[b.column].label().endsWith(QStringLiteral("bias")));
    }

    void jsonWithBug() {
        const CheckReport report = test::makeReport(true);
        QJsonParseError error;
        const QJsonDocument doc = QJsonDocument::fromJson(reportToJson(report), &error);
        QCOMPARE(error.error, QJsonParseError::NoError);
        const QJsonObject root = doc.object();
        QCOMPARE(root[u"verdict"].toString(), QStringLiteral("bug"));
        QCOMPARE(root[u"tool"][u"version"].toString(), QStringLiteral("0.1.0"));

        const auto& results = report.comparison.results;
        const std::size_t first = *report.localization.firstFaulty;
        const QJsonObject loc = root[u"localization"].toObject();
        QCOMPARE(loc[u"first_faulty"][u"result"].toInteger(), qint64(first));
        QCOMPARE(loc[u"first_faulty"][u"tensor"].toString(),
                 QStringLiteral("layers.1.fc1 forward_output[0] it0 mb1"));
        QCOMPARE(loc[u"root_cause"][u"module"].toString(), QStringLiteral("layers.1.fc1"));
        QVERIFY(!loc[u"root_cause"][u"reason"].toString().isEmpty());
        QCOMPARE(loc[u"faulty_shard"][u"ranks"].toArray(), QJsonArray{5});
        // Each rank once, in runs of ranks sharing their first fault.
        std::map<int, std::pair<qint64, qint64>> firstByRank;  // rank -> (result, seq)
        for (const auto& entry : loc[u"per_rank"].toArray()) {
            for (const auto& run : entry[u"ranks"].toArray()) {
                for (int rank = run[0].toInt(); rank < run[1].toInt(); ++rank) {
                    QVERIFY(!firstByRank.contains(rank));
                    firstByRank[rank] = {entry[u"result"].toInteger(), entry[u"seq"].toInteger()};
                }
            }
        }
        QCOMPARE(firstByRank.size(), report.localization.perRank.size());
        for (const RankFirstFault& f : report.localization.perRank) {
            QCOMPARE(firstByRank[f.rank], std::make_pair(qint64(f.result), qint64(f.seq)));
        }
        QCOMPARE(firstByRank[5].first, qint64(first));

        const QJsonArray tensors = root[u"tensors"].toArray();
        QCOMPARE(tensors.size(), qsizetype(results.size()));
        for (std::size_t i = 0; i < results.size(); ++i) {
            const QJsonObject t = tensors[qsizetype(i)].toObject();
            QCOMPARE(t[u"tensor"].toString(), results[i].key.toString());
            QCOMPARE(t[u"faulty"].toBool(), results[i].isFaulty());
            // Every copy of a faulty tensor; the worst copy of each shard of the others.
            const std::size_t listed =
                results[i].isFaulty() ? results[i].shards.size() : results[i].worstCopies().size();
            QCOMPARE(t[u"shards"].toArray().size(), qsizetype(listed));
            QCOMPARE(t[u"shard_copies"].toInteger(), qint64(results[i].shards.size()));
            // Ranks sharing their place in their own order share an entry.
            std::map<int, qint64> rankSeq;
            for (const auto& entry : t[u"rank_seq"].toArray()) {
                for (const auto& run : entry[u"ranks"].toArray()) {
                    for (int rank = run[0].toInt(); rank < run[1].toInt(); ++rank) {
                        rankSeq[rank] = entry[u"seq"].toInteger();
                    }
                }
            }
            QCOMPARE(rankSeq.size(), results[i].rankSeq.size());
            for (const auto& [rank, seq] : results[i].rankSeq) {
                QCOMPARE(rankSeq[rank], qint64(seq));
            }
            QCOMPARE(t[u"threshold"][u"method"].toString(),
                     thresholdMethodName(results[i].threshold.method));
        }
        const QJsonObject faulty = tensors[qsizetype(first)].toObject();
        QVERIFY(faulty[u"normalized_error"].toDouble() > 1);
        QCOMPARE(faulty[u"key"][u"micro_batch"].toInt(), 1);
        // Non-finite numbers as strings, absent perturbation as null.
        bool sawNan = false;
        bool sawNullPerturbation = false;
        bool sawMismatch = false;
        for (const auto& value : tensors) {
            const QJsonObject t = value.toObject();
            sawNan = sawNan || t[u"normalized_error"].toString() == u"NaN";
            sawNullPerturbation = sawNullPerturbation || t[u"perturbation"].isNull();
            sawMismatch = sawMismatch || !t[u"replica_mismatches"].toArray().isEmpty();
        }
        QVERIFY(sawNan && sawNullPerturbation && sawMismatch);

        const QJsonObject runs = root[u"runs"].toObject();
        QCOMPARE(runs[u"distributed"][u"world_size"].toInt(), 8);
        QCOMPARE(runs[u"distributed"][u"parallel"][u"tp"].toInt(), 2);
        QCOMPARE(runs[u"perturbed"][u"role"].toString(), QStringLiteral("perturbed-reference"));
        QCOMPARE(root[u"thresholds"][u"overrides"][0][u"pattern"].toString(),
                 QStringLiteral("layers.*.fc1.weight"));
        QCOMPARE(root[u"diagnostics"].toArray().size(), 3);  // deduplicated
    }

    // Each run carries the diagnostics about its own files, with the rank whose file each
    // names and its code: a trusted run's own findings, told apart from the distributed
    // run's problems.
    void jsonRunsCarryTheirOwnDiagnostics() {
        CheckReport report = test::makeReport(true);
        report.reference.manifest = test::makeManifest(RunRole::Reference, 2);
        Diagnostic copies;
        copies.severity = Severity::Error;
        copies.file = QStringLiteral("/traces/ref/rank00001.h5");
        copies.dataset = QStringLiteral("/tensors/000004");
        copies.tensor = QStringLiteral("layers.0.fc1 forward_output[0] it0 mb0");
        copies.message = QStringLiteral("the reference disagrees with itself");
        copies.code = QStringLiteral("copies_differ");
        report.diagnostics.push_back(copies);
        Diagnostic folder = copies;
        folder.file = QStringLiteral("/traces/ref");
        folder.code.clear();
        report.diagnostics.push_back(folder);
        // A folder whose name starts like the reference's is not the reference's.
        Diagnostic other = copies;
        other.file = QStringLiteral("/traces/ref2/rank00001.h5");
        report.diagnostics.push_back(other);

        const QJsonObject runs =
            QJsonDocument::fromJson(reportToJson(report)).object()[u"runs"].toObject();
        const QJsonArray own = runs[u"reference"].toObject()[u"diagnostics"].toArray();
        QCOMPARE(own.size(), 2);
        const QJsonObject first = own[0].toObject();
        QCOMPARE(first[u"code"].toString(), QStringLiteral("copies_differ"));
        QCOMPARE(first[u"rank"].toInt(-1), 1);
        QCOMPARE(first[u"severity"].toString(), QStringLiteral("error"));
        QCOMPARE(first[u"dataset"].toString(), copies.dataset);
        QVERIFY(own[1].toObject()[u"rank"].isNull());
        QVERIFY(own[1].toObject()[u"code"].toString().isEmpty());
        QVERIFY(runs[u"perturbed"].toObject()[u"diagnostics"].toArray().isEmpty());
        // The distributed run's own: the unreadable rank file of the test data, on rank 3.
        const QJsonArray distributed = runs[u"distributed"].toObject()[u"diagnostics"].toArray();
        QVERIFY(std::any_of(distributed.begin(), distributed.end(), [](const QJsonValue& d) {
            return d.toObject()[u"rank"].toInt(-1) == 3;
        }));
    }

    // What a trusted run's own pieces say against it reaches the verdict's line, per run and
    // kind, counted in tensors; the distributed run's problems of the same code do not.
    void verdictLineSaysATrustedRunDisagreesWithItself() {
        CheckReport report = test::makeReport(false);
        removeErrors(report);
        QVERIFY(!report_text::verdictLine(report).contains(QStringLiteral("trusted run")));
        Diagnostic scales;
        scales.severity = Severity::Warning;
        scales.file = QStringLiteral("/traces/ref/rank00001.h5");
        scales.tensor = QStringLiteral("layers.0.fc1 forward_input[1] it0 mb0");
        scales.message = QStringLiteral("the reference's fp8 scales disagree with themselves");
        scales.code = QStringLiteral("fp8_scales_differ");
        report.diagnostics.push_back(scales);
        scales.file = QStringLiteral("/traces/ref/rank00000.h5");  // the same tensor, again
        report.diagnostics.push_back(scales);
        scales.tensor = QStringLiteral("layers.1.fc1 forward_input[1] it0 mb0");
        report.diagnostics.push_back(scales);
        Diagnostic copies = scales;
        copies.file = QStringLiteral("/traces/pert/rank00001.h5");
        copies.code = QStringLiteral("copies_differ");
        report.diagnostics.push_back(copies);
        copies.file = QStringLiteral("/traces/dist/rank00001.h5");  // not a trusted run's
        report.diagnostics.push_back(copies);
        const QString line = report_text::verdictLine(report);
        QVERIFY2(
            line.endsWith(QStringLiteral(
                " A trusted run disagrees with itself: the reference's quantization scales of 2 "
                "tensors disagree; the perturbed reference's copies of 1 tensor differ (the "
                "diagnostics say where).")),
            qPrintable(line));
    }

    // A run's layout in a few words, for the window's ranks view.
    void layoutSummaryNamesTheParallelAxes() {
        Manifest m = test::makeManifest(RunRole::Reference, 1);
        QCOMPARE(report_text::layoutSummary(m), QStringLiteral("one device"));
        m.worldSize = 8;
        m.parallel.tp = 2;
        m.parallel.dp = 2;
        m.parallel.pp = 2;
        m.parallel.sp = true;
        QCOMPARE(report_text::layoutSummary(m), QStringLiteral("tp=2 pp=2 dp=2 sp on 8 ranks"));
    }

    // Written a tensor at a time, the report reads as one QJsonDocument writes it.
    void jsonIsWrittenAsOneDocument() {
        for (const bool bug : {true, false}) {
            CheckReport report = test::makeReport(bug);
            const QByteArray written = reportToJson(report);
            QJsonParseError error;
            const QJsonDocument doc = QJsonDocument::fromJson(written, &error);
            QCOMPARE(error.error, QJsonParseError::NoError);
            QCOMPARE(doc.toJson(QJsonDocument::Indented), written);
            report.comparison.results.clear();
            report.localization = {};
            const QByteArray empty = reportToJson(report);
            QCOMPARE(QJsonDocument::fromJson(empty).toJson(QJsonDocument::Indented), empty);
        }
    }

    // A tensor within tolerance lists its worst shards only, in shard order; a faulty one
    // every copy.
    void cleanTensorListsItsWorstShards() {
        CheckReport report = test::makeReport(false);
        TensorResult& wide = report.comparison.results.front();
        wide.replicaMismatches.clear();
        wide.shards.clear();
        for (int s = 0; s < 40; ++s) {
            ShardResult shard;
            shard.ranges = ShardRanges::whole({1});
            shard.ranges.dims[0] = {{s, s + 1}};
            shard.ranks = {s};
            shard.normalizedError = (s * 7 % 40) / 100.0;
            wide.shards.push_back(shard);
        }
        wide.normalizedError = 0.39;
        QVERIFY(!wide.isFaulty());
        const QJsonObject root = QJsonDocument::fromJson(reportToJson(report)).object();
        const QJsonObject t = root[u"tensors"][0].toObject();
        QCOMPARE(t[u"shard_copies"].toInteger(), 40);
        const QJsonArray shards = t[u"shards"].toArray();
        QCOMPARE(shards.size(), 16);
        int previous = -1;
        for (const auto& shard : shards) {
            const int rank = shard[u"ranks"][0].toInt();
            QVERIFY(rank > previous);
            previous = rank;
            QVERIFY(shard[u"normalized_error"].toDouble() >= 0.24);  // the 16 worst: 0.24-0.39
        }
    }

    void jsonWithoutBug() {
        CheckReport report = test::makeReport(false);
        report.perturbed.reset();
        // One rank file unreadable: no bug among what was compared, not a plain "no bug".
        QCOMPARE(QJsonDocument::fromJson(reportToJson(report)).object()[u"verdict"].toString(),
                 QStringLiteral("no bug in part"));
        removeErrors(report);
        const QJsonObject root = QJsonDocument::fromJson(reportToJson(report)).object();
        QCOMPARE(root[u"verdict"].toString(), QStringLiteral("no bug"));
        const QJsonObject coverage = root[u"coverage"].toObject();
        const auto compared = static_cast<int>(report.comparison.results.size());
        QCOMPARE(coverage[u"reference_tensors"].toInt(), compared);
        QCOMPARE(coverage[u"compared"].toInt(), compared);
        QCOMPARE(coverage[u"not_captured"].toInt(-1), 0);
        QVERIFY(coverage[u"complete"].toBool());
        QCOMPARE(coverage[u"text"].toString(),
                 QStringLiteral("%1 of %1 reference tensors compared").arg(compared));
        QVERIFY(root[u"localization"][u"first_faulty"].isNull());
        QVERIFY(root[u"localization"][u"root_cause"].isNull());
        QVERIFY(root[u"runs"][u"perturbed"].isNull());
        QCOMPARE(root[u"tensors"].toArray().size(), qsizetype(report.comparison.results.size()));

        // A blind tensor (threshold of 1 or more) was compared but not effectively checked.
        report.comparison.results.front().threshold.value = 1.5;
        report.comparison.coverage.blind = 1;
        const QJsonObject blind = QJsonDocument::fromJson(reportToJson(report)).object();
        QCOMPARE(blind[u"verdict"].toString(), QStringLiteral("no bug in part"));
        QCOMPARE(blind[u"coverage"][u"blind"].toInt(), 1);
        QVERIFY(!blind[u"coverage"][u"complete"].toBool());
        QCOMPARE(blind[u"coverage"][u"text"].toString(),
                 QStringLiteral("%1 of %1 reference tensors compared; 1 blind (threshold of 1 "
                                "or more)")
                     .arg(compared));
        QVERIFY(blind[u"tensors"][0][u"threshold"][u"blind"].toBool());
        // The verdict's line (the window's verdict box, every report) names it.
        QVERIFY2(blind[u"summary"].toString().endsWith(
                     QStringLiteral(" Blind: %1.")
                         .arg(report.comparison.results.front().key.toString())),
                 qPrintable(blind[u"summary"].toString()));
    }

    void markdown() {
        const QString md = reportToMarkdown(test::makeReport(true));
        QVERIFY(md.contains(QStringLiteral("Bug found")));
        QVERIFY2(md.contains(QStringLiteral("`layers.1.fc1 forward_output[0] it0 mb1`")),
                 qPrintable(md));
        QVERIFY(md.contains(QStringLiteral("| Root-cause module | `layers.1.fc1` |")));
        QVERIFY(md.contains(QStringLiteral("| Faulty shard | rank 5 |")));
        QVERIFY(md.contains(QStringLiteral("First fault on ranks 4-5")));
        QVERIFY(md.contains(QStringLiteral("## Worst tensors")));
        QVERIFY(md.contains(QStringLiteral("## Run configurations")));
        QVERIFY(md.contains(QStringLiteral("tp=2 pp=2")));
        // Errors come first among the diagnostics.
        const auto diagnostics = md.mid(md.indexOf(QStringLiteral("## Diagnostics")));
        QVERIFY(diagnostics.indexOf(QStringLiteral("| error |")) <
                diagnostics.indexOf(QStringLiteral("| warning |")));

        CheckReport report = test::makeReport(false);
        QVERIFY(reportToMarkdown(report).contains(
            QStringLiteral("# ttrace report: No bug in the tensors compared")));
        removeErrors(report);
        const QString clean = reportToMarkdown(report);
        QVERIFY(clean.contains(QStringLiteral("# ttrace report: No bug found")));
        QVERIFY(clean.contains(QStringLiteral("| Coverage | %1 of %1 reference tensors compared |")
                                   .arg(report.comparison.results.size())));
        QVERIFY(!clean.contains(QStringLiteral("Root-cause module")));
    }

    void quantizedTensorsRowCountsTheRecipesTheScaleCheckSaw() {
        const auto rowOf = [](const CheckReport& report) {
            const auto rows = report_text::summaryRows(report);
            const auto row = std::find_if(rows.begin(), rows.end(), [](const auto& r) {
                return r.item == QStringLiteral("Quantized tensors");
            });
            return row == rows.end() ? std::optional<report_text::SummaryRow>()
                                     : std::optional(*row);
        };
        CheckReport report = test::makeReport(false);
        QVERIFY(!rowOf(report));  // an fp32 run: nothing to say
        // An fp8 recipe with not one tensor recorded in fp8: its GEMMs went unseen.
        report.distributed.manifest.recipe = QStringLiteral("fp8");
        const auto unseen = rowOf(report);
        QVERIFY(unseen);
        QCOMPARE(unseen->value, QStringLiteral("none"));
        QVERIFY2(unseen->detail.contains(QStringLiteral("does not see them")),
                 qPrintable(unseen->detail));
        auto& results = report.comparison.results;
        QVERIFY(results.size() >= 6);
        Fp8ScaleCheck mx;
        mx.referenceBlock = {1, 32};
        mx.referenceFormat = ScaleFormat::E8M0;
        for (std::size_t i : {0, 1}) {
            results[i].dtype = DType::FP8E4M3;
            results[i].globalShape = {4, 64};
            results[i].fp8Scales = mx;
        }
        Fp8ScaleCheck rowwise;
        rowwise.referenceBlock = {1, 64};
        results[2].dtype = DType::FP8E4M3;
        results[2].globalShape = {4, 64};
        results[2].fp8Scales = rowwise;
        results[3].dtype = DType::FP4E2M1;  // no reference scales to check against
        results[3].fp8Scales.reset();
        Fp8ScaleCheck perTensor;
        results[4].dtype = DType::FP8E5M2;
        results[4].fp8Scales = perTensor;
        Fp8ScaleCheck blocks;
        blocks.referenceBlock = {2, 32};
        results[5].dtype = DType::FP8E4M3;
        results[5].globalShape = {4, 64};
        results[5].fp8Scales = blocks;
        const auto seen = rowOf(report);
        QVERIFY(seen);
        QCOMPARE(seen->value, QStringLiteral("2 MXFP8, 1 fp8 per block, 1 fp8 per row, 1 fp8 per "
                                             "tensor; 1 fp4 not checked"));
        QVERIFY2(seen->detail.startsWith(QStringLiteral("their scales checked")) &&
                     seen->detail.contains(QStringLiteral("not checked: the reference gave no")),
                 qPrintable(seen->detail));
        QVERIFY(reportToMarkdown(report).contains(QStringLiteral("| Quantized tensors | 2 MXFP8")));
        // Nothing checked: the row does not say that anything was.
        for (auto& r : results) {
            r.fp8Scales.reset();
        }
        const auto none = rowOf(report);
        QVERIFY(none);
        QVERIFY2(none->value.endsWith(QStringLiteral(" not checked")), qPrintable(none->value));
        QVERIFY2(!none->detail.contains(QStringLiteral("their scales checked")),
                 qPrintable(none->detail));
    }

    void thresholdRowSaysWhatTheTheoreticalBoundTook() {
        const auto rowOf = [](const CheckReport& report) {
            const auto rows = report_text::summaryRows(report);
            const auto row = std::find_if(rows.begin(), rows.end(), [](const auto& r) {
                return r.item == QStringLiteral("Thresholds");
            });
            return row == rows.end() ? report_text::SummaryRow{} : *row;
        };
        CheckReport report = test::makeReport(false);
        for (auto& r : report.comparison.results) {
            r.threshold.method = ThresholdMethod::Perturbation;
        }
        const auto measured = rowOf(report);
        QCOMPARE(measured.value,
                 QStringLiteral("perturbation: %1").arg(report.comparison.results.size()));
        QVERIFY(measured.detail.isEmpty());
        // Without a perturbed reference, under an fp8 recipe: the bound's epsilon is e4m3's
        // for activations and gradients, bf16's for parameters, and the row says so.
        report.perturbed.reset();
        report.distributed.manifest.recipe = QStringLiteral("fp8");
        for (auto& r : report.comparison.results) {
            r.threshold.method = ThresholdMethod::Theoretical;
        }
        const auto theory = rowOf(report);
        QCOMPARE(theory.value, QStringLiteral("theoretical: %1, no perturbed reference")
                                   .arg(report.comparison.results.size()));
        QVERIFY2(theory.detail.startsWith(QStringLiteral(
                     "k C^depth eps with eps 2^-3 of fp8_e4m3 (the recipe's GEMM operands) "
                     "for activations and gradients, 2^-7 of bf16 for parameters")),
                 qPrintable(theory.detail));
        QVERIFY(theory.detail.contains(QStringLiteral("--perturbed")));
        QVERIFY(reportToMarkdown(report).contains(QStringLiteral("| Thresholds |")));
        // A recipe whose gradient operands are e5m2: three epsilons.
        report.distributed.manifest.gradientOperands = DType::FP8E5M2;
        QVERIFY2(rowOf(report).detail.startsWith(QStringLiteral(
                     "k C^depth eps with eps 2^-3 of fp8_e4m3 (the recipe's GEMM operands) for "
                     "activations and the backward's operands stored in it, 2^-2 of fp8_e5m2 (its "
                     "gradient operands) for the other gradients, 2^-7 of bf16 for parameters")),
                 qPrintable(rowOf(report).detail));
        // The runs table names that format too.
        const auto recipes = [&report] {
            for (const auto& [field, values] : report_text::runConfigTable(report).rows) {
                if (field == QStringLiteral("dtype recipe")) {
                    return values;
                }
            }
            return QStringList();
        };
        QCOMPARE(recipes().value(0),
                 QStringLiteral("fp8 (compute bf16, gradient operands fp8_e5m2)"));
        report.distributed.manifest.recipe = QStringLiteral("bf16");
        QVERIFY2(rowOf(report).detail.startsWith(
                     QStringLiteral("k C^depth eps with eps 2^-7 of bf16: a bound")),
                 qPrintable(rowOf(report).detail));
    }

    void markdownEscapesTraceText() {
        CheckReport report = test::makeReport(true);
        report.comparison.results[0].key.name = QStringLiteral("a|b`c<script>");
        report.diagnostics.push_back({Severity::Error, QStringLiteral("f"), QString(), QString(),
                                      QStringLiteral("bad | cell\nsecond line"), QString(),
                                      QString()});
        const QString md = reportToMarkdown(report);
        QVERIFY(!md.contains(QStringLiteral("bad | cell")));
        QVERIFY(md.contains(QStringLiteral("bad \\| cell second line")));
    }

    void html() {
        CheckReport report = test::makeReport(true);
        report.comparison.results[0].key.name =
            QStringLiteral("layers.0.<script>alert(1)</script>");
        report.diagnostics.push_back({Severity::Warning, QStringLiteral("/t/\"quoted\" & 'x'"),
                                      QString(), QString(), QStringLiteral("control \x01 char"),
                                      QString(), QString()});
        const QString page = reportToHtml(report);
        const SvgCells svg = parseHtml(page);
        QVERIFY2(svg.error.isEmpty(), qPrintable(svg.error));
        QVERIFY(svg.inSvg);
        QCOMPARE(svg.cells, int(report.comparison.results.size()));
        QCOMPARE(svg.firstFault, QStringList{QString::number(*report.localization.firstFaulty)});
        QCOMPARE(svg.markers, 1);

        // Self-contained and escaped.
        QVERIFY(!page.contains(QStringLiteral("<script")));
        QVERIFY(page.contains(QStringLiteral("&lt;script&gt;alert(1)&lt;/script&gt;")));
        for (const char* external : {"http://", "https://", "src=", "href=", "url(", "@import"}) {
            QVERIFY2(!page.contains(QLatin1String(external)), external);
        }
        QVERIFY(page.contains(QStringLiteral("Bug found")));
        QVERIFY(page.contains(QStringLiteral("layers.1.fc1 forward_output[0] it0 mb1")));
        QVERIFY(page.contains(QStringLiteral("<title>layers.1.fc1 forward_output[0] it0 mb1")));
        QVERIFY(page.contains(QStringLiteral("1 (threshold)")));  // the colour scale
    }

    void htmlWithoutBugOrResults() {
        CheckReport report = test::makeReport(false);
        QVERIFY(
            reportToHtml(report).contains(QStringLiteral("<p class=\"verdict partial\">No "
                                                         "bug in what was compared")));
        removeErrors(report);
        const QString clean = reportToHtml(report);
        const SvgCells svg = parseHtml(clean);
        QVERIFY2(svg.error.isEmpty(), qPrintable(svg.error));
        QVERIFY(svg.firstFault.isEmpty());
        QCOMPARE(svg.markers, 0);
        QVERIFY(clean.contains(QStringLiteral("<p class=\"verdict nobug\">No bug found")));

        // A check that compared nothing still gives a readable report.
        CheckReport empty;
        empty.diagnostics.push_back({Severity::Error, QStringLiteral("/t/dist/manifest.json"),
                                     QString(), QString(), QStringLiteral("manifest missing"),
                                     QString(), QString()});
        const QString page = reportToHtml(empty);
        QVERIFY2(parseHtml(page).error.isEmpty(), qPrintable(parseHtml(page).error));
        QVERIFY(page.contains(QStringLiteral("manifest missing")));
        QVERIFY(page.contains(QStringLiteral("<h1>ttrace report: Nothing compared</h1>")));
        QVERIFY(reportToMarkdown(empty).contains(QStringLiteral("manifest missing")));
        QVERIFY(!QJsonDocument::fromJson(reportToJson(empty)).isNull());
    }

    void writeFile() {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("report.html"));
        QString error;
        QVERIFY2(writeReportFile(path, "<p>first</p>", &error), qPrintable(error));
        QVERIFY2(writeReportFile(path, "<p>second</p>", &error), qPrintable(error));
        QFile file(path);
        QVERIFY(file.open(QIODevice::ReadOnly));
        QCOMPARE(file.readAll(), QByteArray("<p>second</p>"));

        const QString bad = dir.filePath(QStringLiteral("no/such/dir/report.md"));
        QVERIFY(!writeReportFile(bad, "x", &error));
        QVERIFY2(error.contains(bad), qPrintable(error));
        QVERIFY(!QFile::exists(bad));
    }
};

QTEST_APPLESS_MAIN(TestReport)
#include "test_report.moc"
