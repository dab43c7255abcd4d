#include <algorithm>
#include <cmath>

#include "compare/FaultDescription.h"
#include "report/ErrorColorMap.h"
#include "report/HeatmapGrid.h"
#include "report/ReportText.h"
#include "report/ReportWriters.h"

namespace ttrace {

namespace {

using namespace report_text;

constexpr std::size_t kWorstTensors = 20;

// The verdict box's colours: red for a bug, blue for none, orange for a partial look.
QString verdictClass(Verdict verdict) {
    switch (verdict) {
        case Verdict::BugFound:
            return QStringLiteral("bug");
        case Verdict::NoBug:
            return QStringLiteral("nobug");
        case Verdict::NoBugInPart:
        case Verdict::NothingCompared:
            return QStringLiteral("partial");
    }
    return {};
}

// XHTML-compatible markup (every element closed, attributes quoted, numeric entities only), so
// that XML tools can read the report too. Characters XML 1.0 forbids become U+FFFD.
QString esc(const QString& raw) {
    QString out;
    out.reserve(raw.size() + raw.size() / 8);
    for (const QChar c : raw) {
        switch (c.unicode()) {
            case '&':
                out += QStringLiteral("&amp;");
                break;
            case '<':
                out += QStringLiteral("&lt;");
                break;
            case '>':
                out += QStringLiteral("&gt;");
                break;
            case '"':
                out += QStringLiteral("&quot;");
                break;
            case '\'':
                out += QStringLiteral("&#39;");
                break;
            default: {
                const char16_t u = c.unicode();
                const bool allowed = u >= 0x20 ? (u != 0xFFFE && u != 0xFFFF)
                                               : (u == '\t' || u == '\n' || u == '\r');
                out += allowed ? c : QChar(0xFFFD);
            }
        }
    }
    return out;
}

QString element(const char* tag, const QString& escapedBody, const QString& cls = {}) {
    const QString name = QLatin1String(tag);
    return QLatin1Char('<') + name +
           (cls.isEmpty() ? QString() : QStringLiteral(" class=\"") + cls + QLatin1Char('"')) +
           QLatin1Char('>') + escapedBody + QStringLiteral("</") + name + QLatin1Char('>');
}

QString codeCell(const QString& raw) {
    return element("code", esc(raw));
}

QString tableRow(const QStringList& escapedCells, const char* cellTag = "td") {
    QString row = QStringLiteral("<tr>");
    for (const auto& cell : escapedCells) {
        row += element(cellTag, cell);
    }
    return row + QStringLiteral("</tr>\n");
}

QString num(double value) {
    // Coordinates in SVG: plain decimal, no exponent, one decimal place is enough.
    return QString::number(value, 'f', 1);
}

const char* const kStyle = R"css(
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 80em; }
h1 { font-size: 1.6em; }
h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code { font-size: 0.95em; }
.verdict { font-size: 1.1em; padding: 0.6em 1em; border-radius: 4px; }
.verdict.bug { background: #fddbc7; border-left: 6px solid #b2182b; }
.verdict.nobug { background: #d1e5f0; border-left: 6px solid #2166ac; }
.verdict.partial { background: #fee8c8; border-left: 6px solid #d95f0e; }
.severity-error { color: #b2182b; font-weight: bold; }
.severity-warning { color: #8c510a; }
.faulty { color: #b2182b; font-weight: bold; }
.heatmap { overflow-x: auto; }
svg text { font-family: sans-serif; font-size: 11px; fill: #222; }
svg text.group { font-weight: bold; }
footer { margin-top: 3em; color: #777; font-size: 0.9em; }
)css";

// The layer-by-layer heatmap as inline SVG.
QString heatmapSvg(const CheckReport& report) {
    const auto& results = report.comparison.results;
    const HeatmapGrid grid = buildHeatmapGrid(results);
    if (grid.cells.empty()) {
        return QStringLiteral("<p>No tensor was compared.</p>\n");
    }
    constexpr double cell = 14;
    constexpr double pitch = 15;
    constexpr double layerBand = 90;
    constexpr double charWidth = 6.6;
    constexpr int maxLabelChars = 48;
    qsizetype longest = 0;
    for (const auto& row : grid.rows) {
        longest = std::max(longest, row.module.size());
    }
    qsizetype longestColumn = 0;
    for (const auto& column : grid.columns) {
        longestColumn =
            std::max(longestColumn, tensorKindName(column.kind).size() + 1 + column.label().size());
    }
    const double top = 6.0 * static_cast<double>(longestColumn) + 14;  // rotated labels
    const double labelWidth =
        charWidth * static_cast<double>(std::min<qsizetype>(longest, maxLabelChars)) + 12;
    const double left = layerBand + labelWidth;
    const double gridWidth = pitch * static_cast<double>(grid.columns.size());
    const double gridHeight = pitch * static_cast<double>(grid.rows.size());
    const double legendTop = top + gridHeight + 30;
    const double legendWidth = 360;
    const double width = std::max(left + gridWidth + 20, layerBand + legendWidth + 200);
    const double height = legendTop + 70;

    QString svg = QStringLiteral(
                      "<svg class=\"heatmap-svg\" width=\"%1\" height=\"%2\" viewBox=\"0 0 %1 %2\" "
                      "role=\"img\" aria-label=\"Normalized error per tensor\">\n")
                      .arg(num(width), num(height));

    // Column headers, rotated: kind, iteration and micro-batch; a line between kinds.
    for (std::size_t c = 0; c < grid.columns.size(); ++c) {
        const HeatmapColumn& column = grid.columns[c];
        const double x = left + pitch * static_cast<double>(c);
        if (c > 0 && grid.columns[c - 1].kind != column.kind) {
            svg += QStringLiteral(
                       "<line x1=\"%1\" y1=\"%2\" x2=\"%1\" y2=\"%3\" "
                       "stroke=\"#888\" stroke-width=\"1\"/>\n")
                       .arg(num(x - 0.5), num(top - 10), num(top + gridHeight));
        }
        const double cx = x + cell / 2 + 4;
        svg += QStringLiteral("<text x=\"%1\" y=\"%2\" transform=\"rotate(-90 %1 %2)\">%3</text>\n")
                   .arg(num(cx), num(top - 4),
                        esc(tensorKindName(column.kind) + QLatin1Char(' ') + column.label()));
    }

    // Row labels and layer groups.
    for (std::size_t r = 0; r < grid.rows.size(); ++r) {
        const HeatmapRow& row = grid.rows[r];
        const double y = top + pitch * static_cast<double>(r);
        if (r == 0 || grid.rows[r - 1].layer != row.layer) {
            const QString group = row.layer < 0
                                      ? QStringLiteral("no layer")
                                      : QStringLiteral("layer ") + QString::number(row.layer);
            svg += QStringLiteral("<text class=\"group\" x=\"4\" y=\"%1\">%2</text>\n")
                       .arg(num(y + cell - 3), esc(group));
            if (r > 0) {
                svg += QStringLiteral(
                           "<line x1=\"4\" y1=\"%1\" x2=\"%2\" y2=\"%1\" "
                           "stroke=\"#888\" stroke-width=\"1\"/>\n")
                           .arg(num(y - 0.5), num(left + gridWidth));
            }
        }
        // Long names are cut at the front (the end says most); the full name is then a
        // tooltip on the group around the label.
        const bool cut = row.module.size() > maxLabelChars;
        const QString label =
            cut ? QChar(0x2026) + row.module.right(maxLabelChars - 1) : row.module;
        const QString text = QStringLiteral("<text x=\"%1\" y=\"%2\" text-anchor=\"end\">%3</text>")
                                 .arg(num(left - 4), num(y + cell - 3), esc(label));
        svg += (cut ? QStringLiteral("<g><title>") + esc(row.module) + QStringLiteral("</title>") +
                          text + QStringLiteral("</g>")
                    : text) +
               QLatin1Char('\n');
    }

    // Cells; the first fault's outline is drawn last so that no neighbour covers it.
    const auto firstFaulty = report.localization.firstFaulty;
    QString marker;
    for (const HeatmapCell& c : grid.cells) {
        const TensorResult& r = results[c.result];
        const double x = left + pitch * static_cast<double>(c.column);
        const double y = top + pitch * static_cast<double>(c.row);
        const bool first = firstFaulty && *firstFaulty == c.result;
        QString cls = QStringLiteral("cell");
        if (r.isFaulty()) {
            cls += QStringLiteral(" faulty");
        }
        if (first) {
            cls += QStringLiteral(" first-fault");
        }
        QString tooltip = r.key.toString() + QStringLiteral("\nnormalized error ") +
                          formatNumber(r.normalizedError) + QStringLiteral("\nrelative error ") +
                          formatNumber(r.judgedError()) + QStringLiteral("\nthreshold ") +
                          formatNumber(r.threshold.value) + QStringLiteral(" (") +
                          thresholdMethodName(r.threshold.method) + QLatin1Char(')');
        if (!r.replicaMismatches.empty()) {
            tooltip += QStringLiteral("\nreplicas differ");
        }
        if (!r.recomputationMismatches.empty()) {
            tooltip += QStringLiteral("\nrecomputed forward differs");
        }
        if (r.fp8Scales && !r.fp8Scales->mismatches.empty()) {
            const ScaleMismatch& worst = r.fp8Scales->mismatches.front();
            tooltip += QLatin1Char('\n') + scaleRecipe(*r.fp8Scales, r.dtype) +
                       (worst.acrossReferenceBlocks
                            ? QStringLiteral(" scale blocks laid out otherwise than the "
                                             "reference's")
                            : QString(QStringLiteral(" scale ") + formatNumber(worst.ratio) +
                                      QStringLiteral("x the reference's")));
        }
        if (r.metrics.hasNonFinite()) {
            tooltip +=
                QStringLiteral("\nNaN %1, Inf %2").arg(r.metrics.nanDist).arg(r.metrics.infDist);
        }
        if (first) {
            tooltip += QStringLiteral("\nfirst faulty tensor");
        }
        // Faulty cells below 1.0 (diverging replicas, new NaN) still get the red end.
        const double shade =
            r.isFaulty() && !(r.normalizedError > 1.0) ? std::nan("") : r.normalizedError;
        svg += QStringLiteral(
                   "<rect class=\"%1\" data-result=\"%2\" x=\"%3\" y=\"%4\" width=\"%5\" "
                   "height=\"%5\" fill=\"%6\"><title>%7</title></rect>\n")
                   .arg(cls)
                   .arg(c.result)
                   .arg(num(x), num(y), num(cell), errorColor(shade), esc(tooltip));
        if (first) {
            marker = QStringLiteral(
                         "<rect class=\"first-fault-marker\" x=\"%1\" y=\"%2\" "
                         "width=\"%3\" height=\"%3\" fill=\"none\" stroke=\"#000\" "
                         "stroke-width=\"2.5\"/>\n")
                         .arg(num(x - 1), num(y - 1), num(cell + 2));
        }
    }
    svg += marker;

    // Colour scale: decades of normalized error, with the threshold (1.0) marked.
    constexpr int steps = 60;
    const double stepWidth = legendWidth / steps;
    const double span = kErrorColorMaxDecade - kErrorColorMinDecade;
    const double legendLeft = layerBand;
    // The caption sits above the bar: the row-label band is too narrow to hold it.
    svg += QStringLiteral("<text class=\"group\" x=\"%1\" y=\"%2\">normalized error</text>\n")
               .arg(num(legendLeft), num(legendTop - 6));
    for (int i = 0; i < steps; ++i) {
        const double decade = kErrorColorMinDecade + span * (i + 0.5) / steps;
        svg += QStringLiteral(
                   "<rect class=\"legend-step\" x=\"%1\" y=\"%2\" width=\"%3\" "
                   "height=\"14\" fill=\"%4\"/>\n")
                   .arg(num(legendLeft + stepWidth * i), num(legendTop), num(stepWidth + 0.3),
                        errorColor(std::pow(10.0, decade)));
    }
    for (int d = static_cast<int>(kErrorColorMinDecade);
         d <= static_cast<int>(kErrorColorMaxDecade); ++d) {
        const double x = legendLeft + legendWidth * (d - kErrorColorMinDecade) / span;
        const QString label =
            d == 0 ? QStringLiteral("1 (threshold)") : QStringLiteral("1e%1").arg(d);
        svg += QStringLiteral(
                   "<line x1=\"%1\" y1=\"%2\" x2=\"%1\" y2=\"%3\" stroke=\"#000\" "
                   "stroke-width=\"%4\"/>\n<text x=\"%1\" y=\"%5\" "
                   "text-anchor=\"middle\">%6</text>\n")
                   .arg(num(x), num(legendTop - (d == 0 ? 4 : 0)), num(legendTop + 18),
                        d == 0 ? QStringLiteral("2") : QStringLiteral("1"), num(legendTop + 30),
                        esc(label));
    }
    const double markerX = legendLeft + legendWidth + 30;
    svg += QStringLiteral(
               "<rect x=\"%1\" y=\"%2\" width=\"%3\" height=\"%3\" fill=\"none\" "
               "stroke=\"#000\" stroke-width=\"2.5\"/>\n<text x=\"%4\" y=\"%5\">first "
               "faulty tensor</text>\n")
               .arg(num(markerX), num(legendTop), num(cell), num(markerX + cell + 6),
                    num(legendTop + 11));
    svg += QStringLiteral(
               "<text x=\"%1\" y=\"%2\">within tolerance: blue; over the threshold: "
               "orange to red</text>\n")
               .arg(num(legendLeft), num(legendTop + 50));
    return svg + QStringLiteral("</svg>\n");
}

}  // namespace

QString reportToHtml(const CheckReport& report) {
    const auto& results = report.comparison.results;
    QString html;
    html +=
        QStringLiteral("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n");
    html += element("title", esc(QStringLiteral("ttrace report: ") + verdictTitle(report))) +
            QLatin1Char('\n');
    html += QStringLiteral("<style>") + QLatin1String(kStyle) + QStringLiteral("</style>\n");
    html += QStringLiteral("</head>\n<body>\n");
    html += element("h1", esc(QStringLiteral("ttrace report: ") + verdictTitle(report))) +
            QLatin1Char('\n');
    html += QStringLiteral("<p class=\"verdict %1\">%2</p>\n")
                .arg(verdictClass(report.verdict()), esc(verdictLine(report)));

    html += QStringLiteral("<h2>Summary</h2>\n<table class=\"summary\">\n");
    html += tableRow({QStringLiteral("Finding"), QStringLiteral("Value"), QStringLiteral("Detail")},
                     "th");
    for (const SummaryRow& row : summaryRows(report)) {
        html += tableRow(
            {esc(row.item), row.code ? codeCell(row.value) : esc(row.value), esc(row.detail)});
    }
    html += QStringLiteral("</table>\n");

    html += QStringLiteral(
        "<h2>Layer-by-layer heatmap</h2>\n<p>Rows are modules in execution order, grouped by "
        "layer; columns are tensor kinds per iteration and micro-batch. Colour is the normalized "
        "error (relative error / threshold) on a log scale; hover a cell for its values.</p>\n");
    html += QStringLiteral("<div class=\"heatmap\">\n") + heatmapSvg(report) +
            QStringLiteral("</div>\n");

    html += QStringLiteral("<h2>Worst tensors</h2>\n");
    const auto worst = worstTensors(results, kWorstTensors);
    if (worst.empty()) {
        html += QStringLiteral("<p>No tensor was compared.</p>\n");
    } else {
        html += QStringLiteral("<table class=\"worst\">\n");
        html += tableRow(
            {QStringLiteral("#"), QStringLiteral("Tensor"), QStringLiteral("Layer"),
             QStringLiteral("Normalized error"), QStringLiteral("Relative error"),
             QStringLiteral("Threshold"), QStringLiteral("Method"), QStringLiteral("Faulty")},
            "th");
        for (const std::size_t i : worst) {
            const TensorResult& r = results[i];
            const QString numCell = QStringLiteral("<td class=\"num\">%1</td>");
            html += QStringLiteral("<tr><td class=\"num\">%1</td><td>%2</td>")
                        .arg(i)
                        .arg(codeCell(r.key.toString())) +
                    numCell.arg(r.layer < 0 ? QStringLiteral("-") : QString::number(r.layer)) +
                    numCell.arg(formatNumber(r.normalizedError)) +
                    numCell.arg(formatNumber(r.judgedError())) +
                    numCell.arg(formatNumber(r.threshold.value)) +
                    element("td", esc(thresholdMethodName(r.threshold.method))) +
                    (r.isFaulty() ? QStringLiteral("<td class=\"faulty\">yes</td>")
                                  : QStringLiteral("<td>no</td>")) +
                    QStringLiteral("</tr>\n");
        }
        html += QStringLiteral("</table>\n");
    }

    html += QStringLiteral("<h2>Thresholds</h2>\n");
    const QStringList counts = thresholdMethodCounts(results);
    html += element("p", esc(QStringLiteral("Set per tensor: ") +
                             (counts.isEmpty() ? QStringLiteral("none")
                                               : counts.join(QStringLiteral(", "))) +
                             QLatin1Char('.'))) +
            QLatin1Char('\n');
    html += QStringLiteral("<table class=\"thresholds\">\n");
    html += tableRow({QStringLiteral("Setting"), QStringLiteral("Value")}, "th");
    for (const auto& [setting, value] : thresholdConfigRows(report)) {
        html += tableRow({esc(setting), esc(value)});
    }
    html += QStringLiteral("</table>\n");

    html += QStringLiteral("<h2>Run configurations</h2>\n<table class=\"runs\">\n");
    const ConfigTable runs = runConfigTable(report);
    QStringList titles{QString()};
    for (const auto& title : runs.titles) {
        titles << esc(title);
    }
    html += tableRow(titles, "th");
    for (const auto& [field, values] : runs.rows) {
        QStringList cells{esc(field)};
        for (const auto& value : values) {
            cells << esc(value);
        }
        html += tableRow(cells);
    }
    html += QStringLiteral("</table>\n");
    html += element("p", esc(capitalized(comparisonLine(report)) + QLatin1Char('.'))) +
            QLatin1Char('\n');

    html += QStringLiteral("<h2>Diagnostics</h2>\n");
    const Diagnostics diagnostics = sortedDiagnostics(report);
    if (diagnostics.empty()) {
        html += QStringLiteral("<p>None.</p>\n");
    } else {
        html += QStringLiteral("<table class=\"diagnostics\">\n");
        html += tableRow({QStringLiteral("Severity"), QStringLiteral("Where"),
                          QStringLiteral("Tensor"), QStringLiteral("Message")},
                         "th");
        for (const Diagnostic& d : diagnostics) {
            const QString severity = severityName(d.severity);
            html += QStringLiteral("<tr><td class=\"severity-%1\">%1</td>").arg(severity) +
                    element("td", codeCell(diagnosticLocation(d))) +
                    element("td", codeCell(d.tensor)) +
                    element("td", d.details.isEmpty()
                                      ? esc(d.message)
                                      : esc(d.message) + QStringLiteral("<br><small>libhdf5: ") +
                                            esc(d.details) + QStringLiteral("</small>")) +
                    QStringLiteral("</tr>\n");
        }
        html += QStringLiteral("</table>\n");
    }
    html +=
        element("footer", esc(QStringLiteral("ttrace %1, %2")
                                  .arg(report.toolVersion, report.created.toString(Qt::ISODate)))) +
        QStringLiteral("\n</body>\n</html>\n");
    return html;
}

}  // namespace ttrace
