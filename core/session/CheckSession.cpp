#include "session/CheckSession.h"

#include "session/CacheFailures.h"
#include "session/HelperCheck.h"
#include "session/ParallelIndexing.h"
#include "session/RootCheck.h"
#include "session/StoredRun.h"
#include "store/CacheLocation.h"

namespace ttrace {

QString checkStageName(CheckStage stage) {
    switch (stage) {
        case CheckStage::Indexing:
            return QStringLiteral("indexing");
        case CheckStage::Waiting:
            return QStringLiteral("waiting");
        case CheckStage::Comparing:
            return QStringLiteral("comparing");
        case CheckStage::Localizing:
            return QStringLiteral("localizing");
    }
    return {};
}

CheckOutcome runCheck(const CheckRequest& request) {
    // Where this check's index and results go, decided here once for every step and process.
    const CacheLocation cache =
        resolveCacheLocation(request.cacheDir, request.useCache,
                             {request.distributed, request.reference, request.perturbed});
    ProcessGroup* group =
        request.processes && request.processes->size() > 1 ? request.processes : nullptr;
    if (group) {
        // A stored run needs no index: rank 0 says whether there is one before anybody
        // indexes (after a changed file, the whole job indexes it together).
        QString error;
        const auto stored =
            group->broadcast(group->rank() == 0 && runIsStored(request, cache), &error);
        if (!stored || *stored == 0) {
            indexTogether(request, cache, *group);
        }
    }
    if (group && group->rank() != 0) {
        return runAsHelper(request, cache, *group);
    }
    // The others wait to hear whether there is anything to compare: every way out of rank 0's
    // path tells them, once.
    bool helpersTold = false;
    const auto tellHelpers = [&](bool compare) {
        if (!group || helpersTold) {
            return true;
        }
        helpersTold = true;
        QString error;
        return group->broadcast(compare ? 1 : 0, &error).has_value();
    };
    CacheFailures cacheFailures;
    CheckOutcome outcome = runAsRoot(request, cache, group, tellHelpers, cacheFailures);
    static_cast<void>(tellHelpers(false));  // a failed call has nobody left to tell
    if (auto warning = cacheFailures.warning(cache)) {
        outcome.report.diagnostics.push_back(std::move(*warning));
    }
    return outcome;
}

}  // namespace ttrace
