#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ttrace {

// How the stored bytes of an fp8 dataset decode (docs/trace-format.md, "fp8 scales"): each
// value times the scale_inv of its block. Blocks tile the dataset (the rank's local shard)
// from its first element, `block` elements per dimension, the last block of a dimension
// possibly shorter. Per-tensor scaling is one block, the whole dataset; per-row scaling of a
// [rows, cols] shard is blocks of [1, cols].
struct BlockScales {
    std::vector<std::int64_t> block;    // elements per dimension; empty: one block, per tensor
    std::vector<double> scaleInv{1.0};  // row-major over the grid of blocks

    bool perTensor() const { return block.empty(); }
    // Blocks per dimension of a dataset of `shape` (its rank must be block's).
    std::vector<std::int64_t> grid(std::span<const std::int64_t> shape) const;
    // Multiplies `out`, the box [start, start + count) of a dataset of `shape` in row-major
    // order, by the scale_inv of each element's block.
    void apply(std::span<const std::int64_t> shape, std::span<const std::int64_t> start,
               std::span<const std::int64_t> count, float* out) const;

    friend bool operator==(const BlockScales&, const BlockScales&) = default;
};

}  // namespace ttrace
