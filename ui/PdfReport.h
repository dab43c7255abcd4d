#pragma once

#include <QByteArray>
#include <QImage>

#include "report/CheckReport.h"

namespace ttrace {

// The Markdown report laid out by QTextDocument on A4 pages, with `heatmap` (a grab of the
// heatmap view; may be null) at the end. Only QtGui: no printer support needed.
QByteArray reportToPdf(const CheckReport& report, const QImage& heatmap);

}  // namespace ttrace
