#pragma once

#include <QDateTime>
#include <QString>
#include <optional>

#include "compare/ComparisonJob.h"
#include "compare/Localization.h"
#include "compare/Threshold.h"
#include "trace/Manifest.h"

namespace ttrace {

struct RunInfo {
    QString folder;
    Manifest manifest;
    int tensorCount = 0;  // datasets indexed
};

// Everything a bug report says; the writers only format it.
struct CheckReport {
    QString toolVersion;
    QDateTime created;
    RunInfo distributed;
    RunInfo reference;
    std::optional<RunInfo> perturbed;
    ThresholdConfig thresholds;
    QString configPath;
    ComparisonOutput comparison;
    Localization localization;
    Diagnostics diagnostics;  // every trace, mapping and comparison problem
    double seconds = 0;
    bool fromCache = false;

    bool bugFound() const { return localization.bugFound(); }
};

}  // namespace ttrace
