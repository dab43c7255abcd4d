#pragma once

#include <QString>
#include <QStringList>
#include <cstddef>
#include <optional>
#include <vector>

#include "compare/FaultDescription.h"
#include "report/CheckReport.h"

// The words and tables every human-readable report shares, so that the Markdown and HTML
// writers only differ in markup. Plain text: each writer escapes for its own format.
namespace ttrace::report_text {

// Three significant digits; scientific below 1e-3 and from 1e4: "0.00123", "42.0", "1.23e-05".
QString formatNumber(double value);
// "512 B", "1.50 MiB"
QString formatBytes(std::int64_t bytes);

// "compared 1.5 MiB in 0.42 s; backend: CPU", or for results read back from the cache
// (nothing compared this time) "1.5 MiB compared by an earlier check, results read from the
// cache in 0.05 s; backend: CPU".
QString comparisonLine(const CheckReport& report);
// `text` with its first letter in upper case, to start a sentence.
QString capitalized(QString text);

// "Bug found: ..." / "No bug found: ..."
QString verdictTitle(const CheckReport& report);
QString verdictLine(const CheckReport& report);
// What the errors among `diagnostics` are about, in a line: each tensor, or each file as its
// folder and name, the first three ("a/rank00001.h5, b/rank00000.h5 and 2 more").
QString erroneousParts(const Diagnostics& diagnostics);

// "4.12e-02 vs threshold 1.00e-03 (perturbation)"
QString errorVsThreshold(const TensorResult& result);

// One finding of the summary table. `code` marks values that are tensor or module names.
struct SummaryRow {
    QString item;
    QString value;
    bool code = false;
    QString detail;
};
std::vector<SummaryRow> summaryRows(const CheckReport& report);
// The verdict line and the summary rows as plain text, one finding a line ("Item: value
// (detail)"), for the clipboard and chat messages.
QString summaryText(const CheckReport& report);

// Indices of the worst tensors, at most `limit`: faulty ones first, then by normalized error
// (non-finite first).
std::vector<std::size_t> worstTensors(const std::vector<TensorResult>& results, std::size_t limit);

// How thresholds were set: "perturbation: 12", "theoretical: 3", ...
QStringList thresholdMethodCounts(const std::vector<TensorResult>& results);
// How the thresholds were set, for the summary: the methods' counts and, where a tensor is
// judged by the theoretical bound, the epsilon the bound took and that a perturbed reference
// measures this model's round-off instead (docs/thresholds.md).
SummaryRow thresholdRow(const CheckReport& report);
// The quantized tensors compared, by recipe, and those whose scales could not be checked;
// "none" under an fp8 or fp4 recipe that recorded none; nothing for other recipes
// (docs/thresholds.md, "What the summary says of them").
std::optional<SummaryRow> quantizedRow(const CheckReport& report);
// Setting / value pairs of the threshold config.
std::vector<std::pair<QString, QString>> thresholdConfigRows(const CheckReport& report);

// Run configurations side by side: a title per run, then one row per field.
struct ConfigTable {
    QStringList titles;  // "distributed", "reference", "perturbed reference"
    std::vector<std::pair<QString, QStringList>> rows;
};
ConfigTable runConfigTable(const CheckReport& report);
// A run's layout in a few words: its parallel axes over one, and its ranks ("tp=2 dp=2 sp on
// 4 ranks", "one device").
QString layoutSummary(const Manifest& manifest);

// Every diagnostic of the report, comparison and tensors, duplicates removed, errors first.
Diagnostics sortedDiagnostics(const CheckReport& report);
// The same without sorting, in the order found (for the JSON report).
Diagnostics allDiagnostics(const CheckReport& report);
// "file:dataset" or "file" or ""
QString diagnosticLocation(const Diagnostic& diagnostic);

}  // namespace ttrace::report_text
