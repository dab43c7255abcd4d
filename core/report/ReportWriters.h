#pragma once

#include <QByteArray>
#include <QIODevice>
#include <QString>
#include <functional>

#include "report/CheckReport.h"

namespace ttrace {

// JSON for tools: every result, the localization and every diagnostic, written to `out` one
// tensor at a time (their shards read then, when loaded on demand), so that the report of a
// run of thousands of ranks is never whole in memory. False when a write failed.
bool writeJsonReport(const CheckReport& report, QIODevice& out);
// The same report in memory.
QByteArray reportToJson(const CheckReport& report);
// Markdown for an issue tracker: verdict, first fault, root cause, faulty shard, worst tensors,
// thresholds, run configurations, diagnostics.
QString reportToMarkdown(const CheckReport& report);
// Self-contained HTML (inline CSS and SVG, no external resource) with the same content plus a
// layer-by-layer heatmap of normalized error.
QString reportToHtml(const CheckReport& report);

// Writes `contents` to `path` atomically; returns false and sets `error` naming the path.
bool writeReportFile(const QString& path, const QByteArray& contents, QString* error);
// The same with what `write` writes to the file, piece by piece; `write` returns false when a
// write failed.
bool writeReportFile(const QString& path, const std::function<bool(QIODevice& file)>& write,
                     QString* error);

}  // namespace ttrace
