#pragma once

#include <QString>

namespace ttrace {

class MainWindow;

// Once `window` shows its report: goes to the first fault, saves the window as a PNG at
// `path` and quits the application (exit code 0, or 1 when a file cannot be written). With
// `drillDown`, also saves the drill-down steps beside it: PATH-elements.png (the tensor's
// element errors, once computed) and PATH-ranks.png (its layer across the ranks). For
// scripts/screenshots.sh and documentation.
void screenshotWhenReportShown(MainWindow* window, const QString& path, bool drillDown = false);

}  // namespace ttrace
