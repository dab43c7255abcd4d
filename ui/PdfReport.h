#pragma once

#include <QByteArray>
#include <QImage>

#include "ElementFigures.h"
#include "report/CheckReport.h"

namespace ttrace {

// The Markdown report laid out by QTextDocument on A4 pages, with `heatmap` (a grab of the
// heatmap view; may be null) and the element plots of the tensor shown (may be empty) at the
// end. Only QtGui: no printer support needed.
QByteArray reportToPdf(const CheckReport& report, const QImage& heatmap,
                       const ElementFigures& figures = {});

}  // namespace ttrace
