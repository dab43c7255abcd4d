#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "compare/ElementErrors.h"
#include "compare/MetricsBackend.h"
#include "mapping/BlockPlan.h"
#include "trace/Diagnostic.h"
#include "trace/Placement.h"
#include "trace/TensorKey.h"
#include "trace/TraceSet.h"

namespace ttrace {

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
    // The reference's shards where it is laid out over ranks and cut otherwise than the
    // distributed run (its own rounding follows its cuts); empty where it holds the tensor
    // in one piece or is cut the same way.
    std::vector<ShardFootprint> referenceShards;
};

struct ProfileOptions {
    int maxWidth = 256;  // pixels of the image
    int maxHeight = 256;
    std::int64_t chunkElements = kDefaultChunkElements;  // bounds memory: a few such buffers
    // Of the copies of a shard, the one held by one of these ranks is profiled (else the first):
    // where replicas differ, the user looks at the copy that is wrong.
    std::vector<int> preferredRanks;
    const std::atomic<bool>* cancel = nullptr;
    const MetricsBackend* backend = nullptr;  // where the element errors are binned; CPU if null
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
