#include "trace/TraceSet.h"

#include <QDir>
#include <QFileInfo>
#include <functional>
#include <optional>

#include "store/IndexCache.h"
#include "trace/FileStamp.h"
#include "trace/IsolatedHdf5.h"
#include "trace/RankFileIndex.h"
#include "trace/TraceOpeningSteps.h"

namespace ttrace {

namespace {

// Indexes `path` with HDF5 and stores the index when it may be reused.
RankFileIndex indexAndStore(const QString& path, const std::optional<FileStamp>& stamp,
                            IndexCache* cache, bool fillCache, const std::atomic<bool>* cancel) {
    RankFileIndex index = indexRankFileIsolated(path, cancel);
    // A file HDF5 could not open may still be being written: index it again next time.
    if (cache && stamp && index.opened && !index.cancelled && fillCache) {
        // A cache that refuses the entry only costs time on the next open.
        static_cast<void>(cache->store(path, stamp->size, stamp->mtimeNs, index));
    }
    return index;
}

RankFileIndex indexWithCache(const QString& path, IndexCache* cache, bool fillCache,
                             const std::atomic<bool>* cancel) {
    const auto stamp = cache ? fileStamp(path) : std::nullopt;
    if (stamp) {
        if (auto cached = cache->lookup(path, stamp->size, stamp->mtimeNs)) {
            return std::move(*cached);
        }
    }
    return indexAndStore(path, stamp, cache, fillCache, cancel);
}

// Only the part of the index about `key`; the cache hands it out without the file's other
// records.
RankFileIndex indexTensorWithCache(const QString& path, const TensorKey& key, IndexCache* cache,
                                   bool fillCache, const std::atomic<bool>* cancel) {
    const auto stamp = cache ? fileStamp(path) : std::nullopt;
    if (stamp) {
        if (auto cached = cache->lookupTensor(path, stamp->size, stamp->mtimeNs, key)) {
            return std::move(*cached);
        }
    }
    return onlyTensor(indexAndStore(path, stamp, cache, fillCache, cancel), key);
}

// Checks one rank file's index against its manifest entry and adds its records to the set.
void addRankFile(TraceSet& set, const RankEntry& entry, RankFileIndex index) {
    const QString path = rankFilePath(set, entry);
    for (auto& d : index.diagnostics) {
        set.diagnostics.push_back(std::move(d));
    }
    if (!index.opened) {
        return;
    }
    if (auto problem = rankAttributeProblem(path, entry, index)) {
        set.diagnostics.push_back(std::move(*problem));
        return;
    }
    for (auto& record : index.records) {
        std::vector<QString> axes;
        for (const auto& placement : record.placements) {
            axes.push_back(placement.axis);
        }
        auto problems = offMeshPlacements(axes, set.manifest, path, record.dataset, record.key);
        if (!problems.empty()) {
            set.diagnostics.insert(set.diagnostics.end(), problems.begin(), problems.end());
            continue;
        }
        record.rank = entry.rank;
        record.coords = entry.coords;
        record.file = path;
        set.records.push_back(std::move(record));
    }
}

// Indexes every rank file of the manifest with `indexFile`, checks each against its entry and
// adds its records, ordered by (rank, seq); sets `cancelled` instead when cancelled.
void indexAndAdd(TraceSet& set, const OpenOptions& options,
                 const std::function<RankFileIndex(const QString& path)>& indexFile) {
    const auto& ranks = set.manifest.ranks;
    std::vector<std::optional<RankFileIndex>> indexes(ranks.size());
    if (!forEachRankFile(set, options, [&](std::size_t i, const QString& path) {
            indexes[i] = indexFile(path);
        })) {
        set.cancelled = true;
        return;
    }
    // Checked and added in manifest order, so that diagnostics come out the same whatever
    // the number of threads.
    for (std::size_t i = 0; i < ranks.size(); ++i) {
        if (!indexes[i]) {
            set.diagnostics.push_back(unusableRankFile(set, ranks[i]));
            continue;
        }
        addRankFile(set, ranks[i], std::move(*indexes[i]));
    }
    sortByRankAndSeq(set.records);
}

}  // namespace

std::size_t indexPartIntoCache(const QString& folder, IndexCache& cache, int part, int parts,
                               const OpenOptions& options) {
    const QString absolute = QDir(folder).absolutePath();
    const auto manifest = readManifest(absolute).manifest;
    if (!manifest || parts < 1 || part < 0 || part >= parts) {
        return 0;
    }
    std::vector<QString> share;
    for (std::size_t i = static_cast<std::size_t>(part); i < manifest->ranks.size();
         i += static_cast<std::size_t>(parts)) {
        share.push_back(QDir(absolute).absoluteFilePath(manifest->ranks[i].file));
    }
    for (std::size_t i = 0; i < share.size(); ++i) {
        if ((options.cancel && options.cancel->load()) ||
            (options.progress && !options.progress(static_cast<double>(i) / share.size()))) {
            break;
        }
        if (!isRegularFile(share[i])) {
            continue;
        }
        // Only the stamp is compared: decoding the cached records would be wasted here.
        const auto stamp = fileStamp(share[i]);
        if (stamp && !cache.isCurrent(share[i], stamp->size, stamp->mtimeNs)) {
            static_cast<void>(indexAndStore(share[i], stamp, &cache, true, options.cancel));
        }
    }
    return share.size();
}

bool TraceSet::usable() const {
    return !cancelled && !manifest.path.isEmpty() && !records.empty();
}

TraceSet openTraceSet(const QString& folder, const OpenOptions& options) {
    TraceSet set = openManifestOnly(folder);
    if (set.manifest.path.isEmpty()) {
        return set;
    }
    warnAboutUnlistedFiles(set);
    indexAndAdd(set, options, [&options](const QString& path) {
        return indexWithCache(path, options.cache, options.fillCache, options.cancel);
    });
    if (set.records.empty() && !set.cancelled) {
        // Otherwise an unusable set would be refused without a word about why.
        set.diagnostics.push_back(noReadableTensor(set.folder));
    }
    if (options.progress && !set.cancelled) {
        options.progress(1.0);
    }
    return set;
}

TraceSet openTraceSetTensor(const QString& folder, const TensorKey& key,
                            const OpenOptions& options) {
    TraceSet set = openManifestOnly(folder);
    if (set.manifest.path.isEmpty()) {
        return set;
    }
    indexAndAdd(set, options, [&key, &options](const QString& path) {
        return indexTensorWithCache(path, key, options.cache, options.fillCache, options.cancel);
    });
    if (options.progress && !set.cancelled) {
        options.progress(1.0);
    }
    return set;
}

}  // namespace ttrace
