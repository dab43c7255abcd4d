#include "PlotStyle.h"

namespace ttrace {

void applyPlotPalette(QCustomPlot* plot, const QPalette& palette) {
    const QColor text = palette.color(QPalette::WindowText);
    const auto colourAxis = [&text](QCPAxis* axis) {
        axis->setBasePen(QPen(text));
        axis->setTickPen(QPen(text));
        axis->setSubTickPen(QPen(text));
        axis->setTickLabelColor(text);
        axis->setLabelColor(text);
    };
    plot->setBackground(palette.brush(QPalette::Window));
    for (QCPAxis* axis : plot->axisRect()->axes()) {
        colourAxis(axis);
    }
    for (QCPLayoutElement* element : plot->plotLayout()->elements(true)) {
        if (auto* scale = qobject_cast<QCPColorScale*>(element)) {
            colourAxis(scale->axis());
        }
    }
}

}  // namespace ttrace
