#pragma once

#include <optional>

#include "compare/TensorResult.h"
#include "compare/Threshold.h"
#include "compare/WholeScales.h"
#include "mapping/LogicalTensor.h"

namespace ttrace {

// The fp8 scale check of one tensor (docs/thresholds.md, "fp8 scales"). A recipe scales per
// tensor, per row or per block (BlockScales); each block of each copy of the distributed
// tensor is held to the scale of the reference's block that contains it, within
//     max(safetyFactor * max |perturbed / reference - 1| over blocks, floor),
// `floor` being the theoretical bound of the compute dtype's round-off.
// Per tensor, the reference's block is the whole tensor: every shard must carry its scale.
// Copies that data-parallel axes split (isDataParallelAxis) hold other samples, which each
// rank quantizes with its own scales: inside a reference block they split, copies are held to
// those of their own samples only (the largest of their scales), and blocks scaled otherwise
// than the reference's are counted (Fp8ScaleCheck::dataParallelBlocks), not faults.
// When the copies' blocks inside one reference block disagree on their scale, a block beyond
// the tolerance is a mismatch, whatever its values (its amax was not reduced over the ranks
// holding parts of the block); when they all carry one scale, a difference from the
// reference's is one of values, left to the value comparison. A copy scaled per row or block
// whose blocks lie across several of the reference's is a mismatch whatever its scales
// (ScaleMismatch::acrossReferenceBlocks): shards cut blocks, they never join them. Copies that
// are partial sums are skipped (a summand's scale is not the sum's), and so are blocks of a
// copy scaled per tensor against a reference scaled per row or block (another recipe) and
// blocks inside one the reference's pieces do not show. The trusted runs' scales
// are their whole tensors' (assembleWholeScales); nullopt unless the distributed tensor is fp8
// and the reference has them.
[[nodiscard]] std::optional<Fp8ScaleCheck> checkFp8Scales(
    const LogicalTensor& distributed, const std::optional<WholeScales>& reference,
    const std::optional<WholeScales>& perturbed, double floor, double safetyFactor);

}  // namespace ttrace
