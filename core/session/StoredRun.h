#pragma once

#include "report/CheckReport.h"
#include "session/CheckSession.h"
#include "store/CacheLocation.h"
#include "store/ResultsStore.h"

namespace ttrace {

// A check whose traces did not change since their results were stored is shown from the
// results store alone, without indexing them (minutes and gigabytes at 10,000 ranks).

// Whether the results store holds this check's run with its opening, so that it is shown
// without indexing (what showStoredRun() then does). Creates nothing.
[[nodiscard]] bool runIsStored(const CheckRequest& request, const CacheLocation& cache);

// The stored run of these traces, when none of their files changed, put into `report`. False
// when there is none, or a manifest is unreadable or in the wrong slot: the full open then
// says why.
[[nodiscard]] bool showStoredRun(const CheckRequest& request, const QString& cacheDir,
                                 ResultsStore& store, CheckReport& report);

// Removes the journals of a check whose results are stored: left behind when a check was
// killed between storing its results and removing them, and of no use once they are there.
void forgetUnfinished(const QString& cacheDir, const QString& fingerprint);

}  // namespace ttrace
