#pragma once

#include <functional>

#include "compare/ComparisonJob.h"
#include "session/ProcessGroup.h"

namespace ttrace {

// Where the processes of a check persist the tensors they finish (OutcomeJournal). Only rank
// 0's matters: it tells the others.
struct OutcomePersistence {
    QString folder;  // outcomeJournalFolder(); empty: nothing is persisted (no cache)
    QString fingerprint;
    // Called on rank 0 when an earlier run of the same check had finished some tensors.
    std::function<void(std::size_t reused, std::size_t total)> resuming;
};

// The comparison step of a check run by several processes: the plan's tasks are split by
// estimated bytes (partitionTasks), each process compares its share, and rank 0 gathers every
// share and assembles them into the output a single process would have produced. A process
// that fails (an exception, a share that cannot be received or decoded) costs only its
// unfinished tensors: they are listed in output.unchecked, with an error each.
//
// Every process appends each tensor it finishes to its own journal file, so that a job killed
// outright loses nothing it finished: in the next run of the same check, rank 0 reads them
// back, tells every process which tensors are done, and only the others are split and
// compared; the output is the one an uninterrupted run gives, whatever the process counts.
//
// Every process of `group` must call it, with plans built from the same traces. On rank 0 it
// returns the whole output; on the others an empty one. `plan` is null on a process that could
// not build one (its whole share is then reported unchecked).
[[nodiscard]] ComparisonOutput compareAcrossProcesses(
    const ComparisonPlan* plan, const TraceSet* distributed, const ComparisonOptions& options,
    const QString& planProblem, const OutcomePersistence& persistence, ProcessGroup& group);

// Test hooks (docs/checker.md). When TTRACE_TEST_FAIL_PROCESS holds a rank, that process
// throws after finishing its first tensor, as a crashing worker would; when
// TTRACE_TEST_KILL_PROCESS does, that process kills itself (SIGKILL) once its journal holds
// two tensors, as the out-of-memory killer would.
inline constexpr const char* kFailProcessVariable = "TTRACE_TEST_FAIL_PROCESS";
inline constexpr const char* kKillProcessVariable = "TTRACE_TEST_KILL_PROCESS";

}  // namespace ttrace
