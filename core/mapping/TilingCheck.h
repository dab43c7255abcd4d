#pragma once

#include <QString>
#include <cstdint>
#include <vector>

#include "trace/Placement.h"
#include "trace/TensorRecord.h"

namespace ttrace {

// One shard as the tiling check sees it: where it is and who holds it.
struct TilingShard {
    const ShardRanges* ranges = nullptr;  // every range already inside the global shape
    std::vector<int> ranks;
    const TensorRecord* record = nullptr;  // a piece to name in diagnostics
};

// A gap or an overlap, with an example global coordinate in the message.
// How a gap's message starts: what follows it is the count, an example and the ranks.
inline constexpr char16_t kGapMessageStart[] = u"shards leave a gap";

struct TilingProblem {
    QString message;
    const TensorRecord* record = nullptr;  // the offending piece
};

// Checks that the shards tile `globalShape` exactly: no element uncovered, none covered twice.
// Exact per element via coordinate compression (cells between range boundaries); when that
// grid would exceed `maxCells` it falls back to a volume check plus pairwise overlaps.
[[nodiscard]] std::vector<TilingProblem> checkTiling(const std::vector<std::int64_t>& globalShape,
                                                     const std::vector<TilingShard>& shards,
                                                     std::int64_t maxCells = std::int64_t{1} << 22);

}  // namespace ttrace
