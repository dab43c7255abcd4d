#pragma once

#include <QString>
#include <atomic>
#include <cstddef>
#include <functional>
#include <vector>

#include "trace/Diagnostic.h"
#include "trace/Manifest.h"
#include "trace/TensorRecord.h"

namespace ttrace {

class IndexCache;

// Reports progress in [0, 1]; returns false to cancel.
using ProgressFn = std::function<bool(double fraction)>;

struct OpenOptions {
    IndexCache* cache = nullptr;  // reuses the index of unchanged rank files when set
    // False: only look entries up, never write them (the processes of a distributed check
    // other than rank 0, which is the cache's one writer).
    bool fillCache = true;
    // Rank files indexed at once; 0: one per core when HDF5 runs in worker processes
    // (IsolatedHdf5.h), else one: in one process HDF5 serializes its calls under a global
    // lock, and handing that lock between threads made indexing 4-5x slower
    // (docs/performance.md).
    int threads = 0;
    ProgressFn progress;
    const std::atomic<bool>* cancel = nullptr;
};

// A trace folder, opened read-only: its manifest, the index of every captured dataset, and
// every problem found while indexing and validating it.
struct TraceSet {
    QString folder;  // absolute path
    Manifest manifest;
    std::vector<TensorRecord> records;  // ordered by (rank, seq)
    Diagnostics diagnostics;
    bool cancelled = false;

    // False when the manifest could not be read or no rank file could be indexed.
    bool usable() const;
};

// Opens a trace folder read-only and indexes it. Bad input never throws or crashes: it turns
// into diagnostics (missing or extra ranks, manifest/file mismatch, corrupt or truncated
// HDF5, unreadable or inconsistent attributes, dtype/storage mismatch).
[[nodiscard]] TraceSet openTraceSet(const QString& folder, const OpenOptions& options = {});

// The trace folder as openTraceSet() gives it, but holding only the records of the tensor `key`
// (same fields, same order) and the diagnostics about that tensor or about whole files
// (manifest, missing, unreadable or mislabelled rank files; concernsTensor(), RankFileIndex.h).
// Rank files whose index is cached and unchanged are not opened and their other records not
// read; the others are indexed whole (and cached when `options.fillCache`). Rank files that
// the manifest does not list are not looked for.
[[nodiscard]] TraceSet openTraceSetTensor(const QString& folder, const TensorKey& key,
                                          const OpenOptions& options = {});

// Indexes into `cache` the rank files of `folder` whose position in the manifest is `part`
// modulo `parts` (those already cached and unchanged are skipped). The processes of a
// distributed check each take one part, so that together they build the index in parallel:
// HDF5's global lock serializes threads, not processes. Only `options.cancel` and
// `options.progress` (over this part's files) are used. Returns the number of files this
// part holds; 0 also when the manifest cannot be read (openTraceSet then says why).
std::size_t indexPartIntoCache(const QString& folder, IndexCache& cache, int part, int parts,
                               const OpenOptions& options = {});

}  // namespace ttrace
