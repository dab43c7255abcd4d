#pragma once

#include <QString>

namespace ttrace {

class MainWindow;

// Once `window` shows its report: goes to the first fault, saves the window as a PNG at
// `path` and quits the application (exit code 0, or 1 when the file cannot be written). For
// scripts/screenshots.sh and documentation.
void screenshotWhenReportShown(MainWindow* window, const QString& path);

}  // namespace ttrace
