#pragma once

// qcustomplot.h uses the Qt keywords `signals` and `foreach`, which QT_NO_KEYWORDS removes
// for our own code. Include QCustomPlot through this header only.
#define signals Q_SIGNALS
#define foreach Q_FOREACH
#include <qcustomplot.h>
#undef foreach
#undef signals

namespace ttrace {

// Colours a plot from `palette` (background, axes, tick labels, legends), so that plots
// follow the system's light or dark scheme as the rest of the window does.
void applyPlotPalette(QCustomPlot* plot, const QPalette& palette);

}  // namespace ttrace
