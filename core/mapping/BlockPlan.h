#pragma once

#include <cstdint>
#include <vector>

#include "trace/Placement.h"

namespace ttrace {

// A box of at most a chunk's worth of elements, inside one shard: where it is in the shard's
// own dataset (local) and in the global tensor. Boxes never straddle two ranges of a
// multi-range dimension, so the global side is a plain hyperslab too.
struct Block {
    std::vector<std::int64_t> localStart;
    std::vector<std::int64_t> globalStart;
    std::vector<std::int64_t> count;
    std::int64_t elementCount() const;
};

// Elements per block when the user does not say: 1 MiB of floats per buffer, so that the two
// blocks compared at a time (reference and replica) fit a core's L2 cache of 2 MiB (measured on
// 2 cores: reading and comparing are both faster than with 2^20; below 2^16 per-block work
// shows).
inline constexpr std::int64_t kDefaultChunkElements = std::int64_t{1} << 18;

// Splits a shard into blocks of at most `maxElements` elements (at least one element per
// block), in row-major order of the shard's local index. Streaming a tensor block by block
// keeps memory bounded by the chunk size whatever the tensor size.
std::vector<Block> planBlocks(const ShardRanges& ranges, std::int64_t maxElements);

// The blocks planBlocks(ShardRanges::whole(shape), maxElements) lists, computed on demand: a
// tensor's plan takes no memory however many blocks it has.
class TensorBlocks {
public:
    TensorBlocks(std::vector<std::int64_t> shape, std::int64_t maxElements);
    std::size_t size() const { return count_; }
    Block at(std::size_t index) const;

private:
    std::vector<std::int64_t> shape_;
    std::size_t split_ = 0;     // the dimension cut into runs of `step_` indices
    std::int64_t step_ = 0;     // 0: the whole tensor is one block
    std::size_t perOuter_ = 1;  // blocks per index of the dimensions before `split_`
    std::size_t count_ = 0;
};

// The parts of a shard that fall inside `box` (a box in global coordinates, its localStart
// ignored): one block per combination of intersecting ranges, with localStart in the shard's
// own dataset and globalStart in the global tensor, in row-major order of the ranges.
std::vector<Block> shardPiecesInBox(const ShardRanges& ranges, const Block& box);

// Row-major linear index of a global coordinate.
std::int64_t linearIndex(const std::vector<std::int64_t>& coord,
                         const std::vector<std::int64_t>& shape);
// Global coordinate of the element at row-major `offset` inside `block`.
std::vector<std::int64_t> blockElementCoord(const Block& block, std::int64_t offset);

}  // namespace ttrace
