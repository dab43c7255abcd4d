#pragma once

#include "compare/ComparisonJob.h"
#include "session/ProcessGroup.h"

namespace ttrace {

// The comparison step of a check run by several processes: the plan's tasks are split by
// estimated bytes (partitionTasks), each process compares its share, and rank 0 gathers every
// share and assembles them into the output a single process would have produced. A process
// that fails (an exception, a share that cannot be received or decoded) costs only its
// unfinished tensors: they are listed in output.unchecked, with an error each.
//
// Every process of `group` must call it, with plans built from the same traces. On rank 0 it
// returns the whole output; on the others an empty one. `plan` is null on a process that could
// not build one (its whole share is then reported unchecked).
[[nodiscard]] ComparisonOutput compareAcrossProcesses(const ComparisonPlan* plan,
                                                      const TraceSet* distributed,
                                                      const ComparisonOptions& options,
                                                      const QString& planProblem,
                                                      ProcessGroup& group);

// Test hook (docs/checker.md): when the environment variable TTRACE_TEST_FAIL_PROCESS holds a
// rank, that process throws after finishing its first tensor, as a crashing worker would.
inline constexpr const char* kFailProcessVariable = "TTRACE_TEST_FAIL_PROCESS";

}  // namespace ttrace
