#pragma once

#include <QByteArray>
#include <QString>

#include "report/CheckReport.h"

namespace ttrace {

// JSON for tools: every result, the localization and every diagnostic.
QByteArray reportToJson(const CheckReport& report);
// Markdown for an issue tracker: verdict, first fault, root cause, faulty shard, worst tensors,
// thresholds, run configurations, diagnostics.
QString reportToMarkdown(const CheckReport& report);
// Self-contained HTML (inline CSS and SVG, no external resource) with the same content plus a
// layer-by-layer heatmap of normalized error.
QString reportToHtml(const CheckReport& report);

// Writes `contents` to `path` atomically; returns false and sets `error` naming the path.
bool writeReportFile(const QString& path, const QByteArray& contents, QString* error);

}  // namespace ttrace
