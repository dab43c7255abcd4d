#include "compare/Fp8Scales.h"

#include <algorithm>
#include <cmath>
#include <map>
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
};

}  // namespace

std::optional<Fp8ScaleCheck> checkFp8Scales(const LogicalTensor& distributed,
                                            const std::optional<WholeScales>& reference,
                                            const std::optional<WholeScales>& perturbed,
                                            const Threshold& threshold, double safetyFactor) {
    if (!reference || !isFp8(distributed.dtype)) {
        return std::nullopt;
    }
    Fp8ScaleCheck check;
    check.referenceBlock = reference->scales.block;
    check.referenceScaleInv = reference->largest();
    // The scale of one element (a block's largest) moves with round-off; the perturbed
    // reference shows by how much, and the tensor's theoretical bound is the floor when it
    // shows none (its largest elements rounded to the same values).
    double perturbedDifference = 0;
    if (perturbed) {
        check.perturbedScaleInv = perturbed->largest();
        perturbedDifference = largestDifference(*perturbed, *reference);
    }
    check.tolerance = std::max(safetyFactor * perturbedDifference, threshold.theoretical);

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
            for (PlacedScaleBlock& placed :
                 placeScaleBlocks(record, wholeExtent, distributed.globalShape)) {
                if (placed.wholeBlock &&
                    reference->known[static_cast<std::size_t>(*placed.wholeBlock)]) {
                    blocks.push_back(
                        {copy, *placed.wholeBlock, placed.scaleInv, std::move(placed.box)});
                } else {
                    ++check.blocksNotCompared;
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
        const double referenceScale =
            reference->scales.scaleInv[static_cast<std::size_t>(b.referenceBlock)];
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
