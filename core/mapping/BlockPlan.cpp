#include "mapping/BlockPlan.h"

#include <algorithm>
#include <cstddef>

namespace ttrace {

std::int64_t Block::elementCount() const {
    std::int64_t n = 1;
    for (const auto extent : count) {
        n *= extent;
    }
    return n;
}

namespace {

// One single-range box of a shard: the product of one range per dimension.
struct SubBox {
    std::vector<std::int64_t> localStart;
    std::vector<std::int64_t> globalStart;
    std::vector<std::int64_t> extent;
};

// Chunks a sub-box row-major: whole trailing dimensions while they fit, a run of rows along
// the first dimension that does not, single indices along the ones before it.
void chunkSubBox(const SubBox& box, std::int64_t maxElements, std::vector<Block>& blocks) {
    const std::size_t nd = box.extent.size();
    // suffix[d] = elements in dimensions d.. nd-1
    std::vector<std::int64_t> suffix(nd + 1, 1);
    for (std::size_t d = nd; d-- > 0;) {
        suffix[d] = suffix[d + 1] * box.extent[d];
    }
    if (suffix[0] <= maxElements) {
        blocks.push_back(Block{box.localStart, box.globalStart, box.extent});
        return;
    }
    // The first dimension whose trailing block fits; the one before it gets split.
    std::size_t full = 0;
    while (suffix[full] > maxElements) {
        ++full;
    }
    const std::size_t split = full - 1;
    const std::int64_t step = std::max<std::int64_t>(1, maxElements / suffix[full]);

    std::vector<std::int64_t> outer(split, 0);  // index along dimensions before `split`
    while (true) {
        for (std::int64_t pos = 0; pos < box.extent[split]; pos += step) {
            Block block;
            block.localStart = box.localStart;
            block.globalStart = box.globalStart;
            block.count = box.extent;
            for (std::size_t d = 0; d < split; ++d) {
                block.localStart[d] += outer[d];
                block.globalStart[d] += outer[d];
                block.count[d] = 1;
            }
            block.localStart[split] += pos;
            block.globalStart[split] += pos;
            block.count[split] = std::min(step, box.extent[split] - pos);
            blocks.push_back(std::move(block));
        }
        // Next outer index, row-major.
        std::size_t d = split;
        while (true) {
            if (d == 0) {
                return;
            }
            --d;
            if (++outer[d] < box.extent[d]) {
                break;
            }
            outer[d] = 0;
        }
    }
}

}  // namespace

TensorBlocks::TensorBlocks(std::vector<std::int64_t> shape, std::int64_t maxElements)
    : shape_(std::move(shape)) {
    maxElements = std::max<std::int64_t>(1, maxElements);
    const std::size_t nd = shape_.size();
    std::vector<std::int64_t> suffix(nd + 1, 1);  // elements in dimensions d..nd-1
    for (std::size_t d = nd; d-- > 0;) {
        suffix[d] = suffix[d + 1] * shape_[d];
    }
    if (suffix[0] <= 0 && nd > 0) {
        return;  // an empty tensor has no block
    }
    if (suffix[0] <= maxElements) {
        count_ = 1;
        return;
    }
    // As chunkSubBox: whole trailing dimensions while they fit, runs along the one before.
    std::size_t full = 0;
    while (suffix[full] > maxElements) {
        ++full;
    }
    split_ = full - 1;
    step_ = std::max<std::int64_t>(1, maxElements / suffix[full]);
    perOuter_ = static_cast<std::size_t>((shape_[split_] + step_ - 1) / step_);
    std::size_t outer = 1;
    for (std::size_t d = 0; d < split_; ++d) {
        outer *= static_cast<std::size_t>(shape_[d]);
    }
    count_ = outer * perOuter_;
}

Block TensorBlocks::at(std::size_t index) const {
    Block block;
    block.globalStart.assign(shape_.size(), 0);
    block.count = shape_;
    if (step_ > 0) {
        std::size_t outer = index / perOuter_;
        const auto pos = static_cast<std::int64_t>(index % perOuter_) * step_;
        for (std::size_t d = split_; d-- > 0;) {  // row-major: the last outer dimension fastest
            const auto extent = static_cast<std::size_t>(shape_[d]);
            block.globalStart[d] = static_cast<std::int64_t>(outer % extent);
            block.count[d] = 1;
            outer /= extent;
        }
        block.globalStart[split_] = pos;
        block.count[split_] = std::min(step_, shape_[split_] - pos);
    }
    block.localStart = block.globalStart;
    return block;
}

std::vector<Block> shardPiecesInBox(const ShardRanges& ranges, const Block& box) {
    const std::size_t nd = ranges.dims.size();
    if (nd != box.count.size() || nd != box.globalStart.size()) {
        return {};
    }
    if (nd == 0) {
        return {Block{}};  // a scalar lies in the only box there is
    }
    struct Segment {
        std::int64_t globalStart, count, localStart;
    };
    std::vector<std::vector<Segment>> segments(nd);
    for (std::size_t d = 0; d < nd; ++d) {
        const std::int64_t boxStart = box.globalStart[d];
        const std::int64_t boxStop = boxStart + box.count[d];
        std::int64_t local = 0;
        for (const auto& range : ranges.dims[d]) {
            const std::int64_t lo = std::max(range.start, boxStart);
            const std::int64_t hi = std::min(range.stop, boxStop);
            if (lo < hi) {
                segments[d].push_back({lo, hi - lo, local + lo - range.start});
            }
            local += range.size();
        }
        if (segments[d].empty()) {
            return {};
        }
    }
    std::vector<Block> pieces;
    std::vector<std::size_t> which(nd, 0);
    while (true) {
        Block piece;
        for (std::size_t d = 0; d < nd; ++d) {
            const Segment& segment = segments[d][which[d]];
            piece.localStart.push_back(segment.localStart);
            piece.globalStart.push_back(segment.globalStart);
            piece.count.push_back(segment.count);
        }
        pieces.push_back(std::move(piece));
        std::size_t d = nd;
        while (true) {
            if (d == 0) {
                return pieces;
            }
            --d;
            if (++which[d] < segments[d].size()) {
                break;
            }
            which[d] = 0;
        }
    }
}

std::vector<Block> planBlocks(const ShardRanges& ranges, std::int64_t maxElements) {
    maxElements = std::max<std::int64_t>(1, maxElements);
    std::vector<Block> blocks;
    const std::size_t nd = ranges.dims.size();
    if (nd == 0) {
        blocks.push_back(Block{});  // a scalar: one element
        return blocks;
    }
    for (const auto& dim : ranges.dims) {
        if (dim.empty()) {
            return blocks;
        }
    }
    // Iterate over the product of one range per dimension; the local start of a range is the
    // sum of the sizes of the ranges before it.
    std::vector<std::size_t> which(nd, 0);
    std::vector<std::int64_t> localOffset(nd, 0);
    while (true) {
        SubBox box;
        box.localStart = localOffset;
        bool empty = false;
        for (std::size_t d = 0; d < nd; ++d) {
            const auto& range = ranges.dims[d][which[d]];
            box.globalStart.push_back(range.start);
            box.extent.push_back(range.size());
            empty = empty || range.size() <= 0;
        }
        if (!empty) {
            chunkSubBox(box, maxElements, blocks);
        }
        std::size_t d = nd;
        while (true) {
            if (d == 0) {
                return blocks;
            }
            --d;
            localOffset[d] += ranges.dims[d][which[d]].size();
            if (++which[d] < ranges.dims[d].size()) {
                break;
            }
            which[d] = 0;
            localOffset[d] = 0;
        }
    }
}

std::int64_t linearIndex(const std::vector<std::int64_t>& coord,
                         const std::vector<std::int64_t>& shape) {
    std::int64_t index = 0;
    for (std::size_t d = 0; d < shape.size() && d < coord.size(); ++d) {
        index = index * shape[d] + coord[d];
    }
    return index;
}

std::vector<std::int64_t> blockElementCoord(const Block& block, std::int64_t offset) {
    std::vector<std::int64_t> coord(block.count.size(), 0);
    for (std::size_t d = block.count.size(); d-- > 0;) {
        const auto extent = std::max<std::int64_t>(1, block.count[d]);
        coord[d] = block.globalStart[d] + offset % extent;
        offset /= extent;
    }
    return coord;
}

}  // namespace ttrace
