#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "trace/Placement.h"
#include "trace/TensorRecord.h"

namespace ttrace {

// One fp8 scale block of a record, placed on the whole tensor: its scale, the global box it
// covers (several ranges along a dimension where context parallelism zig-zags), and the whole
// tensor's block holding all of it, where one does.
struct PlacedScaleBlock {
    double scaleInv = 1;
    ShardRanges box;
    std::optional<std::int64_t> wholeBlock;  // flat, row-major; none when it straddles two
};

// The part of the tensor a piece holds along the dimensions data-parallel axes shard: pieces
// that differ in it hold different samples, which each data-parallel rank quantizes alone.
QString samplesOf(const TensorRecord& record);

// The extent of a record's scale blocks along dimension d: the block's, or its whole local
// extent when it is scaled per tensor.
std::int64_t scaleBlockExtent(const TensorRecord& record, std::size_t d);

// Every scale block of `record` (in its scales' row-major order), placed on the grid of the
// whole tensor's blocks of `wholeExtent` elements per dimension over `globalShape`.
std::vector<PlacedScaleBlock> placeScaleBlocks(const TensorRecord& record,
                                               const std::vector<std::int64_t>& wholeExtent,
                                               const std::vector<std::int64_t>& globalShape);

}  // namespace ttrace
