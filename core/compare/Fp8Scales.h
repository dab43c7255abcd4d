#pragma once

#include <optional>

#include "compare/TensorPairing.h"
#include "compare/TensorResult.h"
#include "compare/Threshold.h"

namespace ttrace {

// The fp8 scale check of one tensor (docs/thresholds.md, "fp8 scales"). With per-tensor
// scaling every shard is quantized with the scale of the whole tensor, so each copy's
// scale_inv must match the reference's within
//     max(safetyFactor * |perturbed / reference - 1|, threshold.theoretical).
// When the copies disagree on their scale, a copy beyond it is a mismatch, whatever its
// values; when they all carry one scale, the amax was reduced and a difference from the
// reference's is one of values, left to the value comparison. Copies that are partial sums are
// skipped (a summand's scale is not the sum's). nullopt unless the distributed tensor and the
// reference are both fp8.
[[nodiscard]] std::optional<Fp8ScaleCheck> checkFp8Scales(const ComparisonTask& task,
                                                          const Threshold& threshold,
                                                          double safetyFactor);

}  // namespace ttrace
