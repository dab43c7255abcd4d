#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "trace/DType.h"
#include "trace/ScaleFormat.h"

namespace ttrace {

// How the stored elements of a box of a dataset scale, for a reader that decodes stored words
// itself (a GPU): one float per (row of the box, block column it touches), so that a run of
// the box decodes from its words and this table alone. Rows of the box hold `pitch` stored
// elements (fp4: its whole bytes, two elements each; StoredBox); the stored column c of a row
// is under entry (c + columnShift) / blockColumns (0 blockColumns: one entry a row).
struct StoredScales {
    const float* table = nullptr;  // null: every element times scaleInv (per tensor)
    float scaleInv = 1.0F;
    std::size_t pitch = 1;
    std::size_t rowEntries = 1;
    std::size_t blockColumns = 0;
    std::int64_t columnShift = 0;
};

// How the stored bytes of an fp8 dataset decode (docs/trace-format.md, "fp8 scales"): each
// value times the scale_inv of its block. Blocks tile the dataset (the rank's local shard)
// from its first element, `block` elements per dimension, the last block of a dimension
// possibly shorter. Per-tensor scaling is one block, the whole dataset; per-row scaling of a
// [rows, cols] shard is blocks of [1, cols].
struct BlockScales {
    std::vector<std::int64_t> block;    // elements per dimension; empty: one block, per tensor
    std::vector<double> scaleInv{1.0};  // row-major over the grid of blocks
    // What the scales are, not how they decode: the format the recipe kept them in where
    // narrower than float64 (`scale_format`), and whether a scale per tensor above the blocks
    // was folded into them (NVFP4's `tensor_scale_inv`). They name the recipe (recipeName).
    std::optional<ScaleFormat> format;
    bool tensorScale = false;

    bool perTensor() const { return block.empty(); }
    // Blocks per dimension of a dataset of `shape` (its rank must be block's).
    std::vector<std::int64_t> grid(std::span<const std::int64_t> shape) const;
    // Multiplies `out`, the box [start, start + count) of a dataset of `shape` in row-major
    // order, by the scale_inv of each element's block.
    void apply(std::span<const std::int64_t> shape, std::span<const std::int64_t> start,
               std::span<const std::int64_t> count, float* out) const;

    // The scales of the box [start, start + count) of a dataset of `shape` holding `dtype`'s
    // words, the table in `table` (float, as apply() multiplies).
    StoredScales boxScales(DType dtype, std::span<const std::int64_t> shape,
                           std::span<const std::int64_t> start, std::span<const std::int64_t> count,
                           std::vector<float>& table) const;

    friend bool operator==(const BlockScales&, const BlockScales&) = default;
};

}  // namespace ttrace
