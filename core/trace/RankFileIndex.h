#pragma once

#include <QString>
#include <atomic>
#include <optional>
#include <vector>

#include "trace/Diagnostic.h"
#include "trace/TensorRecord.h"

namespace ttrace {

class Hdf5Trail;

// What one rank file says about itself, independent of the manifest: this is what the index
// cache stores, diagnostics included, so that a cached re-open reports the same problems.
struct RankFileIndex {
    bool opened = false;                // false when HDF5 could not open the file at all
    std::optional<int> fileRank;        // file attribute `rank`
    QString formatVersion;              // file attribute `format_version`
    std::vector<TensorRecord> records;  // ordered by seq; rank = fileRank (or -1), no coords
    Diagnostics diagnostics;
    bool cancelled = false;  // stopped partway when asked: partial, never cached
};

// Whether `d` may explain why the tensor `key` of its file is missing or wrong: it is about
// that tensor, or about no known tensor (the whole file, or a dataset whose key could not be
// read). IndexCache::lookupTensor applies the same rule in SQL.
bool concernsTensor(const Diagnostic& d, const TensorKey& key);

// The part of `index` about the tensor `key`: its records and the diagnostics concernsTensor()
// keeps, in their order; the file's own attributes unchanged.
[[nodiscard]] RankFileIndex onlyTensor(RankFileIndex index, const TensorKey& key);

// Opens `path` read-only in this process and indexes every dataset under /tensors, marking
// each step on `trail`. Never throws; a dataset whose attributes are missing or inconsistent
// becomes an error and is left out. A corrupt file can crash libhdf5 here: checks index
// through indexRankFileIsolated() (IsolatedHdf5.h), which runs this in a worker process.
[[nodiscard]] RankFileIndex indexRankFile(const QString& path,
                                          const std::atomic<bool>* cancel = nullptr,
                                          Hdf5Trail* trail = nullptr);

}  // namespace ttrace
