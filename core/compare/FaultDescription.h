#pragma once

#include <QString>
#include <cstdint>
#include <vector>

#include "compare/TensorResult.h"

namespace ttrace {

// Plain-words pieces of the localization reasons, shared by the root-cause and shard rules.

// Three significant digits: "0.123", "37.5", "1.23e+03".
QString formatValue(double value);
// "1 element", "8 elements".
QString formatCount(std::int64_t elements);
// Ranks as ascending runs: "0-3, 5, 8-9". Past a dozen runs (thousands of ranks on a
// strided mesh axis) the middle ones give way to their count: "0, 8, 16, ..., 1240 (156
// ranks)", so that a line never grows with the job.
QString formatRankList(std::vector<int> ranks);
// "rank 5", "ranks 4, 5", "ranks 0-127", "no rank".
QString formatRanks(const std::vector<int>& ranks);
// The recipe the reference's scales name (recipeName): "MXFP8", "NVFP4", else "fp8", "fp4".
QString scaleRecipe(const Fp8ScaleCheck& check, DType dtype);
// "fp8 scale_inv of shard [0:24][0:16] on rank 1 is 0.73x the reference's (tolerance
// 0.0322): amax not reduced across the ranks holding the tensor?" for the worst copy, "fp8
// scale_inv of block [3:4][0:16] in shard [0:8][0:16] on rank 1 ..." where it scales per row
// or block ("fp4 ...", "MXFP8 ...", "NVFP4 ...": scaleRecipe); needs a mismatch.
QString describeScaleMismatch(const Fp8ScaleCheck& check, DType dtype);
// "recomputed by activation checkpointing on rank 1 differently from its first forward (12
// of 64 elements differ): ..." with what that means; needs a recomputation mismatch.
QString describeRecomputations(const TensorResult& result);
// Why a faulty tensor is faulty: "37.5x over the threshold (relative error 0.0412, threshold
// 0.0011)", "has 3 NaN and 0 Inf values (...)", "copies on rank 0 and rank 1 differ in ..."
// (the first two pairs, then how many more and on which ranks), the recomputations that
// differ, the fp8 scale mismatch,
// joined by "; ".
QString describeFault(const TensorResult& result);
// "within tolerance (normalized 0.12)".
QString describeWithinTolerance(const TensorResult& result);

}  // namespace ttrace
