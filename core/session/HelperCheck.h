#pragma once

#include "session/CheckSession.h"
#include "store/CacheLocation.h"

namespace ttrace {

// What the processes other than rank 0 do: wait for rank 0 to open the traces and decide
// whether there is anything to compare, then open the traces from the index cache (never
// writing to it: rank 0 is its one writer) and compare their share.
[[nodiscard]] CheckOutcome runAsHelper(const CheckRequest& request, const CacheLocation& cache,
                                       ProcessGroup& group);

}  // namespace ttrace
