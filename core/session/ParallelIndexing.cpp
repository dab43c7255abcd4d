#include "session/ParallelIndexing.h"

#include <QDir>
#include <QStringList>
#include <memory>

#include "store/CacheLocation.h"
#include "store/IndexCache.h"
#include "trace/TraceSet.h"

namespace ttrace {

namespace {

// The shared index cache, or null when this check does not use one (rank 0 says why).
std::unique_ptr<IndexCache> sharedIndexCache(const CacheLocation& cache) {
    if (!cache.usable()) {
        return nullptr;
    }
    QString error;  // rank 0 opens the same cache again and reports why it cannot
    return IndexCache::open(QDir(cache.dir).filePath(QStringLiteral("index.sqlite")), &error);
}

}  // namespace

void indexTogether(const CheckRequest& request, const CacheLocation& cache, ProcessGroup& group) {
    QStringList folders{request.distributed, request.reference};
    if (!request.perturbed.isEmpty()) {
        folders << request.perturbed;
    }
    if (const auto shared = sharedIndexCache(cache)) {
        for (qsizetype i = 0; i < folders.size(); ++i) {
            OpenOptions options;
            options.cancel = request.cancel;
            if (request.progress) {
                options.progress = [&request, i, &folders](double fraction) {
                    request.progress(CheckStage::Indexing, (i + fraction) / folders.size());
                    return true;
                };
            }
            static_cast<void>(
                indexPartIntoCache(folders[i], *shared, group.rank(), group.size(), options));
        }
    }
    // Every process takes part, with or without a cache: rank 0 goes on once all are done
    // (or known to have failed: their files are then indexed by rank 0's open).
    static_cast<void>(group.gatherToRoot(QByteArray(), {}));
}

}  // namespace ttrace
