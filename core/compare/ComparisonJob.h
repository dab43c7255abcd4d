#pragma once

#include <QString>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "compare/Coverage.h"
#include "compare/MetricsBackend.h"
#include "compare/TensorPairing.h"
#include "compare/TensorResult.h"
#include "compare/Threshold.h"
#include "compare/TrustedRun.h"
#include "mapping/AssembledTensor.h"
#include "mapping/BlockPlan.h"
#include "trace/Diagnostic.h"
#include "trace/TraceCatalog.h"
#include "trace/TraceSet.h"

namespace ttrace {

struct TaskOutcome;

struct ComparisonOptions {
    ThresholdConfig thresholds;
    int threads = 0;                                     // 0 = one per core
    std::int64_t chunkElements = kDefaultChunkElements;  // elements per block: memory per thread
    const MetricsBackend* backend = nullptr;             // CPU backend when null
    const std::atomic<bool>* cancel = nullptr;
    // Progress in [0, 1] by bytes compared; called from worker threads, throttled.
    std::function<void(double fraction)> progress;
    // When set, takes each tensor's outcome as soon as it is finished, from worker threads
    // (several at once), and TaskOutcomes::finished stays empty: what lets a check store and
    // persist results as they come (docs/checker.md) instead of holding them all. An exception
    // it throws stops the comparison like any other failure of a worker.
    std::function<void(TaskOutcome&& outcome)> tensorFinished;
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
    Coverage coverage;  // of the reference's tensors, how many the runs both hold

    bool complete() const { return unchecked.empty() && !cancelled; }
};

// The tensors of a comparison, planned from the three runs' catalogs without holding their
// records: each task's records are read, and its tensors assembled, when it is compared
// (loadTask), so that memory holds the tensors being compared, not the whole traces. The plan
// points into the catalogs, which must outlive it.
struct ComparisonPlan {
    const TraceCatalog* distributed = nullptr;
    TrustedRun reference;
    std::optional<TrustedRun> perturbed;
    std::vector<PlannedTask> tasks;  // ordered by key
    // positions[task]: its place in the reference's execution order, the order of a run's
    // results (ties by key).
    std::vector<std::size_t> positions;
    Diagnostics diagnostics;  // reference mapping, pairing and coverage problems
    Coverage coverage;
    std::optional<double> declaredPerturbation;  // its manifest's perturbation.relative

    ComparisonPlan() = default;
    ComparisonPlan(ComparisonPlan&&) = default;
    ComparisonPlan(const ComparisonPlan&) = delete;
    ComparisonPlan& operator=(const ComparisonPlan&) = delete;
};

// Every trusted run's tensor is read and assembled once here, one at a time (outlineTrustedRun).
[[nodiscard]] ComparisonPlan planComparison(const TraceCatalog& distributed,
                                            const TraceCatalog& reference,
                                            const TraceCatalog* perturbed);

// One task with its tensors assembled from their records. Not movable: `task` points into it.
struct LoadedTask {
    AssembledTensor distributed, reference, perturbed;  // perturbed: when the task has one
    Diagnostics problems;  // why a tensor could not be read or assembled
    ComparisonTask task;   // set when every tensor of the task was assembled

    bool ready() const { return task.distributed != nullptr; }

    LoadedTask() = default;
    LoadedTask(const LoadedTask&) = delete;
    LoadedTask& operator=(const LoadedTask&) = delete;
};

// Reads the records of plan.tasks[task] from the three catalogs and assembles its tensors.
[[nodiscard]] std::unique_ptr<LoadedTask> loadTask(const ComparisonPlan& plan, std::size_t task);

// The result of one task, or why there is none.
struct TaskOutcome {
    std::size_t task = 0;
    std::optional<TensorResult> result;
    // Set when `result` is not: the tensor could not be read, assembled or compared.
    Diagnostics failures;
};

// Whether `outcome` is about task `outcome.task` of this plan (an outcome read back from a
// journal or received from another process).
[[nodiscard]] bool outcomeFits(const ComparisonPlan& plan, const TaskOutcome& outcome);

struct TaskOutcomes {
    std::vector<TaskOutcome> finished;  // ordered by task index; empty with tensorFinished
    // Tasks finished whose outcomes are not in `finished` but in the journal of the process
    // that compared them (DistributedComparison.cpp).
    std::vector<std::size_t> journaled;
    std::vector<std::size_t> unchecked;  // selected tasks left unfinished because of `failure`
    QString failure;                     // why a worker stopped; empty when none did
    QString backendName;
    bool cancelled = false;
};

// Compares the tasks `selected` (indices into plan.tasks, ascending) on several threads. A
// worker that throws stops the others; the tensors finished by then are kept.
[[nodiscard]] TaskOutcomes compareTasks(const ComparisonPlan& plan,
                                        const std::vector<std::size_t>& selected,
                                        const ComparisonOptions& options);

// The dtype of a task's result that went to a results store as it came (compareIntoStore),
// so that what is said of every result reaches the run's diagnostics all the same.
struct StoredResultDtype {
    std::size_t task = 0;
    DType dtype = DType::F32;
};

// Puts outcomes of every task (in any order; several processes' outcomes merged) together as
// one run's output, ordered as a single-process run orders it. `unchecked` pairs each task
// left unchecked with the reason; `stored`, the results not among `outcomes` because a store
// took them: they are not in the output, but the warning on tensors computed in another
// dtype than the reference's counts them.
[[nodiscard]] ComparisonOutput assembleComparison(
    const ComparisonPlan& plan, std::vector<TaskOutcome> outcomes,
    const std::vector<std::pair<std::size_t, QString>>& unchecked, const QString& backendName,
    const std::vector<StoredResultDtype>& stored = {});

// The error of a task left unchecked, and its name in ComparisonOutput::unchecked.
[[nodiscard]] Diagnostic uncheckedTask(const ComparisonPlan& plan, std::size_t task,
                                       const QString& reason);

// Compares every logical tensor of `distributed` with `reference` (and `perturbed`, when
// given): assembles shards on global coordinates, streams blocks through the backend on
// several threads, checks replicas bit for bit, and sets each tensor's threshold. Every
// result is held in memory: checks of large traces go through runCheck(), which stores them.
[[nodiscard]] ComparisonOutput compareTraceSets(const TraceSet& distributed,
                                                const TraceSet& reference,
                                                const TraceSet* perturbed,
                                                const ComparisonOptions& options);

}  // namespace ttrace
