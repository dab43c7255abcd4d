#include "compare/ScaleBlocks.h"

#include <algorithm>

namespace ttrace {

namespace {

// Where one block of a record lies along one dimension: its global ranges, and the index of
// the whole tensor's block holding them all (none when they straddle two).
struct BlockSpan {
    std::vector<IndexRange> global;
    std::optional<std::int64_t> wholeBlock;
};

// The spans of a record's blocks along dimension d: the record's local interval of each
// block, mapped through its ranges (several where context parallelism zig-zags).
std::vector<BlockSpan> blockSpans(const TensorRecord& record, std::size_t d,
                                  std::int64_t wholeExtent) {
    const std::int64_t local = record.localShape[d];
    const std::int64_t extent = std::max<std::int64_t>(scaleBlockExtent(record, d), 1);
    std::vector<BlockSpan> spans;
    for (std::int64_t begin = 0; begin < local; begin += extent) {
        const std::int64_t end = std::min(local, begin + extent);
        BlockSpan span;
        std::int64_t offset = 0;  // local index of the range's first element
        std::int64_t first = -1;
        std::int64_t last = -1;
        for (const IndexRange& r : record.ranges.dims[d]) {
            const std::int64_t from = std::max(begin, offset);
            const std::int64_t to = std::min(end, offset + r.size());
            if (from < to) {
                const IndexRange g{r.start + from - offset, r.start + to - offset};
                span.global.push_back(g);
                first = first < 0 ? g.start / wholeExtent : std::min(first, g.start / wholeExtent);
                last = std::max(last, (g.stop - 1) / wholeExtent);
            }
            offset += r.size();
        }
        if (first >= 0 && first == last) {
            span.wholeBlock = first;
        }
        spans.push_back(std::move(span));
    }
    return spans;
}

}  // namespace

QString samplesOf(const TensorRecord& record) {
    QString part;
    for (const AxisPlacement& p : record.placements) {
        if (p.placement.type == Placement::Type::Shard && isDataParallelAxis(p.axis) &&
            static_cast<std::size_t>(p.placement.dim) < record.ranges.dims.size()) {
            ShardRanges along;
            along.dims = {record.ranges.dims[static_cast<std::size_t>(p.placement.dim)]};
            part += QString::number(p.placement.dim) + along.toString();
        }
    }
    return part;
}

std::int64_t scaleBlockExtent(const TensorRecord& record, std::size_t d) {
    return record.scales.perTensor() ? record.localShape[d] : record.scales.block[d];
}

std::vector<PlacedScaleBlock> placeScaleBlocks(const TensorRecord& record,
                                               const std::vector<std::int64_t>& wholeExtent,
                                               const std::vector<std::int64_t>& globalShape) {
    const std::size_t rank = record.localShape.size();
    std::vector<std::int64_t> wholeGrid(rank, 1);
    std::vector<std::vector<BlockSpan>> spans;
    for (std::size_t d = 0; d < rank; ++d) {
        const std::int64_t extent = std::max<std::int64_t>(wholeExtent[d], 1);
        wholeGrid[d] = (globalShape[d] + extent - 1) / extent;
        spans.push_back(blockSpans(record, d, extent));
    }
    std::vector<PlacedScaleBlock> placed;
    placed.reserve(record.scales.scaleInv.size());
    // Every block of the record: an odometer over its grid, row-major like its scales.
    std::vector<std::size_t> at(rank, 0);
    for (std::size_t flat = 0; flat < record.scales.scaleInv.size(); ++flat) {
        PlacedScaleBlock block{record.scales.scaleInv[flat], {}, std::int64_t{0}};
        for (std::size_t d = 0; d < rank; ++d) {
            const BlockSpan& span = spans[d][at[d]];
            if (!span.wholeBlock) {
                block.wholeBlock.reset();
            } else if (block.wholeBlock) {
                block.wholeBlock = *block.wholeBlock * wholeGrid[d] + *span.wholeBlock;
            }
            block.box.dims.push_back(span.global);
        }
        placed.push_back(std::move(block));
        for (std::size_t d = rank; d-- > 0;) {
            if (++at[d] < spans[d].size()) {
                break;
            }
            at[d] = 0;
        }
    }
    return placed;
}

}  // namespace ttrace
