#pragma once

#include <QImage>
#include <QString>

namespace ttrace {

// The element-level plots of the tensor shown in the GUI, drawn for a report.
struct ElementFigures {
    QString tensor;  // its key
    QImage histogram;
    QImage image;

    bool isEmpty() const { return histogram.isNull() && image.isNull(); }
};

// `html` (a report from reportToHtml) with a section holding `figures` as embedded PNGs just
// before the footer; unchanged when there are none.
QString withElementFigures(const QString& html, const ElementFigures& figures);

}  // namespace ttrace
