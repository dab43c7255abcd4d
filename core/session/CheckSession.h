#pragma once

#include <QString>
#include <atomic>
#include <functional>

#include "compare/ComparisonJob.h"
#include "report/CheckReport.h"

namespace ttrace {

// The stages a check goes through, in order; progress is reported per stage.
enum class CheckStage { Indexing, Comparing, Localizing };
QString checkStageName(CheckStage stage);

struct CheckRequest {
    QString distributed;
    QString reference;
    QString perturbed;   // empty: no perturbed reference, theoretical thresholds
    QString configPath;  // empty: default thresholds
    QString cacheDir;    // empty: cacheDirectory()'s default
    bool useCache = true;
    int threads = 0;
    std::int64_t chunkElements = 1 << 20;
    const std::atomic<bool>* cancel = nullptr;
    // Progress in [0, 1] within a stage; called from worker threads.
    std::function<void(CheckStage stage, double fraction)> progress;
};

struct CheckOutcome {
    CheckReport report;
    // False when the inputs could not be compared at all (unreadable manifest, wrong roles,
    // bad config): the report then holds only diagnostics.
    bool compared = false;
    bool cancelled = false;
};

// The whole check, shared by the headless checker and the GUI: opens the trace sets
// (read-only, index cached), reuses stored results when nothing changed, otherwise compares
// and stores, then localizes. Never throws; every problem ends up in report.diagnostics.
[[nodiscard]] CheckOutcome runCheck(const CheckRequest& request);

}  // namespace ttrace
