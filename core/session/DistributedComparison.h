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

// Where rank 0 puts every outcome of the check as it gets it: from its own workers as they
// finish (several threads at once), from an earlier run's journals, and from the other
// processes. Results are never gathered in one place: the check stores them as they come.
using OutcomeSink = std::function<void(TaskOutcome&& outcome)>;

// What the comparison of a check ends with on rank 0, besides the outcomes it gave the sink.
struct ComparisonEnd {
    // Tasks no outcome came for, ascending, each with why (a process failed or stopped).
    std::vector<std::pair<std::size_t, QString>> unchecked;
    Diagnostics diagnostics;  // about the check itself: a journal that could not be written
    QString backendName;
    bool cancelled = false;
};

// The comparison step of a check run by several processes: the plan's tasks are split by
// estimated bytes (partitionTasks), each process compares its share, and every outcome reaches
// rank 0's `sink` exactly once. A process that fails (an exception, a share that cannot be
// received or decoded) costs only its unfinished tensors: they are listed in `unchecked`.
//
// Every process appends each tensor it finishes to its own journal file, so that a job killed
// outright loses nothing it finished: in the next run of the same check, rank 0 reads them
// back, tells every process which tensors are done, and only the others are split and
// compared; the outcomes are those an uninterrupted run gives, whatever the process counts.
// The journals are also how the other processes' results reach rank 0: rank 0 reads each
// process's journal one record at a time when the cache directory is shared (what keeps rank
// 0's memory bounded); what it cannot read there is sent by message (docs/checker.md).
//
// Every process of `group` must call it, with plans built from the same traces. `plan` is
// null on a process that could not build one (its whole share is then reported unchecked);
// `sink` is only called on rank 0.
[[nodiscard]] ComparisonEnd compareAcrossProcesses(const ComparisonPlan* plan,
                                                   const ComparisonOptions& options,
                                                   const QString& planProblem,
                                                   const OutcomePersistence& persistence,
                                                   ProcessGroup& group, const OutcomeSink& sink);

// Test hooks (docs/checker.md). When TTRACE_TEST_FAIL_PROCESS holds a rank, that process
// throws after finishing its first tensor, as a crashing worker would; when
// TTRACE_TEST_KILL_PROCESS does, that process kills itself (SIGKILL) once its journal holds
// two tensors, as the out-of-memory killer would.
// When TTRACE_TEST_UNREAD_JOURNALS is set (not empty), rank 0 leaves the other processes'
// journals unread, as when the cache directory is local to each node, and asks them for
// their results instead.
inline constexpr const char* kFailProcessVariable = "TTRACE_TEST_FAIL_PROCESS";
inline constexpr const char* kKillProcessVariable = "TTRACE_TEST_KILL_PROCESS";
inline constexpr const char* kUnreadJournalsVariable = "TTRACE_TEST_UNREAD_JOURNALS";

}  // namespace ttrace
