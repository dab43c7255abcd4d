#pragma once

#include <QString>
#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "compare/MetricsBackend.h"
#include "compare/TensorPairing.h"
#include "compare/TensorResult.h"
#include "compare/Threshold.h"
#include "mapping/CanonicalMapping.h"
#include "trace/Diagnostic.h"
#include "trace/TraceSet.h"

namespace ttrace {

struct TaskOutcome;

struct ComparisonOptions {
    ThresholdConfig thresholds;
    int threads = 0;                          // 0 = one per core
    std::int64_t chunkElements = 1 << 20;     // elements per block: bounds memory per thread
    const MetricsBackend* backend = nullptr;  // CPU backend when null
    const std::atomic<bool>* cancel = nullptr;
    // Progress in [0, 1] by bytes compared; called from worker threads, throttled.
    std::function<void(double fraction)> progress;
    // Called from a worker thread each time a tensor is finished, with its outcome (what the
    // checker persists so that a killed check resumes, docs/checker.md). An exception it
    // throws stops the comparison like any other failure of a worker.
    std::function<void(const TaskOutcome& outcome)> tensorFinished;
};

struct ComparisonOutput {
    std::vector<TensorResult> results;  // ordered by the reference's execution order
    Diagnostics diagnostics;  // mapping problems, tensors missing in a reference, read errors
    QString backendName;
    std::int64_t bytesCompared = 0;
    bool cancelled = false;
    // Tensors left unchecked because a process or worker failed (TensorKey::toString()); each
    // also has an error in `diagnostics`. Empty when every tensor was compared.
    std::vector<QString> unchecked;

    bool complete() const { return unchecked.empty() && !cancelled; }
};

// Every logical tensor of the three runs and the comparison tasks pairing them. The tasks
// point into the mappings and into the trace sets, which must outlive the plan.
struct ComparisonPlan {
    MappingResult distributed;
    MappingResult reference;
    std::optional<MappingResult> perturbed;
    std::vector<ComparisonTask> tasks;  // ordered by the distributed tensors' keys
    Diagnostics diagnostics;            // mapping and pairing problems

    ComparisonPlan() = default;
    ComparisonPlan(ComparisonPlan&&) = default;
    ComparisonPlan(const ComparisonPlan&) = delete;
    ComparisonPlan& operator=(const ComparisonPlan&) = delete;
};

[[nodiscard]] ComparisonPlan planComparison(const TraceSet& distributed, const TraceSet& reference,
                                            const TraceSet* perturbed);

// Trace bytes a task reads: every summand of every replica, plus the reference (and
// perturbed) slice once per shard. What the distributed checker balances processes by.
std::int64_t plannedBytes(const ComparisonTask& task);

// The result of one task, or why it could not be compared.
struct TaskOutcome {
    std::size_t task = 0;
    std::optional<TensorResult> result;
    std::optional<Diagnostic> failure;  // set when result is not
};

struct TaskOutcomes {
    std::vector<TaskOutcome> finished;   // ordered by task index
    std::vector<std::size_t> unchecked;  // selected tasks left unfinished because of `failure`
    QString failure;                     // why a worker stopped; empty when none did
    QString backendName;
    bool cancelled = false;
};

// Compares the tasks `selected` (indices into plan.tasks, ascending) on several threads. A
// worker that throws stops the others; the tensors finished by then are kept.
[[nodiscard]] TaskOutcomes compareTasks(const ComparisonPlan& plan,
                                        const std::vector<std::size_t>& selected,
                                        const TraceSet& distributed,
                                        const ComparisonOptions& options);

// Puts outcomes of every task (in any order; several processes' outcomes merged) together as
// one run's output, ordered as a single-process run orders it. `unchecked` pairs each task
// left unchecked with the reason.
[[nodiscard]] ComparisonOutput assembleComparison(
    const ComparisonPlan& plan, std::vector<TaskOutcome> outcomes,
    const std::vector<std::pair<std::size_t, QString>>& unchecked, const QString& backendName);

// Compares every logical tensor of `distributed` with `reference` (and `perturbed`, when
// given): assembles shards on global coordinates, streams blocks through the backend on
// several threads, checks replicas bit for bit, and sets each tensor's threshold.
[[nodiscard]] ComparisonOutput compareTraceSets(const TraceSet& distributed,
                                                const TraceSet& reference,
                                                const TraceSet* perturbed,
                                                const ComparisonOptions& options);

}  // namespace ttrace
