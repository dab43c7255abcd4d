#include "report/ReportText.h"

#include <QDir>
#include <QFileInfo>
#include <QJsonDocument>
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "compare/FaultDescription.h"
#include "compare/TrustedRunWarnings.h"

namespace ttrace::report_text {

namespace {

const TensorResult* resultAt(const CheckReport& report, std::size_t index) {
    const auto& results = report.comparison.results;
    return index < results.size() ? &results[index] : nullptr;
}

// What a faulty output gradient was computed from (GradientSource); null: the loss.
const TensorResult* gradientUpstream(const CheckReport& report, const GradientSource& gradient) {
    return gradient.upstream ? resultAt(report, *gradient.upstream) : nullptr;
}

// Sort key of the worst-tensor ranking: non-finite errors rank above every finite one.
double severityKey(double normalizedError) {
    if (std::isnan(normalizedError)) {
        return std::numeric_limits<double>::infinity();
    }
    return normalizedError;
}

QString meshText(const Manifest& m) {
    QStringList parts;
    for (std::size_t i = 0; i < m.meshAxes.size(); ++i) {
        const int size = i < m.meshShape.size() ? m.meshShape[i] : 0;
        parts << m.meshAxes[i] + QLatin1Char('=') + QString::number(size);
    }
    return parts.isEmpty() ? QStringLiteral("none") : parts.join(QLatin1Char(' '));
}

QString intList(const std::vector<int>& values) {
    QStringList parts;
    for (const int v : values) {
        parts << QString::number(v);
    }
    return parts.join(QStringLiteral(", "));
}

auto diagnosticTuple(const Diagnostic& d) {
    return std::tie(d.severity, d.file, d.dataset, d.tensor, d.message);
}

}  // namespace

QString formatNumber(double value) {
    if (std::isnan(value)) {
        return QStringLiteral("NaN");
    }
    if (std::isinf(value)) {
        return value > 0 ? QStringLiteral("inf") : QStringLiteral("-inf");
    }
    if (value == 0) {
        return QStringLiteral("0");
    }
    const double magnitude = std::fabs(value);
    if (magnitude < 1e-3 || magnitude >= 1e4) {
        return QString::number(value, 'e', 2);
    }
    const int exponent = static_cast<int>(std::floor(std::log10(magnitude)));
    QString text = QString::number(value, 'f', std::max(0, 2 - exponent));
    // Rounding can carry into a new digit (9.996 -> "10.00"): redo with one decimal less.
    if (std::fabs(text.toDouble()) >= std::pow(10.0, exponent + 1) && exponent < 2) {
        text = QString::number(value, 'f', std::max(0, 1 - exponent));
    }
    return text;
}

QString formatBytes(std::int64_t bytes) {
    static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    if (bytes < 1024) {
        return QStringLiteral("%1 B").arg(bytes);
    }
    double value = static_cast<double>(bytes);
    int unit = -1;
    while (value >= 1024 && unit < 4) {
        value /= 1024;
        ++unit;
    }
    return formatNumber(value) + QLatin1Char(' ') + QLatin1String(kUnits[unit]);
}

QString comparisonLine(const CheckReport& report) {
    const QString bytes = formatBytes(report.comparison.bytesCompared);
    const QString seconds = formatNumber(report.seconds);
    return (report.fromCache ? QStringLiteral("%1 compared by an earlier check, results read "
                                              "from the cache in %2 s; backend: %3")
                             : QStringLiteral("compared %1 in %2 s; backend: %3"))
        .arg(bytes, seconds, report.comparison.backendName);
}

QString capitalized(QString text) {
    if (!text.isEmpty()) {
        text[0] = text[0].toUpper();
    }
    return text;
}

QString verdictTitle(const CheckReport& report) {
    switch (report.verdict()) {
        case Verdict::BugFound:
            return QStringLiteral("Bug found");
        case Verdict::NoBug:
            return QStringLiteral("No bug found");
        case Verdict::NoBugInPart:
            return QStringLiteral("No bug in the tensors compared");
        case Verdict::NothingCompared:
            return QStringLiteral("Nothing compared");
    }
    return {};
}

// A rank file's name alone does not say which run: its folder's name goes with it.
QString erroneousParts(const Diagnostics& diagnostics) {
    QStringList parts;
    for (const Diagnostic& d : diagnostics) {
        if (d.severity != Severity::Error) {
            continue;
        }
        const QFileInfo file(d.file);
        const QString part = !d.tensor.isEmpty() ? d.tensor
                             : file.dir().dirName().isEmpty()
                                 ? file.fileName()
                                 : file.dir().dirName() + QLatin1Char('/') + file.fileName();
        if (!parts.contains(part)) {
            parts.append(part);
        }
    }
    constexpr int kNamed = 3;
    if (parts.size() <= kNamed) {
        return parts.join(QStringLiteral(", "));
    }
    return QStringLiteral("%1 and %2 more")
        .arg(parts.mid(0, kNamed).join(QStringLiteral(", ")))
        .arg(parts.size() - kNamed);
}

namespace {

// What the trusted runs' own pieces say against them (TrustedRunWarnings.h), for the
// verdict's line: per run and kind, in how many tensors. Each diagnostic says which and what
// follows from it; the line makes sure a warning of the reference's is not missed.
QString trustedRunFindings(const CheckReport& report, const Diagnostics& diagnostics) {
    std::vector<std::pair<QString, QString>> runs{
        {QStringLiteral("reference"), report.reference.folder}};
    if (report.perturbed) {
        runs.emplace_back(QStringLiteral("perturbed reference"), report.perturbed->folder);
    }
    const std::pair<QLatin1String, QString> kinds[] = {
        {trusted_run_code::kCopiesDiffer, QStringLiteral("the %1's copies of %2 differ")},
        {trusted_run_code::kScalesDiffer,
         QStringLiteral("the %1's quantization scales of %2 disagree")},
        {trusted_run_code::kRecomputedDifferently,
         QStringLiteral("the %1 recomputed %2 differently")},
    };
    QStringList said;
    for (const auto& [run, folder] : runs) {
        const QString inside = folder + QLatin1Char('/');
        for (const auto& [code, phrase] : kinds) {
            std::set<QString> tensors;
            for (const Diagnostic& d : diagnostics) {
                if (d.code == code && d.file.startsWith(inside)) {
                    tensors.insert(d.tensor);
                }
            }
            if (!tensors.empty()) {
                said << phrase.arg(run, tensors.size() == 1
                                            ? QStringLiteral("1 tensor")
                                            : QStringLiteral("%1 tensors").arg(tensors.size()));
            }
        }
    }
    if (said.isEmpty()) {
        return {};
    }
    return QStringLiteral("A trusted run disagrees with itself: %1 (the diagnostics say where).")
        .arg(said.join(QStringLiteral("; ")));
}

// The blind tensors, for the verdict's line: the first three and how many more.
QString blindTensors(const std::vector<TensorResult>& results) {
    QStringList named;
    qsizetype count = 0;
    constexpr int kNamed = 3;
    for (const TensorResult& r : results) {
        if (r.threshold.blind() && count++ < kNamed) {
            named << r.key.toString();
        }
    }
    QString text = named.join(QStringLiteral(", "));
    if (count > kNamed) {
        text += QStringLiteral(" and %1 more").arg(count - kNamed);
    }
    return text;
}

}  // namespace

QString verdictLine(const CheckReport& report) {
    const auto& results = report.comparison.results;
    QString line;
    if (report.bugFound()) {
        const TensorResult* first = resultAt(report, *report.localization.firstFaulty);
        line = QStringLiteral("Bug found: %1 of %2 tensors are faulty; the first is %3")
                   .arg(report.localization.faultyCount)
                   .arg(results.size())
                   .arg(first ? first->key.toString() : QStringLiteral("(unknown)"));
        if (const auto& cause = report.localization.rootCause) {
            line += QStringLiteral(", root cause in module %1").arg(cause->module);
            if (cause->gradient) {
                const TensorResult* upstream = gradientUpstream(report, *cause->gradient);
                line += QStringLiteral(" (its gradient from %1)")
                            .arg(upstream ? upstream->key.module() : QStringLiteral("the loss"));
            }
        }
        if (report.localization.faultyShard && report.localization.faultyShard->standsOut &&
            !report.localization.faultyShard->ranks.empty()) {
            const auto& ranks = report.localization.faultyShard->ranks;
            line +=
                QStringLiteral(", on rank%1 %2")
                    .arg(ranks.size() > 1 ? QStringLiteral("s") : QString(), formatRankList(ranks));
        }
        line += QLatin1Char('.');
    } else {
        const QString coverage = report.comparison.coverage.describe(report.comparedCount());
        switch (report.verdict()) {
            case Verdict::NoBug:
                line = QStringLiteral("No bug found: %1, all within tolerance.").arg(coverage);
                break;
            case Verdict::NothingCompared:
                line = QStringLiteral("Nothing compared: %1.").arg(coverage);
                break;
            default:
                line = QStringLiteral("No bug in what was compared: %1.").arg(coverage);
        }
    }
    if (report.comparison.cancelled) {
        line += QStringLiteral(" The comparison was cancelled: these results are partial.");
    }
    if (report.comparison.coverage.blind > 0) {
        line += QStringLiteral(" Blind: %1.").arg(blindTensors(results));
    }
    const auto diagnostics = allDiagnostics(report);
    const auto errors = std::count_if(diagnostics.begin(), diagnostics.end(),
                                      [](const auto& d) { return d.severity == Severity::Error; });
    if (errors > 0) {
        line += QStringLiteral(" %1 error%2 in the input (%3): some tensors were not compared.")
                    .arg(errors)
                    .arg(errors > 1 ? QStringLiteral("s") : QString(), erroneousParts(diagnostics));
    }
    if (const QString trusted = trustedRunFindings(report, diagnostics); !trusted.isEmpty()) {
        line += QLatin1Char(' ') + trusted;
    }
    return line;
}

QString errorVsThreshold(const TensorResult& result) {
    return QStringLiteral("%1 vs threshold %2 (%3)")
        .arg(formatNumber(result.judgedError()), formatNumber(result.threshold.value),
             thresholdMethodName(result.threshold.method));
}

namespace {

// Where the root cause's faulty output gradient came from (docs/localization.md).
SummaryRow gradientRow(const CheckReport& report, const GradientSource& gradient) {
    const TensorResult* upstream = gradientUpstream(report, gradient);
    if (!upstream) {
        return {QStringLiteral("Gradient from"), QStringLiteral("the loss"), false,
                QStringLiteral("no module's backward comes before the faulty output gradient in "
                               "its micro-batch")};
    }
    const QString what = gradient.from == GradientSource::From::Module
                             ? QStringLiteral("the backward of this module handed it over: ")
                             : QStringLiteral(
                                   "made inside this enclosing module from its "
                                   "output gradient: ");
    return {QStringLiteral("Gradient from"), upstream->key.module(), true,
            what + upstream->key.toString() + QStringLiteral(" is ") +
                describeWithinTolerance(*upstream)};
}

}  // namespace

std::optional<SummaryRow> quantizedRow(const CheckReport& report) {
    std::map<QString, int> checked, unchecked;
    for (const TensorResult& r : report.comparison.results) {
        if (!isScaled(r.dtype)) {
            continue;
        }
        if (!r.fp8Scales) {
            ++unchecked[scaledFamily(r.dtype)];
            continue;
        }
        const auto& block = r.fp8Scales->referenceBlock;
        QString recipe = scaleRecipe(*r.fp8Scales, r.dtype);
        if (recipe == scaledFamily(r.dtype)) {
            // a row: one block as long as the last dimension, one element across the others
            const bool perRow = !block.empty() && block.size() == r.globalShape.size() &&
                                block.back() == r.globalShape.back() &&
                                std::all_of(block.begin(), block.end() - 1,
                                            [](std::int64_t extent) { return extent == 1; });
            recipe += block.empty()
                          ? QStringLiteral(" per tensor")
                          : (perRow ? QStringLiteral(" per row") : QStringLiteral(" per block"));
        }
        ++checked[recipe];
    }
    const QString& recipe = report.distributed.manifest.recipe;
    if (checked.empty() && unchecked.empty()) {
        if (recipe != u"fp8" && recipe != u"fp4") {
            return std::nullopt;
        }
        return SummaryRow{QStringLiteral("Quantized tensors"), QStringLiteral("none"), false,
                          QStringLiteral("an %1 recipe, but no compared tensor was stored in %1 "
                                         "with its scales: its quantized GEMMs ran where the "
                                         "capture does not see them (docs/capture.md), and are "
                                         "checked through their unquantized inputs and outputs "
                                         "only")
                              .arg(recipe)};
    }
    // "2 MXFP8, 1 fp8 per row", the most common first.
    const auto counted = [](const std::map<QString, int>& counts) {
        std::vector<std::pair<int, QString>> byCount;
        for (const auto& [name, count] : counts) {
            byCount.emplace_back(count, name);
        }
        std::stable_sort(byCount.begin(), byCount.end(),
                         [](const auto& a, const auto& b) { return a.first > b.first; });
        QStringList parts;
        for (const auto& [count, name] : byCount) {
            parts << QStringLiteral("%1 %2").arg(count).arg(name);
        }
        return parts.join(QStringLiteral(", "));
    };
    QStringList value, detail;
    if (!checked.empty()) {
        value << counted(checked);
        detail << QStringLiteral("their scales checked across shards against the reference's");
    }
    if (!unchecked.empty()) {
        value << counted(unchecked) + QStringLiteral(" not checked");
        detail << QStringLiteral(
            "not checked: the reference gave no whole-tensor scales for them (it holds them "
            "unquantized, or its pieces disagree, as the diagnostics say)");
    }
    return SummaryRow{QStringLiteral("Quantized tensors"), value.join(QStringLiteral("; ")), false,
                      detail.join(QStringLiteral("; "))};
}

std::vector<SummaryRow> summaryRows(const CheckReport& report) {
    std::vector<SummaryRow> rows;
    const Localization& loc = report.localization;
    rows.push_back({QStringLiteral("Verdict"), verdictTitle(report), false,
                    report.comparison.results.empty()
                        ? QStringLiteral("no tensor compared")
                        : QStringLiteral("%1 of %2 tensors faulty")
                              .arg(loc.faultyCount)
                              .arg(report.comparison.results.size())});
    rows.push_back({QStringLiteral("Coverage"),
                    report.comparison.coverage.describe(report.comparedCount()), false,
                    report.comparison.coverage.complete(report.comparedCount())
                        ? QString()
                        : QStringLiteral("the diagnostics say which tensors, by module")});
    if (!report.comparison.results.empty()) {
        rows.push_back(thresholdRow(report));
        if (auto quantized = quantizedRow(report)) {
            rows.push_back(std::move(*quantized));
        }
    }
    const TensorResult* first = loc.firstFaulty ? resultAt(report, *loc.firstFaulty) : nullptr;
    if (first) {
        rows.push_back(
            {QStringLiteral("First faulty tensor"), first->key.name, true, first->key.toString()});
        rows.push_back({QStringLiteral("Kind"), tensorKindName(first->key.kind), false,
                        QStringLiteral("output/input index %1").arg(first->key.index)});
        rows.push_back(
            {QStringLiteral("Iteration / micro-batch"),
             // Parameter kinds belong to the whole iteration, not to one micro-batch.
             first->key.microBatch < 0
                 ? QStringLiteral("%1 / none (a parameter kind: the whole iteration)")
                       .arg(first->key.iteration)
                 : QStringLiteral("%1 / %2").arg(first->key.iteration).arg(first->key.microBatch),
             false, QString()});
        rows.push_back({QStringLiteral("Normalized error"), formatNumber(first->normalizedError),
                        false, QStringLiteral("relative error / threshold; above 1 is faulty")});
        rows.push_back({QStringLiteral("Relative error vs threshold"), errorVsThreshold(*first),
                        false, QString()});
        if (first->fp8Scales && !first->fp8Scales->mismatches.empty()) {
            const ScaleMismatch& worst = first->fp8Scales->mismatches.front();
            rows.push_back(
                {scaleRecipe(*first->fp8Scales, first->dtype) +
                     QStringLiteral(" scale vs reference"),
                 (worst.acrossReferenceBlocks ? QStringLiteral("blocks laid out otherwise")
                                              : formatNumber(worst.ratio) + QLatin1Char('x')) +
                     QStringLiteral(" on ") + formatRanks(worst.ranks),
                 false, describeScaleMismatch(*first->fp8Scales, first->dtype)});
        }
    }
    if (loc.rootCause) {
        rows.push_back({QStringLiteral("Root-cause module"), loc.rootCause->module, true,
                        loc.rootCause->reason});
        if (const auto& gradient = loc.rootCause->gradient) {
            rows.push_back(gradientRow(report, *gradient));
        }
    }
    if (loc.faultyShard) {
        const FaultyShard& fs = *loc.faultyShard;
        const TensorResult* r = resultAt(report, fs.result);
        QString where;
        if (r && fs.shard < r->shards.size()) {
            where =
                r->shards[fs.shard].ranges.toString() + QStringLiteral(" of ") + r->key.toString();
        }
        const QString ranks = QStringLiteral("rank%1 %2")
                                  .arg(fs.ranks.size() > 1 ? QStringLiteral("s") : QString(),
                                       formatRankList(fs.ranks));
        rows.push_back(
            {QStringLiteral("Faulty shard"),
             fs.standsOut ? ranks : QStringLiteral("none stands out (") + ranks + QLatin1Char(')'),
             false, where.isEmpty() ? fs.reason : where + QStringLiteral(": ") + fs.reason});
    }
    // Ranks that first fail on the same tensor share one row, so that thousands of ranks
    // stay readable.
    std::map<std::size_t, std::vector<int>> ranksByResult;
    for (const RankFirstFault& f : loc.perRank) {
        ranksByResult[f.result].push_back(f.rank);
    }
    std::vector<std::pair<int, std::size_t>> groups;  // (lowest rank, result)
    for (const auto& [result, ranks] : ranksByResult) {
        groups.emplace_back(*std::min_element(ranks.begin(), ranks.end()), result);
    }
    std::sort(groups.begin(), groups.end());
    for (const auto& [lowest, result] : groups) {
        const auto& ranks = ranksByResult[result];
        const TensorResult* r = resultAt(report, result);
        rows.push_back(
            {QStringLiteral("First fault on rank%1 %2")
                 .arg(ranks.size() > 1 ? QStringLiteral("s") : QString(), formatRankList(ranks)),
             r ? r->key.toString() : QStringLiteral("(unknown)"), true,
             r ? QStringLiteral("normalized error %1").arg(formatNumber(r->normalizedError))
               : QString()});
    }
    return rows;
}

QString summaryText(const CheckReport& report) {
    QString text = verdictLine(report) + QLatin1Char('\n');
    for (const SummaryRow& row : summaryRows(report)) {
        text += row.item + QStringLiteral(": ") + row.value;
        if (!row.detail.isEmpty()) {
            text += QStringLiteral(" (") + row.detail + QLatin1Char(')');
        }
        text += QLatin1Char('\n');
    }
    return text;
}

std::vector<std::size_t> worstTensors(const std::vector<TensorResult>& results, std::size_t limit) {
    std::vector<std::size_t> order(results.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
        order[i] = i;
    }
    const std::size_t n = std::min(limit, order.size());
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                      [&](std::size_t a, std::size_t b) {
                          // Faulty first: diverging replicas can be faulty below 1.0.
                          const bool fa = results[a].isFaulty();
                          const bool fb = results[b].isFaulty();
                          if (fa != fb) {
                              return fa;
                          }
                          const double ka = severityKey(results[a].normalizedError);
                          const double kb = severityKey(results[b].normalizedError);
                          return ka != kb ? ka > kb : a < b;
                      });
    order.resize(n);
    return order;
}

QStringList thresholdMethodCounts(const std::vector<TensorResult>& results) {
    std::map<int, std::size_t> counts;
    for (const auto& r : results) {
        ++counts[static_cast<int>(r.threshold.method)];
    }
    QStringList parts;
    for (const auto& [method, count] : counts) {
        parts << QStringLiteral("%1: %2")
                     .arg(thresholdMethodName(static_cast<ThresholdMethod>(method)))
                     .arg(count);
    }
    return parts;
}

SummaryRow thresholdRow(const CheckReport& report) {
    const auto& results = report.comparison.results;
    SummaryRow row{QStringLiteral("Thresholds"),
                   thresholdMethodCounts(results).join(QStringLiteral(", ")), false, QString()};
    if (!report.perturbed) {
        row.value += QStringLiteral(", no perturbed reference");
    }
    const bool theoretical = std::any_of(results.begin(), results.end(), [](const TensorResult& r) {
        return r.threshold.method == ThresholdMethod::Theoretical;
    });
    if (!theoretical) {
        return row;
    }
    const Manifest& run = report.distributed.manifest;
    const auto epsilon = [](const TheoryEpsilon& e) {
        return QStringLiteral("2^%1 of %2").arg(std::ilogb(e.value)).arg(dtypeName(e.dtype));
    };
    const auto theory = [&](TensorKind kind) {
        return theoryEpsilon(kind, run.computeDtype, run.operandDtype(kind));
    };
    const TheoryEpsilon activations = theory(TensorKind::ForwardOutput);
    const TheoryEpsilon gradients = theory(TensorKind::InputGrad);
    const TheoryEpsilon parameters = theory(TensorKind::Param);
    QString eps;
    if (activations.dtype == parameters.dtype) {
        eps = epsilon(activations);
    } else if (activations.dtype == gradients.dtype) {
        eps = QStringLiteral(
                  "%1 (the recipe's GEMM operands) for activations and gradients, "
                  "%2 for parameters")
                  .arg(epsilon(activations), epsilon(parameters));
    } else {
        eps = QStringLiteral(
                  "%1 (the recipe's GEMM operands) for activations and the backward's "
                  "operands stored in it, %2 (its gradient operands) for the other gradients, %3 "
                  "for parameters")
                  .arg(epsilon(activations), epsilon(gradients), epsilon(parameters));
    }
    row.detail = QStringLiteral(
                     "%1k C^depth eps with eps %2: a bound on any model's "
                     "round-off, often far above this one's, which %3")
                     .arg(report.perturbed ? QStringLiteral("theoretical: ") : QString(), eps,
                          report.perturbed
                              ? QStringLiteral("the perturbed reference measured for the others "
                                               "(the warnings say why not for these)")
                              : QStringLiteral("a perturbed reference (--perturbed) would "
                                               "measure"));
    return row;
}

std::vector<std::pair<QString, QString>> thresholdConfigRows(const CheckReport& report) {
    const ThresholdConfig& c = report.thresholds;
    std::vector<std::pair<QString, QString>> rows = {
        {QStringLiteral("config file"),
         report.configPath.isEmpty() ? QStringLiteral("(defaults)") : report.configPath},
        {QStringLiteral("safety factor"), QString::number(c.safetyFactor)},
        {QStringLiteral("floor factor"), QString::number(c.floorFactor)},
        {QStringLiteral("theoretical k"), QString::number(c.theoryK)},
        {QStringLiteral("theoretical C"), QString::number(c.theoryC)},
    };
    for (const ThresholdOverride& o : c.overrides) {
        QStringList parts;
        if (o.kind) {
            parts << QStringLiteral("kind ") + tensorKindName(*o.kind);
        }
        if (o.threshold) {
            parts << QStringLiteral("threshold ") + QString::number(*o.threshold);
        }
        if (o.safetyFactor) {
            parts << QStringLiteral("safety factor ") + QString::number(*o.safetyFactor);
        }
        rows.emplace_back(QStringLiteral("override ") + o.pattern,
                          parts.join(QStringLiteral(", ")));
    }
    return rows;
}

QString layoutSummary(const Manifest& manifest) {
    if (manifest.worldSize <= 1) {
        return QStringLiteral("one device");
    }
    const ParallelConfig& p = manifest.parallel;
    QStringList axes;
    for (const auto& [name, size] :
         {std::pair{"tp", p.tp}, std::pair{"pp", p.pp}, std::pair{"vpp", p.vpp},
          std::pair{"dp", p.dp}, std::pair{"cp", p.cp}, std::pair{"ep", p.ep}}) {
        if (size > 1) {
            axes << QStringLiteral("%1=%2").arg(QLatin1String(name)).arg(size);
        }
    }
    if (p.sp) {
        axes << QStringLiteral("sp");
    }
    axes << QStringLiteral("on %1 ranks").arg(manifest.worldSize);
    return axes.join(QLatin1Char(' '));
}

ConfigTable runConfigTable(const CheckReport& report) {
    std::vector<const RunInfo*> runs = {&report.distributed, &report.reference};
    ConfigTable table;
    table.titles = {QStringLiteral("distributed"), QStringLiteral("reference")};
    if (report.perturbed) {
        runs.push_back(&*report.perturbed);
        table.titles << QStringLiteral("perturbed reference");
    }
    const auto row = [&](const QString& field, auto value) {
        QStringList values;
        for (const RunInfo* run : runs) {
            values << value(*run);
        }
        table.rows.emplace_back(field, values);
    };
    row(QStringLiteral("folder"), [](const RunInfo& r) -> QString { return r.folder; });
    row(QStringLiteral("role"),
        [](const RunInfo& r) -> QString { return runRoleName(r.manifest.role); });
    row(QStringLiteral("world size"),
        [](const RunInfo& r) -> QString { return QString::number(r.manifest.worldSize); });
    row(QStringLiteral("parallelism"),
        [](const RunInfo& r) -> QString { return r.manifest.parallel.toString(); });
    row(QStringLiteral("mesh"), [](const RunInfo& r) -> QString { return meshText(r.manifest); });
    row(QStringLiteral("dtype recipe"), [](const RunInfo& r) -> QString {
        const QString gradients =
            r.manifest.gradientOperands
                ? QStringLiteral(", gradient operands ") + dtypeName(*r.manifest.gradientOperands)
                : QString();
        return r.manifest.recipe + QStringLiteral(" (compute ") +
               dtypeName(r.manifest.computeDtype) + gradients + QLatin1Char(')');
    });
    row(QStringLiteral("model"), [](const RunInfo& r) -> QString {
        return QString::fromUtf8(QJsonDocument(r.manifest.model).toJson(QJsonDocument::Compact));
    });
    row(QStringLiteral("layers"),
        [](const RunInfo& r) -> QString { return QString::number(r.manifest.numLayers); });
    row(QStringLiteral("iterations"),
        [](const RunInfo& r) -> QString { return intList(r.manifest.iterations); });
    row(QStringLiteral("micro-batches"),
        [](const RunInfo& r) -> QString { return QString::number(r.manifest.microBatches); });
    row(QStringLiteral("perturbation"), [](const RunInfo& r) -> QString {
        return r.manifest.perturbation ? formatNumber(*r.manifest.perturbation)
                                       : QStringLiteral("-");
    });
    row(QStringLiteral("capture tool"), [](const RunInfo& r) -> QString {
        return r.manifest.toolName + QLatin1Char(' ') + r.manifest.toolVersion;
    });
    row(QStringLiteral("format version"), [](const RunInfo& r) -> QString {
        return QStringLiteral("%1.%2").arg(r.manifest.versionMajor).arg(r.manifest.versionMinor);
    });
    row(QStringLiteral("tensors indexed"),
        [](const RunInfo& r) -> QString { return QString::number(r.tensorCount); });
    return table;
}

Diagnostics allDiagnostics(const CheckReport& report) {
    Diagnostics all;
    std::set<std::tuple<Severity, QString, QString, QString, QString>> seen;
    const auto addAll = [&](const Diagnostics& list) {
        for (const Diagnostic& d : list) {
            if (seen.insert(diagnosticTuple(d)).second) {
                all.push_back(d);
            }
        }
    };
    addAll(report.diagnostics);
    addAll(report.comparison.diagnostics);
    for (const auto& r : report.comparison.results) {
        addAll(r.diagnostics);
    }
    return all;
}

Diagnostics sortedDiagnostics(const CheckReport& report) {
    Diagnostics all = allDiagnostics(report);
    std::stable_sort(all.begin(), all.end(), [](const Diagnostic& a, const Diagnostic& b) {
        return static_cast<int>(a.severity) > static_cast<int>(b.severity);
    });
    return all;
}

QString diagnosticLocation(const Diagnostic& diagnostic) {
    if (diagnostic.dataset.isEmpty()) {
        return diagnostic.file;
    }
    return diagnostic.file + QLatin1Char(':') + diagnostic.dataset;
}

}  // namespace ttrace::report_text
