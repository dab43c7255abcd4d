#include "trace/TraceCatalog.h"

#include <utility>

#include "store/IndexCache.h"
#include "trace/FileStamp.h"
#include "trace/IsolatedHdf5.h"
#include "trace/RankFileIndex.h"
#include "trace/TraceOpeningSteps.h"

namespace ttrace {

namespace {

// The list of tensors as records are counted into it, in any order.
class TensorCount {
public:
    void add(const TensorKey& key, int rank, std::int64_t seq,
             const std::vector<std::int64_t>& globalShape, std::int64_t storedBytes) {
        auto [it, added] = tensors_.try_emplace(key);
        Counted& counted = it->second;
        if (added || std::pair(rank, seq) < std::pair(counted.firstRank, counted.firstSeq)) {
            counted.tensor.globalShape = globalShape;
            counted.firstRank = rank;
            counted.firstSeq = seq;
        }
        ++counted.tensor.records;
        counted.tensor.storedBytes += storedBytes;
    }

    std::vector<CatalogTensor> take() {
        std::vector<CatalogTensor> tensors;
        tensors.reserve(tensors_.size());
        for (auto& [key, counted] : tensors_) {
            counted.tensor.key = key;
            tensors.push_back(std::move(counted.tensor));
        }
        return tensors;
    }

private:
    struct Counted {
        CatalogTensor tensor;
        int firstRank = 0;
        std::int64_t firstSeq = 0;
    };
    std::map<TensorKey, Counted> tensors_;
};

std::vector<QString> placementAxes(const TensorRecord& record) {
    std::vector<QString> axes;
    for (const auto& placement : record.placements) {
        axes.push_back(placement.axis);
    }
    return axes;
}

// One rank file as opening found it: its own attributes and problems, and its records unless
// they are in the cache.
struct OpenedFile {
    RankFileIndex index;
    bool cached = false;
};

OpenedFile openRankFile(const QString& path, IndexCache* cache, bool fillCache,
                        const std::atomic<bool>* cancel) {
    const auto stamp = cache ? fileStamp(path) : std::nullopt;
    if (!stamp) {
        return {indexRankFileIsolated(path, cancel), false};
    }
    if (auto cached = cache->lookupFile(path, stamp->size, stamp->mtimeNs)) {
        return {std::move(*cached), true};
    }
    RankFileIndex index = indexRankFileIsolated(path, cancel);
    // A file HDF5 could not open may still be being written: indexed again next time.
    if (index.opened && !index.cancelled && fillCache &&
        cache->store(path, stamp->size, stamp->mtimeNs, index)) {
        // Its memory too (clear() and `= {}` keep it): every rank file's entry is held until
        // all are indexed.
        std::vector<TensorRecord>().swap(index.records);
        return {std::move(index), true};
    }
    return {std::move(index), false};
}

}  // namespace

TraceCatalog TraceCatalog::open(const QString& folder, const OpenOptions& options) {
    IndexCache* cache = options.cache;
    TraceCatalog catalog;
    catalog.cache_ = cache;
    TraceSet& head = catalog.head_;
    head = openManifestOnly(folder);
    if (head.manifest.path.isEmpty()) {
        return catalog;
    }
    warnAboutUnlistedFiles(head);
    const auto& ranks = head.manifest.ranks;
    std::vector<std::optional<OpenedFile>> files(ranks.size());
    if (!forEachRankFile(head, options, [&](std::size_t i, const QString& path) {
            files[i] = openRankFile(path, cache, options.fillCache, options.cancel);
        })) {
        head.cancelled = true;
        return catalog;
    }

    // The cached files' records, read once: counted, or set aside with their problems, which
    // are reported below with the other problems of their file.
    TensorCount count;
    std::vector<Diagnostics> offMesh(ranks.size());
    for (std::size_t i = 0; i < ranks.size(); ++i) {
        const auto& file = files[i];
        if (file && file->cached && file->index.opened &&
            !rankAttributeProblem(rankFilePath(head, ranks[i]), ranks[i], file->index)) {
            catalog.cachedFiles_.insert(rankFilePath(head, ranks[i]), i);
        }
    }
    if (!catalog.cachedFiles_.isEmpty()) {
        const bool read =
            cache->forEachRecordUnder(head.folder, [&](const IndexCache::RecordOutline& record) {
                const auto it = catalog.cachedFiles_.constFind(record.path);
                if (it == catalog.cachedFiles_.constEnd()) {
                    return;  // a file of the folder that the manifest does not list
                }
                auto problems = offMeshPlacements(record.placementAxes, head.manifest, record.path,
                                                  record.dataset, record.key);
                if (!problems.empty()) {
                    auto& into = offMesh[*it];
                    into.insert(into.end(), problems.begin(), problems.end());
                    return;
                }
                count.add(record.key, ranks[*it].rank, record.seq, record.globalShape,
                          record.storedBytes);
                ++catalog.datasets_;
            });
        if (!read) {
            Diagnostic d;
            d.severity = Severity::Error;
            d.file = head.folder;
            d.message = QStringLiteral(
                "the index cache could not be read back; run again, or remove the cache "
                "directory's index.sqlite");
            head.diagnostics.push_back(std::move(d));
            catalog.datasets_ = 0;
            return catalog;
        }
    }

    // Every file's problems in manifest order, as openTraceSet reports them; the records of
    // files not in the cache are kept.
    for (std::size_t i = 0; i < ranks.size(); ++i) {
        auto& file = files[i];
        if (!file) {
            head.diagnostics.push_back(unusableRankFile(head, ranks[i]));
            continue;
        }
        RankFileIndex& index = file->index;
        head.diagnostics.insert(head.diagnostics.end(), index.diagnostics.begin(),
                                index.diagnostics.end());
        if (!index.opened) {
            continue;
        }
        const QString path = rankFilePath(head, ranks[i]);
        if (auto problem = rankAttributeProblem(path, ranks[i], index)) {
            head.diagnostics.push_back(std::move(*problem));
            continue;
        }
        head.diagnostics.insert(head.diagnostics.end(), offMesh[i].begin(), offMesh[i].end());
        for (auto& record : index.records) {
            auto problems = offMeshPlacements(placementAxes(record), head.manifest, path,
                                              record.dataset, record.key);
            if (!problems.empty()) {
                head.diagnostics.insert(head.diagnostics.end(), problems.begin(), problems.end());
                continue;
            }
            record.rank = ranks[i].rank;
            record.coords = ranks[i].coords;
            record.file = path;
            count.add(record.key, record.rank, record.seq, record.globalShape,
                      record.storedBytes());
            ++catalog.datasets_;
            catalog.inMemory_[record.key].push_back(std::move(record));
        }
    }
    catalog.tensors_ = count.take();
    if (catalog.datasets_ == 0) {
        head.diagnostics.push_back(noReadableTensor(head.folder));
    }
    if (options.progress) {
        options.progress(1.0);
    }
    return catalog;
}

TraceCatalog TraceCatalog::of(TraceSet set) {
    TraceCatalog catalog;
    TensorCount count;
    for (auto& record : set.records) {
        count.add(record.key, record.rank, record.seq, record.globalShape, record.storedBytes());
        ++catalog.datasets_;
        catalog.inMemory_[record.key].push_back(std::move(record));
    }
    set.records.clear();
    catalog.head_ = std::move(set);
    catalog.tensors_ = count.take();
    return catalog;
}

bool TraceCatalog::usable() const {
    return !head_.cancelled && !head_.manifest.path.isEmpty() && datasets_ > 0;
}

std::optional<std::vector<TensorRecord>> TraceCatalog::records(const TensorKey& key) const {
    std::vector<TensorRecord> records;
    if (!cachedFiles_.isEmpty()) {
        auto cached = cache_->recordsUnder(head_.folder, key);
        if (!cached) {
            return std::nullopt;
        }
        const auto& ranks = head_.manifest.ranks;
        for (auto& record : *cached) {
            const auto it = cachedFiles_.constFind(record.file);
            if (it == cachedFiles_.constEnd() ||
                !offMeshPlacements(placementAxes(record), head_.manifest, record.file,
                                   record.dataset, record.key)
                     .empty()) {
                continue;  // not part of the set, or reported when it was opened
            }
            record.rank = ranks[*it].rank;
            record.coords = ranks[*it].coords;
            records.push_back(std::move(record));
        }
    }
    if (const auto it = inMemory_.find(key); it != inMemory_.end()) {
        records.insert(records.end(), it->second.begin(), it->second.end());
    }
    sortByRankAndSeq(records);
    return records;
}

}  // namespace ttrace
