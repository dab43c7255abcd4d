#include "compare/Fp8Scales.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "compare/ScaleBlocks.h"

namespace ttrace {

namespace {

// The largest |a / b - 1| over the blocks both know, when they are scaled the same way; 0
// otherwise.
double largestDifference(const WholeScales& a, const WholeScales& b) {
    double largest = 0;
    if (a.scales.block == b.scales.block && a.scales.scaleInv.size() == b.scales.scaleInv.size()) {
        for (std::size_t i = 0; i < a.scales.scaleInv.size(); ++i) {
            if (a.known[i] && b.known[i]) {
                largest =
                    std::max(largest, std::abs(a.scales.scaleInv[i] / b.scales.scaleInv[i] - 1));
            }
        }
    }
    return largest;
}

// One block of one copy, held to one block of the reference.
struct BlockCopy {
    std::size_t copy;
    std::int64_t referenceBlock;  // flat, row-major over the reference's grid
    double scaleInv;
    ShardRanges box;
    QString samples;  // which data-parallel part of the tensor the copy holds (samplesOf)
};

// Whether `record` lays its scale blocks out otherwise than blocks of `wholeExtent`: along some
// dimension it holds more than one block, of another extent. Shards of the reference's own
// layout (cut anywhere, scaled per tensor, or holding one block along a dimension) do not.
bool laidOutOtherwise(const TensorRecord& record, const std::vector<std::int64_t>& wholeExtent) {
    for (std::size_t d = 0; d < wholeExtent.size(); ++d) {
        const std::int64_t extent = scaleBlockExtent(record, d);
        if (extent != wholeExtent[d] && record.localShape[d] > extent) {
            return true;
        }
    }
    return false;
}

// The reference's block (flat, row-major over its grid of `extent` blocks per dimension)
// holding the first element of `box`.
std::int64_t blockAtStart(const ShardRanges& box, const std::vector<std::int64_t>& extent,
                          const std::vector<std::int64_t>& globalShape) {
    std::int64_t flat = 0;
    for (std::size_t d = 0; d < extent.size(); ++d) {
        const std::int64_t grid =
            (std::max<std::int64_t>(globalShape[d], 1) + extent[d] - 1) / extent[d];
        flat = flat * grid + box.dims[d].front().start / extent[d];
    }
    return flat;
}

}  // namespace

std::optional<Fp8ScaleCheck> checkFp8Scales(const LogicalTensor& distributed,
                                            const std::optional<WholeScales>& reference,
                                            const std::optional<WholeScales>& perturbed,
                                            double floor, double safetyFactor) {
    if (!reference || !isScaled(distributed.dtype)) {
        return std::nullopt;
    }
    Fp8ScaleCheck check;
    check.referenceBlock = reference->scales.block;
    check.referenceFormat = reference->scales.format;
    check.referenceTensorScale = reference->scales.tensorScale;
    // The reference's own data-parallel pieces scaled apart: its values lie on their ranks'
    // fp8 grids, as a distributed copy's do that scales its own samples.
    check.dataParallelBlocks = reference->dataParallelBlocks;
    check.referenceScaleInv = reference->largest();
    // The scale of one element (a block's largest) moves with round-off; the perturbed
    // reference shows by how much, and `floor` is the least when it shows none (its largest
    // elements rounded to the same values).
    double perturbedDifference = 0;
    if (perturbed) {
        check.perturbedScaleInv = perturbed->largest();
        perturbedDifference = largestDifference(*perturbed, *reference);
    }
    check.tolerance = std::max(safetyFactor * perturbedDifference, floor);

    const std::size_t rank = distributed.globalShape.size();
    std::vector<std::int64_t> wholeExtent(rank);
    for (std::size_t d = 0; d < rank; ++d) {
        wholeExtent[d] = reference->scales.perTensor()
                             ? std::max<std::int64_t>(distributed.globalShape[d], 1)
                             : reference->scales.block[d];
    }
    std::vector<const Replica*> copies;
    std::vector<const Shard*> copyShards;
    std::vector<BlockCopy> blocks;
    // Per copy scaled per row or block, its blocks lying across the reference's.
    std::vector<std::optional<ScaleMismatch>> across;
    for (const auto& shard : distributed.shards) {
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
            across.emplace_back();
            const bool otherLayout = laidOutOtherwise(record, wholeExtent);
            const QString samples = samplesOf(record);
            for (PlacedScaleBlock& placed :
                 placeScaleBlocks(record, wholeExtent, distributed.globalShape)) {
                const auto atStart = static_cast<std::size_t>(
                    blockAtStart(placed.box, wholeExtent, distributed.globalShape));
                if (placed.wholeBlock &&
                    reference->known[static_cast<std::size_t>(*placed.wholeBlock)]) {
                    blocks.push_back({copy, *placed.wholeBlock, placed.scaleInv,
                                      std::move(placed.box), samples});
                } else if (!placed.wholeBlock && otherLayout && reference->known[atStart]) {
                    // Blocks across the reference's, of another shape than its own: shards
                    // cut blocks, they never join them or turn them. (Blocks of the
                    // reference's shape straddle its grid where a shard starts inside a
                    // block, which a rank file cannot say otherwise: not compared.)
                    auto& first = across.back();
                    if (!first) {
                        const double referenceScale = reference->scales.scaleInv[atStart];
                        first = ScaleMismatch{shard.ranges,
                                              replica.ranks(),
                                              std::move(placed.box),
                                              placed.scaleInv,
                                              referenceScale,
                                              placed.scaleInv / referenceScale,
                                              0,
                                              true};
                    }
                    ++first->blocksBeyond;
                } else {
                    ++check.blocksNotCompared;
                }
            }
        }
    }

    // A reference block whose copies' blocks of the same samples disagree: their amax was not
    // reduced over them. Copies of other samples (split by data parallelism) have their own.
    struct SamplesScale {
        bool agree = true;
        double largest = 0;  // the scale of an amax reduced over them
    };
    std::map<std::pair<std::int64_t, QString>, SamplesScale> scaleOf;
    std::map<std::int64_t, std::set<QString>> samplesIn;
    for (const BlockCopy& b : blocks) {
        const auto [it, inserted] =
            scaleOf.try_emplace({b.referenceBlock, b.samples}, SamplesScale{true, b.scaleInv});
        it->second.agree = it->second.agree && it->second.largest == b.scaleInv;
        it->second.largest = std::max(it->second.largest, b.scaleInv);
        samplesIn[b.referenceBlock].insert(b.samples);
    }
    std::vector<std::optional<ScaleMismatch>> worst(copies.size());
    for (const BlockCopy& b : blocks) {
        const SamplesScale& ofSamples = scaleOf[{b.referenceBlock, b.samples}];
        const bool disagree = !ofSamples.agree;
        double referenceScale =
            reference->scales.scaleInv[static_cast<std::size_t>(b.referenceBlock)];
        if (samplesIn[b.referenceBlock].size() > 1) {
            // The reference scaled every sample of the block together, each data-parallel
            // rank its own: held to the copies of its own samples, not to the reference.
            check.dataParallelBlocks += b.scaleInv != referenceScale ? 1 : 0;
            if (!disagree) {
                continue;
            }
            referenceScale = ofSamples.largest;
        }
        const double ratio = b.scaleInv / referenceScale;
        const double difference = std::abs(ratio - 1);
        check.maxDifference = std::max(check.maxDifference, difference);
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
    // A copy laid out across the reference's blocks is said as that, whatever its scales.
    for (std::size_t copy = 0; copy < copies.size(); ++copy) {
        if (across[copy]) {
            check.mismatches.push_back(std::move(*across[copy]));
        } else if (worst[copy]) {
            check.mismatches.push_back(std::move(*worst[copy]));
        }
    }
    std::stable_sort(check.mismatches.begin(), check.mismatches.end(),
                     [](const ScaleMismatch& a, const ScaleMismatch& b) {
                         if (a.acrossReferenceBlocks != b.acrossReferenceBlocks) {
                             return a.acrossReferenceBlocks;
                         }
                         return std::abs(a.ratio - 1) > std::abs(b.ratio - 1);
                     });
    return check;
}

}  // namespace ttrace
