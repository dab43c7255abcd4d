#pragma once

#include <QHash>
#include <QString>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "trace/TraceSet.h"

namespace ttrace {

class IndexCache;

// One logical tensor of a trace set as its records list it, without the records.
struct CatalogTensor {
    TensorKey key;
    std::vector<std::int64_t> globalShape;  // as its first record by (rank, seq) says
    std::int64_t records = 0;               // datasets holding a piece of it
    std::int64_t storedBytes = 0;           // their data
};

// A trace folder opened read-only whose index stays in the index cache: the catalog holds the
// manifest, every problem found opening the folder and the list of its tensors, and reads the
// records of one tensor from the cache when asked for them. A check of 10,000 ranks x 1,000
// tensors so never holds the ten million records of its trace at once (docs/checker.md).
// Rank files the cache does not hold (no cache, one that refused the entry, a process that
// may only read it) are indexed into memory instead.
class TraceCatalog {
public:
    // Opens `folder` as openTraceSet() does, with the same problems in the same words and
    // order. Rank files not in options.cache (or changed since) are indexed into it, or, when
    // there is no cache or options.fillCache is false, into memory.
    [[nodiscard]] static TraceCatalog open(const QString& folder, const OpenOptions& options = {});
    // The catalog of a trace set already in memory.
    [[nodiscard]] static TraceCatalog of(TraceSet set);

    // The folder, manifest and problems as a trace set without records.
    const TraceSet& head() const { return head_; }
    const QString& folder() const { return head_.folder; }
    const Manifest& manifest() const { return head_.manifest; }
    const Diagnostics& diagnostics() const { return head_.diagnostics; }
    bool cancelled() const { return head_.cancelled; }
    // False when the manifest could not be read or no rank file could be indexed.
    bool usable() const;
    // Datasets indexed: openTraceSet()'s records.size().
    std::int64_t datasetCount() const { return datasets_; }
    // Every tensor, ordered by key.
    const std::vector<CatalogTensor>& tensors() const { return tensors_; }
    // The records of the tensor `key` as openTraceSet() holds them: rank, coordinates and
    // file set, ordered by rank and sequence number. Nullopt when the cache cannot be read.
    [[nodiscard]] std::optional<std::vector<TensorRecord>> records(const TensorKey& key) const;

private:
    TraceSet head_;  // folder, manifest, diagnostics; no records
    IndexCache* cache_ = nullptr;
    // Manifest entry of each rank file whose records are read from the cache.
    QHash<QString, std::size_t> cachedFiles_;
    // Records of the other rank files, by tensor.
    std::map<TensorKey, std::vector<TensorRecord>> inMemory_;
    std::vector<CatalogTensor> tensors_;
    std::int64_t datasets_ = 0;
};

}  // namespace ttrace
