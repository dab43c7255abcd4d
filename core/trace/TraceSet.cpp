#include "trace/TraceSet.h"

#include <hdf5.h>

#include <QDir>
#include <QFileInfo>
#include <algorithm>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "store/IndexCache.h"
#include "trace/FileStamp.h"
#include "trace/RankFileIndex.h"

namespace ttrace {

namespace {

Diagnostic makeDiagnostic(Severity severity, const QString& file, const QString& message) {
    Diagnostic d;
    d.severity = severity;
    d.file = file;
    d.message = message;
    return d;
}

// Indexes `path` with HDF5 and stores the index when it may be reused.
RankFileIndex indexAndStore(const QString& path, const std::optional<FileStamp>& stamp,
                            IndexCache* cache, bool fillCache) {
    RankFileIndex index = indexRankFile(path);
    // A file HDF5 could not open may still be being written: index it again next time.
    if (cache && stamp && index.opened && fillCache) {
        // A cache that refuses the entry only costs time on the next open.
        static_cast<void>(cache->store(path, stamp->size, stamp->mtimeNs, index));
    }
    return index;
}

RankFileIndex indexWithCache(const QString& path, IndexCache* cache, bool fillCache) {
    const auto stamp = cache ? fileStamp(path) : std::nullopt;
    if (stamp) {
        if (auto cached = cache->lookup(path, stamp->size, stamp->mtimeNs)) {
            return std::move(*cached);
        }
    }
    return indexAndStore(path, stamp, cache, fillCache);
}

// Only the part of the index about `key`; the cache hands it out without the file's other
// records.
RankFileIndex indexTensorWithCache(const QString& path, const TensorKey& key, IndexCache* cache,
                                   bool fillCache) {
    const auto stamp = cache ? fileStamp(path) : std::nullopt;
    if (stamp) {
        if (auto cached = cache->lookupTensor(path, stamp->size, stamp->mtimeNs, key)) {
            return std::move(*cached);
        }
    }
    return onlyTensor(indexAndStore(path, stamp, cache, fillCache), key);
}

// Indexes one rank file (its absolute path).
using IndexFn = std::function<RankFileIndex(const QString& path)>;

// Indexes every rank file of the manifest on several threads into indexes[i] (nullopt for a
// missing file); false when cancelled. Progress is reported before each file, by whichever
// thread takes it, one call at a time and in increasing order.
bool indexRankFiles(const TraceSet& set, std::vector<std::optional<RankFileIndex>>& indexes,
                    const OpenOptions& options, const IndexFn& indexFile) {
    const auto& ranks = set.manifest.ranks;
    std::mutex progressMutex;
    std::size_t next = 0;
    std::size_t done = 0;
    bool stop = false;
    // The next file to index, or nullopt when there is none or the open was cancelled.
    const auto take = [&]() -> std::optional<std::size_t> {
        const std::lock_guard lock(progressMutex);
        if (stop || next >= ranks.size()) {
            return std::nullopt;
        }
        if ((options.cancel && options.cancel->load()) ||
            (options.progress && !options.progress(static_cast<double>(done) / ranks.size()))) {
            stop = true;
            return std::nullopt;
        }
        return next++;
    };
    const auto work = [&] {
        while (const auto i = take()) {
            const QString path = QDir(set.folder).absoluteFilePath(ranks[*i].file);
            if (QFileInfo(path).isFile()) {
                indexes[*i] = indexFile(path);
            }
            const std::lock_guard lock(progressMutex);
            ++done;
        }
    };
    std::size_t threads = options.threads > 0 ? static_cast<std::size_t>(options.threads)
                                              : std::thread::hardware_concurrency();
    // A library built without thread safety gets one worker.
    hbool_t threadSafe = false;
    if (H5is_library_threadsafe(&threadSafe) < 0 || !threadSafe) {
        threads = 1;
    }
    threads = std::clamp<std::size_t>(threads, 1, std::max<std::size_t>(1, ranks.size()));
    std::vector<std::thread> workers;
    for (std::size_t t = 1; t < threads; ++t) {
        workers.emplace_back(work);
    }
    work();
    for (auto& worker : workers) {
        worker.join();
    }
    return !stop;
}

// Checks one rank file's index against its manifest entry and adds its records to the set.
void addRankFile(TraceSet& set, const RankEntry& entry, RankFileIndex index) {
    const QString path = QDir(set.folder).absoluteFilePath(entry.file);
    for (auto& d : index.diagnostics) {
        set.diagnostics.push_back(std::move(d));
    }
    if (!index.opened) {
        return;
    }
    if (index.fileRank && *index.fileRank != entry.rank) {
        set.diagnostics.push_back(makeDiagnostic(
            Severity::Error, path,
            QStringLiteral("file attribute 'rank' is %1 but the manifest lists this file as "
                           "rank %2; its tensors are ignored")
                .arg(*index.fileRank)
                .arg(entry.rank)));
        return;
    }
    const auto& axes = set.manifest.meshAxes;
    for (auto& record : index.records) {
        bool ok = true;
        for (const auto& placement : record.placements) {
            if (std::find(axes.begin(), axes.end(), placement.axis) == axes.end()) {
                Diagnostic d = makeDiagnostic(
                    Severity::Error, path,
                    QStringLiteral("attribute 'placements' names the axis '%1', which is not an "
                                   "axis of the manifest's mesh")
                        .arg(placement.axis));
                d.dataset = record.dataset;
                d.tensor = record.key.toString();
                set.diagnostics.push_back(std::move(d));
                ok = false;
            }
        }
        if (!ok) {
            continue;
        }
        record.rank = entry.rank;
        record.coords = entry.coords;
        record.file = path;
        set.records.push_back(std::move(record));
    }
}

void warnAboutExtraFiles(TraceSet& set) {
    for (const auto& file : unlistedRankFiles(set.folder, set.manifest)) {
        set.diagnostics.push_back(
            makeDiagnostic(Severity::Warning, QDir(set.folder).absoluteFilePath(file),
                           QStringLiteral("is not listed in manifest.json and is ignored")));
    }
}

// The folder and its manifest; manifest.path stays empty when either is unusable (the
// diagnostics say why).
TraceSet openManifest(const QString& folder) {
    TraceSet set;
    set.folder = QDir(folder).absolutePath();
    if (!QFileInfo(set.folder).isDir()) {
        set.diagnostics.push_back(
            makeDiagnostic(Severity::Error, set.folder, QStringLiteral("is not a folder")));
        return set;
    }
    auto manifestResult = readManifest(set.folder);
    set.diagnostics = std::move(manifestResult.diagnostics);
    if (manifestResult.manifest) {
        set.manifest = std::move(*manifestResult.manifest);
    }
    return set;
}

// Indexes every rank file of the manifest with `indexFile`, checks each against its entry and
// adds its records, ordered by (rank, seq); sets `cancelled` instead when cancelled.
void indexAndAdd(TraceSet& set, const OpenOptions& options, const IndexFn& indexFile) {
    const auto& ranks = set.manifest.ranks;
    std::vector<std::optional<RankFileIndex>> indexes(ranks.size());
    if (!indexRankFiles(set, indexes, options, indexFile)) {
        set.cancelled = true;
        return;
    }
    // Checked and added in manifest order, so that diagnostics come out the same whatever
    // the number of threads.
    for (std::size_t i = 0; i < ranks.size(); ++i) {
        const auto& entry = ranks[i];
        if (!indexes[i]) {
            set.diagnostics.push_back(makeDiagnostic(
                Severity::Error, QDir(set.folder).absoluteFilePath(entry.file),
                QStringLiteral("rank %1: file %2 is missing").arg(entry.rank).arg(entry.file)));
            continue;
        }
        addRankFile(set, entry, std::move(*indexes[i]));
    }
    std::stable_sort(set.records.begin(), set.records.end(),
                     [](const TensorRecord& a, const TensorRecord& b) {
                         return a.rank != b.rank ? a.rank < b.rank : a.seq < b.seq;
                     });
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
        if (!QFileInfo(share[i]).isFile()) {
            continue;
        }
        // Only the stamp is compared: decoding the cached records would be wasted here.
        const auto stamp = fileStamp(share[i]);
        if (stamp && !cache.isCurrent(share[i], stamp->size, stamp->mtimeNs)) {
            static_cast<void>(indexAndStore(share[i], stamp, &cache, true));
        }
    }
    return share.size();
}

bool TraceSet::usable() const {
    return !cancelled && !manifest.path.isEmpty() && !records.empty();
}

TraceSet openTraceSet(const QString& folder, const OpenOptions& options) {
    TraceSet set = openManifest(folder);
    if (set.manifest.path.isEmpty()) {
        return set;
    }
    warnAboutExtraFiles(set);
    indexAndAdd(set, options, [&options](const QString& path) {
        return indexWithCache(path, options.cache, options.fillCache);
    });
    if (set.records.empty() && !set.cancelled) {
        // Otherwise an unusable set would be refused without a word about why.
        set.diagnostics.push_back(makeDiagnostic(
            Severity::Error, set.folder,
            QStringLiteral("the trace set holds no readable tensor (no rank file could be "
                           "indexed, or their /tensors groups are empty)")));
    }
    if (options.progress && !set.cancelled) {
        options.progress(1.0);
    }
    return set;
}

TraceSet openTraceSetTensor(const QString& folder, const TensorKey& key,
                            const OpenOptions& options) {
    TraceSet set = openManifest(folder);
    if (set.manifest.path.isEmpty()) {
        return set;
    }
    indexAndAdd(set, options, [&key, &options](const QString& path) {
        return indexTensorWithCache(path, key, options.cache, options.fillCache);
    });
    if (options.progress && !set.cancelled) {
        options.progress(1.0);
    }
    return set;
}

}  // namespace ttrace
