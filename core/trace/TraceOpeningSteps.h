#pragma once

#include <QString>
#include <functional>
#include <optional>
#include <vector>

#include "trace/RankFileIndex.h"
#include "trace/TraceSet.h"

namespace ttrace {

// The steps of opening a trace folder that openTraceSet (every record in memory) and
// TraceCatalog::open (records left in the index cache) share, so that both report the same
// problems in the same words.

// The folder and its manifest, no records; manifest.path stays empty when either is unusable
// (the diagnostics say why).
[[nodiscard]] TraceSet openManifestOnly(const QString& folder);

// Adds a warning for each rank file of the folder that the manifest does not list.
void warnAboutUnlistedFiles(TraceSet& set);

// The absolute path of the manifest's rank file `entry`.
[[nodiscard]] QString rankFilePath(const TraceSet& set, const RankEntry& entry);

// Calls `indexFile(i, path)` for every rank file i of the manifest that exists, on
// options.threads threads, checking options.cancel and reporting options.progress before each
// file (one call at a time, in increasing order). False when cancelled.
bool forEachRankFile(const TraceSet& set, const OpenOptions& options,
                     const std::function<void(std::size_t i, const QString& path)>& indexFile);

// Whether `path` is a regular file (after symbolic links): the only kind opened as a rank
// file. A FIFO would block HDF5's open forever, a directory fails in its own words.
[[nodiscard]] bool isRegularFile(const QString& path);
// The error for a manifest entry whose file is no regular file: missing, a directory, a FIFO,
// a loop of symbolic links, ..., said as it is.
[[nodiscard]] Diagnostic unusableRankFile(const TraceSet& set, const RankEntry& entry);

// The error for a rank file whose own `rank` attribute contradicts the manifest (its records
// are then ignored), or nullopt when it agrees.
[[nodiscard]] std::optional<Diagnostic> rankAttributeProblem(const QString& path,
                                                             const RankEntry& entry,
                                                             const RankFileIndex& index);

// One error per placement of a record along an axis that the manifest's mesh does not have
// (the record is then ignored); empty when every axis is on the mesh.
[[nodiscard]] Diagnostics offMeshPlacements(const std::vector<QString>& placementAxes,
                                            const Manifest& manifest, const QString& path,
                                            const QString& dataset, const TensorKey& key);

// The error for a trace set without a single usable record, so that it is not refused without
// a word about why.
[[nodiscard]] Diagnostic noReadableTensor(const QString& folder);

// Orders records as a trace set holds them: by rank, then by sequence number.
void sortByRankAndSeq(std::vector<TensorRecord>& records);

}  // namespace ttrace
