#include "session/HelperCheck.h"

#include <QDir>

#include "session/CheckOptions.h"
#include "session/DistributedComparison.h"
#include "session/StoredComparison.h"
#include "store/IndexCache.h"

namespace ttrace {

CheckOutcome runAsHelper(const CheckRequest& request, const CacheLocation& cache,
                         ProcessGroup& group) {
    CheckOutcome outcome;
    outcome.root = false;
    QString error;
    const auto compare = group.broadcast(0, &error);
    if (!compare || *compare == 0) {
        return outcome;
    }
    const ComparisonOptions options = comparisonOptions(
        request,
        request.configPath.isEmpty() ? ThresholdConfig()
                                     : readThresholdConfig(request.configPath).config,
        &group);

    std::unique_ptr<IndexCache> indexCache;
    if (cache.usable()) {
        indexCache =
            IndexCache::open(QDir(cache.dir).filePath(QStringLiteral("index.sqlite")), &error);
    }
    OpenOptions open;
    open.cache = indexCache.get();
    open.fillCache = false;
    open.cancel = request.cancel;
    const TraceCatalog distributed = TraceCatalog::open(request.distributed, open);
    const TraceCatalog reference = TraceCatalog::open(request.reference, open);
    std::optional<TraceCatalog> perturbed;
    if (!request.perturbed.isEmpty()) {
        perturbed = TraceCatalog::open(request.perturbed, open);
    }
    const TraceCatalog* perturbedCatalog = perturbed ? &*perturbed : nullptr;
    QString problem;
    const auto cannotOpen = [&problem](const QString& folder, const Diagnostics& diagnostics) {
        if (problem.isEmpty()) {
            problem = QStringLiteral("cannot open the trace set %1 that rank 0 opened: %2")
                          .arg(folder, diagnostics.empty() ? QStringLiteral("cancelled")
                                                           : diagnostics.front().toString());
        }
    };
    for (const TraceCatalog* catalog : {&distributed, &reference, perturbedCatalog}) {
        if (catalog && !catalog->usable()) {
            cannotOpen(catalog->folder(), catalog->diagnostics());
        }
    }
    if (!problem.isEmpty()) {
        // Takes part in the comparison's collective steps with nothing to compare.
        const auto end = compareAcrossProcesses(nullptr, options, problem, OutcomePersistence{},
                                                group, OutcomeSink());
        outcome.cancelled = end.cancelled;
        return outcome;
    }
    const ComparisonPlan plan = planComparison(distributed, reference, perturbedCatalog);
    const auto compared =
        compareIntoStore(plan, options, OutcomePersistence{}, group, ResultsDestination{});
    outcome.cancelled = compared.cancelled;
    return outcome;
}

}  // namespace ttrace
