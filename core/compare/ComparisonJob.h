#pragma once

#include <QString>
#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "compare/MetricsBackend.h"
#include "compare/TensorResult.h"
#include "compare/Threshold.h"
#include "trace/Diagnostic.h"
#include "trace/TraceSet.h"

namespace ttrace {

struct ComparisonOptions {
    ThresholdConfig thresholds;
    int threads = 0;                          // 0 = one per core
    std::int64_t chunkElements = 1 << 20;     // elements per block: bounds memory per thread
    const MetricsBackend* backend = nullptr;  // CPU backend when null
    const std::atomic<bool>* cancel = nullptr;
    // Progress in [0, 1] by bytes compared; called from worker threads, throttled.
    std::function<void(double fraction)> progress;
};

struct ComparisonOutput {
    std::vector<TensorResult> results;  // ordered by the reference's execution order
    Diagnostics diagnostics;  // mapping problems, tensors missing in a reference, read errors
    QString backendName;
    std::int64_t bytesCompared = 0;
    bool cancelled = false;
};

// Compares every logical tensor of `distributed` with `reference` (and `perturbed`, when
// given): assembles shards on global coordinates, streams blocks through the backend on
// several threads, checks replicas bit for bit, and sets each tensor's threshold.
[[nodiscard]] ComparisonOutput compareTraceSets(const TraceSet& distributed,
                                                const TraceSet& reference,
                                                const TraceSet* perturbed,
                                                const ComparisonOptions& options);

}  // namespace ttrace
