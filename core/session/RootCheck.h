#pragma once

#include <functional>

#include "session/CacheFailures.h"
#include "session/CheckSession.h"
#include "store/CacheLocation.h"

namespace ttrace {

// Rank 0's check, or the only process's: the whole check as a sequence of named stages
// (RootCheck.cpp): open the cache, show a stored run, open the traces, refuse what cannot be
// compared, hold the run, reuse its stored results, compare, conclude. `tellHelpers(true)`
// tells the other processes of `group` (null: none) that there is something to compare;
// what the cache could not keep is added to `cacheFailures`.
[[nodiscard]] CheckOutcome runAsRoot(const CheckRequest& request, const CacheLocation& cache,
                                     ProcessGroup* group,
                                     const std::function<bool(bool compare)>& tellHelpers,
                                     CacheFailures& cacheFailures);

}  // namespace ttrace
