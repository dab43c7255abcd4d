#include <algorithm>

#include "report/ReportText.h"
#include "report/ReportWriters.h"

namespace ttrace {

namespace {

using namespace report_text;

constexpr std::size_t kWorstTensors = 20;
constexpr std::size_t kMaxDiagnostics = 200;

QString oneLine(QString text) {
    text.replace(QLatin1Char('\r'), QLatin1Char(' '));
    text.replace(QLatin1Char('\n'), QLatin1Char(' '));
    return text;
}

// Free text from traces: backslash-escape what Markdown would read as markup (and HTML tags,
// which issue trackers render), and pipes, which end a table cell.
QString text(const QString& raw) {
    static const QString special = QStringLiteral("\\`*_[]<>|#!~&");
    QString out;
    out.reserve(raw.size());
    for (const QChar c : oneLine(raw)) {
        if (special.contains(c)) {
            out += QLatin1Char('\\');
        }
        out += c;
    }
    return out;
}

// Names as code spans; a fence longer than any backtick run inside keeps them intact. Pipes
// still need escaping inside a table cell (GitHub reads them before the code span).
QString code(const QString& raw) {
    QString body = oneLine(raw);
    int longest = 0;
    int run = 0;
    for (const QChar c : body) {
        run = c == QLatin1Char('`') ? run + 1 : 0;
        longest = std::max(longest, run);
    }
    body.replace(QLatin1Char('|'), QStringLiteral("\\|"));
    const QString fence(longest + 1, QLatin1Char('`'));
    const bool pad = body.startsWith(QLatin1Char('`')) || body.endsWith(QLatin1Char('`'));
    return fence + (pad ? QStringLiteral(" ") : QString()) + body +
           (pad ? QStringLiteral(" ") : QString()) + fence;
}

QString tableRow(const QStringList& cells) {
    return QStringLiteral("| ") + cells.join(QStringLiteral(" | ")) + QStringLiteral(" |\n");
}

QString tableHeader(const QStringList& titles) {
    QStringList rule;
    for (qsizetype i = 0; i < titles.size(); ++i) {
        rule << QStringLiteral("---");
    }
    return tableRow(titles) + tableRow(rule);
}

}  // namespace

QString reportToMarkdown(const CheckReport& report) {
    const auto& results = report.comparison.results;
    QString md;
    md += QStringLiteral("# ttrace report: %1\n\n").arg(verdictTitle(report));
    md += QStringLiteral("**%1**\n\n").arg(text(verdictLine(report)));

    md += QStringLiteral("## Summary\n\n");
    md +=
        tableHeader({QStringLiteral("Finding"), QStringLiteral("Value"), QStringLiteral("Detail")});
    for (const SummaryRow& row : summaryRows(report)) {
        md += tableRow(
            {text(row.item), row.code ? code(row.value) : text(row.value), text(row.detail)});
    }
    md += QLatin1Char('\n');

    md += QStringLiteral("## Worst tensors\n\n");
    const auto worst = worstTensors(results, kWorstTensors);
    if (worst.empty()) {
        md += QStringLiteral("No tensor was compared.\n\n");
    } else {
        md += QStringLiteral(
                  "Top %1 of %2: faulty tensors first, then by normalized error (relative error / "
                  "threshold).\n\n")
                  .arg(worst.size())
                  .arg(results.size());
        md += tableHeader({QStringLiteral("#"), QStringLiteral("Tensor"), QStringLiteral("Layer"),
                           QStringLiteral("Normalized error"), QStringLiteral("Relative error"),
                           QStringLiteral("Threshold"), QStringLiteral("Method"),
                           QStringLiteral("Faulty")});
        for (const std::size_t i : worst) {
            const TensorResult& r = results[i];
            md +=
                tableRow({QString::number(i), code(r.key.toString()),
                          r.layer < 0 ? QStringLiteral("-") : QString::number(r.layer),
                          formatNumber(r.normalizedError), formatNumber(r.judgedError()),
                          formatNumber(r.threshold.value), thresholdMethodName(r.threshold.method),
                          r.isFaulty() ? QStringLiteral("**yes**") : QStringLiteral("no")});
        }
        md += QLatin1Char('\n');
    }

    md += QStringLiteral("## Thresholds\n\n");
    const QStringList counts = thresholdMethodCounts(results);
    md += QStringLiteral("Set per tensor: %1.\n\n")
              .arg(counts.isEmpty() ? QStringLiteral("none") : counts.join(QStringLiteral(", ")));
    md += tableHeader({QStringLiteral("Setting"), QStringLiteral("Value")});
    for (const auto& [setting, value] : thresholdConfigRows(report)) {
        md += tableRow({text(setting), text(value)});
    }
    md += QLatin1Char('\n');

    md += QStringLiteral("## Run configurations\n\n");
    const ConfigTable runs = runConfigTable(report);
    md += tableHeader(QStringList{QString()} + runs.titles);
    for (const auto& [field, values] : runs.rows) {
        QStringList cells{text(field)};
        for (const auto& value : values) {
            cells << text(value);
        }
        md += tableRow(cells);
    }
    md += QLatin1Char('\n') + capitalized(text(comparisonLine(report))) + QStringLiteral(".\n\n");

    md += QStringLiteral("## Diagnostics\n\n");
    const Diagnostics diagnostics = sortedDiagnostics(report);
    if (diagnostics.empty()) {
        md += QStringLiteral("None.\n");
    } else {
        md += tableHeader({QStringLiteral("Severity"), QStringLiteral("Where"),
                           QStringLiteral("Tensor"), QStringLiteral("Message")});
        const std::size_t shown = std::min(diagnostics.size(), kMaxDiagnostics);
        for (std::size_t i = 0; i < shown; ++i) {
            const Diagnostic& d = diagnostics[i];
            const QString where = diagnosticLocation(d);
            md += tableRow({severityName(d.severity), where.isEmpty() ? QString() : code(where),
                            d.tensor.isEmpty() ? QString() : code(d.tensor),
                            text(d.details.isEmpty() ? d.message
                                                     : d.message + QStringLiteral(" (libhdf5: ") +
                                                           d.details + QLatin1Char(')'))});
        }
        if (shown < diagnostics.size()) {
            md += QStringLiteral("\n%1 more in the JSON report.\n").arg(diagnostics.size() - shown);
        }
    }
    md += QStringLiteral("\n---\nttrace %1, %2\n")
              .arg(text(report.toolVersion), report.created.toString(Qt::ISODate));
    return md;
}

}  // namespace ttrace
