#pragma once

#include <QString>
#include <optional>
#include <vector>

#include "trace/Diagnostic.h"
#include "trace/TensorRecord.h"

namespace ttrace {

// What one rank file says about itself, independent of the manifest: this is what the index
// cache stores, diagnostics included, so that a cached re-open reports the same problems.
struct RankFileIndex {
    bool opened = false;                // false when HDF5 could not open the file at all
    std::optional<int> fileRank;        // file attribute `rank`
    QString formatVersion;              // file attribute `format_version`
    std::vector<TensorRecord> records;  // ordered by seq; rank = fileRank (or -1), no coords
    Diagnostics diagnostics;
};

// Opens `path` read-only and indexes every dataset under /tensors. Never throws; a dataset
// whose attributes are missing or inconsistent becomes an error and is left out.
[[nodiscard]] RankFileIndex indexRankFile(const QString& path);

}  // namespace ttrace
