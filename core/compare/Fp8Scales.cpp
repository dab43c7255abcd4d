#include "compare/Fp8Scales.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

namespace ttrace {

namespace {

// Where one block of a copy lies along one dimension: its global ranges, and the index of
// the reference's block holding them all (none when they straddle two).
struct BlockSpan {
    std::vector<IndexRange> global;
    std::optional<std::int64_t> referenceBlock;
};

// The spans of a copy's blocks along dimension d: the copy's local interval of each block,
// mapped through its ranges (several where context parallelism zig-zags).
std::vector<BlockSpan> blockSpans(const TensorRecord& copy, std::size_t d,
                                  std::int64_t referenceExtent) {
    const std::int64_t local = copy.localShape[d];
    const std::int64_t extent =
        copy.scales.perTensor() ? std::max<std::int64_t>(local, 1) : copy.scales.block[d];
    std::vector<BlockSpan> spans;
    for (std::int64_t begin = 0; begin < local; begin += extent) {
        const std::int64_t end = std::min(local, begin + extent);
        BlockSpan span;
        std::int64_t offset = 0;  // local index of the range's first element
        std::int64_t first = -1;
        std::int64_t last = -1;
        for (const IndexRange& r : copy.ranges.dims[d]) {
            const std::int64_t from = std::max(begin, offset);
            const std::int64_t to = std::min(end, offset + r.size());
            if (from < to) {
                const IndexRange g{r.start + from - offset, r.start + to - offset};
                span.global.push_back(g);
                first = first < 0 ? g.start / referenceExtent
                                  : std::min(first, g.start / referenceExtent);
                last = std::max(last, (g.stop - 1) / referenceExtent);
            }
            offset += r.size();
        }
        if (first >= 0 && first == last) {
            span.referenceBlock = first;
        }
        spans.push_back(std::move(span));
    }
    return spans;
}

// The largest |a / b - 1| over blocks of two records scaled the same way; 0 otherwise.
double largestDifference(const BlockScales& a, const BlockScales& b) {
    double largest = 0;
    if (a.block == b.block && a.scaleInv.size() == b.scaleInv.size()) {
        for (std::size_t i = 0; i < a.scaleInv.size(); ++i) {
            largest = std::max(largest, std::abs(a.scaleInv[i] / b.scaleInv[i] - 1));
        }
    }
    return largest;
}

double largest(const BlockScales& scales) {
    return *std::max_element(scales.scaleInv.begin(), scales.scaleInv.end());
}

// One block of one copy, held to one block of the reference.
struct BlockCopy {
    std::size_t copy;
    std::int64_t referenceBlock;  // flat, row-major over the reference's grid
    double scaleInv;
    ShardRanges box;
};

}  // namespace

std::optional<Fp8ScaleCheck> checkFp8Scales(const ComparisonTask& task, const Threshold& threshold,
                                            double safetyFactor) {
    // The reference's scales are the whole tensor's only where one record holds it whole.
    const TensorRecord* whole = task.reference->wholeRecord();
    if (!whole || !isFp8(task.distributed->dtype) || !isFp8(whole->dtype) ||
        whole->scales.scaleInv.empty()) {
        return std::nullopt;
    }
    const TensorRecord& reference = *whole;
    const TensorRecord* perturbed = task.perturbed ? task.perturbed->wholeRecord() : nullptr;
    Fp8ScaleCheck check;
    check.referenceBlock = reference.scales.block;
    check.referenceScaleInv = largest(reference.scales);
    // The scale of one element (a block's largest) moves with round-off; the perturbed
    // reference shows by how much, and the tensor's theoretical bound is the floor when it
    // shows none (its largest elements rounded to the same values).
    double perturbedDifference = 0;
    if (perturbed && isFp8(perturbed->dtype) && !perturbed->scales.scaleInv.empty()) {
        check.perturbedScaleInv = largest(perturbed->scales);
        perturbedDifference = largestDifference(perturbed->scales, reference.scales);
    }
    check.tolerance = std::max(safetyFactor * perturbedDifference, threshold.theoretical);

    const std::size_t rank = reference.localShape.size();
    const auto referenceGrid = reference.scales.grid(reference.localShape);
    std::vector<const Replica*> copies;
    std::vector<const Shard*> copyShards;
    std::vector<BlockCopy> blocks;
    for (const auto& shard : task.distributed->shards) {
        for (const auto& replica : shard.replicas) {
            if (replica.summands.size() != 1) {
                continue;
            }
            const TensorRecord& record = *replica.summands.front();
            if (record.localShape.size() != rank || record.scales.scaleInv.empty() ||
                std::find(record.localShape.begin(), record.localShape.end(), 0) !=
                    record.localShape.end()) {
                continue;
            }
            const std::size_t copy = copies.size();
            copies.push_back(&replica);
            copyShards.push_back(&shard);
            std::vector<std::vector<BlockSpan>> spans;
            for (std::size_t d = 0; d < rank; ++d) {
                const std::int64_t extent = reference.scales.perTensor()
                                                ? std::max<std::int64_t>(reference.localShape[d], 1)
                                                : reference.scales.block[d];
                spans.push_back(blockSpans(record, d, extent));
            }
            // Every block of the copy: an odometer over its grid, row-major like its scales.
            std::vector<std::size_t> at(rank, 0);
            for (std::size_t flat = 0; flat < record.scales.scaleInv.size(); ++flat) {
                BlockCopy block{copy, 0, record.scales.scaleInv[flat], {}};
                bool held = true;
                for (std::size_t d = 0; d < rank && held; ++d) {
                    const BlockSpan& span = spans[d][at[d]];
                    held = span.referenceBlock.has_value();
                    block.referenceBlock =
                        block.referenceBlock * referenceGrid[d] + span.referenceBlock.value_or(0);
                    block.box.dims.push_back(span.global);
                }
                if (held) {
                    blocks.push_back(std::move(block));
                } else {
                    ++check.blocksNotCompared;
                }
                for (std::size_t d = rank; d-- > 0;) {
                    if (++at[d] < spans[d].size()) {
                        break;
                    }
                    at[d] = 0;
                }
            }
        }
    }

    // A reference block whose copies' blocks disagree: their amax was not reduced over them.
    std::map<std::int64_t, std::optional<double>> scaleOf;  // nullopt once two disagree
    for (const BlockCopy& b : blocks) {
        const auto [it, inserted] = scaleOf.try_emplace(b.referenceBlock, b.scaleInv);
        if (!inserted && it->second != b.scaleInv) {
            it->second.reset();
        }
    }
    std::vector<std::optional<ScaleMismatch>> worst(copies.size());
    for (const BlockCopy& b : blocks) {
        const double referenceScale = reference.scales.scaleInv[b.referenceBlock];
        const double ratio = b.scaleInv / referenceScale;
        const double difference = std::abs(ratio - 1);
        check.maxDifference = std::max(check.maxDifference, difference);
        const bool disagree = !scaleOf[b.referenceBlock].has_value();
        check.copiesAgree = check.copiesAgree && !disagree;
        if (!disagree || difference <= check.tolerance) {
            continue;
        }
        auto& w = worst[b.copy];
        if (!w) {
            w = ScaleMismatch{copyShards[b.copy]->ranges,
                              copies[b.copy]->ranks(),
                              b.box,
                              b.scaleInv,
                              referenceScale,
                              ratio,
                              0};
        } else if (difference > std::abs(w->ratio - 1)) {
            w->block = b.box;
            w->scaleInv = b.scaleInv;
            w->referenceScaleInv = referenceScale;
            w->ratio = ratio;
        }
        ++w->blocksBeyond;
    }
    for (auto& w : worst) {
        if (w) {
            check.mismatches.push_back(std::move(*w));
        }
    }
    std::stable_sort(check.mismatches.begin(), check.mismatches.end(),
                     [](const ScaleMismatch& a, const ScaleMismatch& b) {
                         return std::abs(a.ratio - 1) > std::abs(b.ratio - 1);
                     });
    return check;
}

}  // namespace ttrace
