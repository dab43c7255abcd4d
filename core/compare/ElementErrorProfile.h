#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "mapping/BlockPlan.h"
#include "trace/Diagnostic.h"
#include "trace/Placement.h"
#include "trace/TensorKey.h"
#include "trace/TraceSet.h"

namespace ttrace {

// Element relative errors |d - r| / (|r| + tiny) of one tensor counted on log-spaced bins:
// bin i covers [lowerEdge(i), lowerEdge(i + 1)). `tiny` is the smallest normal float, so an
// element whose reference is 0 and whose value is not lands in `above`.
struct ErrorHistogram {
    static constexpr int kMinDecade = -12;
    static constexpr int kMaxDecade = 4;
    static constexpr int kBinsPerDecade = 4;
    static constexpr int kBinCount = (kMaxDecade - kMinDecade) * kBinsPerDecade;

    std::vector<std::int64_t> bins = std::vector<std::int64_t>(kBinCount, 0);
    std::int64_t exact = 0;  // error 0: bit-equal or both zero
    std::int64_t below = 0;  // 0 < error < 10^kMinDecade
    std::int64_t above = 0;  // error >= 10^kMaxDecade, or not a number (a NaN on one side)

    static double lowerEdge(int bin);
    void add(double error);
    std::int64_t total() const;
    // Elements in the bins that lie wholly at or above `error` (plus `above`).
    std::int64_t countAtOrAbove(double error) const;
};

// The tensor seen as a 2-D array (rows: the leading dimensions flattened row-major; columns:
// the last dimension; a scalar is 1 x 1) downsampled to at most the requested pixels: each
// pixel holds the largest element error of its block of elements.
struct ErrorImage {
    std::int64_t rows = 0;
    std::int64_t columns = 0;
    int height = 0;
    int width = 0;
    std::vector<float> maxError;  // height * width, row-major; NaN errors stored as +inf

    float at(int pixelRow, int pixelColumn) const {
        return maxError[static_cast<std::size_t>(pixelRow) * static_cast<std::size_t>(width) +
                        static_cast<std::size_t>(pixelColumn)];
    }
    // First element row (column) of a pixel row (column); rowStart(height) == rows.
    std::int64_t rowStart(int pixelRow) const;
    std::int64_t columnStart(int pixelColumn) const;
    // The pixel row (column) holding an element row (column).
    int pixelRowOf(std::int64_t row) const;
    int pixelColumnOf(std::int64_t column) const;
};

// Half-open element rectangle on the 2-D view of the tensor.
struct ElementRect {
    std::int64_t rowStart = 0, rowStop = 0, columnStart = 0, columnStop = 0;
    friend bool operator==(const ElementRect&, const ElementRect&) = default;
};

// Where one shard of the distributed run lies on the 2-D view.
struct ShardFootprint {
    ShardRanges ranges;
    std::vector<int> ranks;  // every rank holding a copy of it
    // Non-overlapping rectangles covering the shard; its bounding box alone when the exact
    // outline would take more than kMaxRects rectangles (then `bounding` is set).
    std::vector<ElementRect> rects;
    bool bounding = false;
    static constexpr std::size_t kMaxRects = 4096;
};

struct ElementErrorProfile {
    TensorKey key;
    std::vector<std::int64_t> globalShape;
    ErrorHistogram histogram;
    ErrorImage image;
    std::vector<ShardFootprint> shards;  // in the mapping's shard order
};

struct ProfileOptions {
    int maxWidth = 256;  // pixels of the image
    int maxHeight = 256;
    std::int64_t chunkElements = kDefaultChunkElements;  // bounds memory: a few such buffers
    // Of the copies of a shard, the one held by one of these ranks is profiled (else the first):
    // where replicas differ, the user looks at the copy that is wrong.
    std::vector<int> preferredRanks;
    const std::atomic<bool>* cancel = nullptr;
};

struct ProfileOutcome {
    std::optional<ElementErrorProfile> profile;  // empty on error or cancel
    Diagnostics diagnostics;
    bool cancelled = false;
};

// Streams the one logical tensor `key` of `distributed` (one copy of each shard, see
// ProfileOptions::preferredRanks; partial sums added as the comparison does) against `reference`
// block by block and profiles its element errors. Memory is bounded by the chunk and the image,
// whatever the tensor's size.
[[nodiscard]] ProfileOutcome profileElementErrors(const TraceSet& distributed,
                                                  const TraceSet& reference, const TensorKey& key,
                                                  const ProfileOptions& options = {});

}  // namespace ttrace
