#pragma once

#include "compare/ComparisonJob.h"
#include "session/CheckSession.h"

namespace ttrace {

// Worker threads of one process of a check: as asked, else the machine's cores shared by the
// processes of `group` running on it (null: this process alone).
[[nodiscard]] int threadsPerProcess(const CheckRequest& request, const ProcessGroup* group);

// How every process of a check compares its share: the request's thresholds, block size,
// backend and cancel flag, threadsPerProcess() threads, without progress (rank 0 adds it).
[[nodiscard]] ComparisonOptions comparisonOptions(const CheckRequest& request,
                                                  const ThresholdConfig& thresholds,
                                                  const ProcessGroup* group);

}  // namespace ttrace
