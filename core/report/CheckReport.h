#pragma once

#include <QDateTime>
#include <QString>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "compare/CommonGradientFactor.h"
#include "compare/ComparisonJob.h"
#include "compare/Localization.h"
#include "compare/ResultDetails.h"
#include "compare/Threshold.h"
#include "trace/Manifest.h"

namespace ttrace {

struct RunInfo {
    QString folder;
    Manifest manifest;
    int tensorCount = 0;  // datasets indexed
};

// What a check concludes: decided once, in CheckReport::verdict(), for the summary line,
// every report, the window and the exit code (docs/checker.md, "Verdicts").
enum class Verdict {
    BugFound,         // a tensor is faulty
    NoBug,            // every tensor of both runs compared, none faulty, no error
    NoBugInPart,      // none faulty among those compared, but not every tensor was compared
    NothingCompared,  // not one tensor could be compared
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
    // The factors common to each iteration's gradients; those within their round-off bound
    // are not counted as error (CommonGradientFactor.h).
    std::vector<CommonGradientFactor> gradientFactors;
    Localization localization;
    Diagnostics diagnostics;  // every trace, mapping and comparison problem
    double seconds = 0;
    bool fromCache = false;
    // Set when the results were loaded without their shards and rank sequence numbers
    // (CheckRequest::detailsOnDemand): shardsOf() and rankSeqOf() then read them from here.
    std::shared_ptr<const ResultDetails> details;

    bool bugFound() const { return localization.bugFound(); }
    // A faulty tensor; else whether everything was compared: every reference tensor captured
    // and compared, none missing from the reference, no error, no tensor left unchecked.
    Verdict verdict() const;
    std::int64_t comparedCount() const {
        return static_cast<std::int64_t>(comparison.results.size());
    }
    // The shards of comparison.results[index]: the ones in memory, else read from
    // `details`. Hold the pointer while using them: `for (s : *report.shardsOf(i))`
    // iterates a vector the temporary pointer has already freed.
    [[nodiscard]] std::shared_ptr<const std::vector<ShardResult>> shardsOf(std::size_t index) const;
    // Likewise comparison.results[index].rankSeq.
    [[nodiscard]] std::shared_ptr<const std::map<int, std::int64_t>> rankSeqOf(
        std::size_t index) const;
};

}  // namespace ttrace
