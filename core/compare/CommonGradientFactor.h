#pragma once

#include <cstdint>
#include <vector>

#include "compare/TensorResult.h"
#include "trace/Diagnostic.h"
#include "trace/TensorKey.h"

namespace ttrace {

// A factor common to every parameter gradient of an iteration: the distributed run's gradients
// are alpha times the reference's. Gradient clipping multiplies all of them by
// max_norm / ||g||, and the total norm ||g|| is a sum of millions of squares that the
// distributed run adds in another order than the reference: its round-off (about sqrt(N) u,
// relative) moves every gradient alike, by far more than the perturbed reference shows, which
// adds them in the reference's order (docs/thresholds.md, "A factor common to the gradients").
struct CommonGradientFactor {
    int iteration = 0;
    TensorKind kind = TensorKind::ParamGrad;  // param_grad or main_grad
    double factor = 1;                        // alpha: the median of the gradients' own fits
    double bound = 0;           // the largest |alpha - 1| a norm's round-off explains: 4 sqrt(N) u
    std::int64_t elements = 0;  // N: the gradients' elements
    int tensors = 0;            // the gradients fitted
    double scatter = 0;         // the median |own factor - alpha| of the gradients
    // Removed: the gradients faulty by their measured error that are within tolerance beyond
    // the factor.
    int acceptedBeyond = 0;
    // The parameters updated by this iteration's step (updated_param, and param of the next
    // iteration) within tolerance only by the step allowance the removed factor gives them
    // (Threshold::stepAllowance).
    int updatesAccepted = 0;
    // |alpha - 1| <= bound and at least 3 scatters: common to the gradients and explained by
    // their norm's round-off, so each gradient is judged beyond it.
    bool removed() const;
};

// Fits the factor of each iteration's param_grad and main_grad tensors, and where it is
// within the bound, judges each of them (and its shards) by its error beyond the factor:
// TensorResult::commonFactor and normalizedError. The parameters updated from such gradients
// get a threshold of at least the factor's share of their step (Threshold::stepAllowance).
// Every fit is returned, removed or not.
std::vector<CommonGradientFactor> removeCommonGradientFactors(std::vector<TensorResult>& results);

// A note for each removed factor that accepted a gradient, naming the factor, its bound and
// the gradients (Severity::Info, for `folder`, the distributed run's).
[[nodiscard]] Diagnostics describeRemovedFactors(const std::vector<CommonGradientFactor>& fits,
                                                 const QString& folder);

// The shards of a result judged like it, by its threshold and beyond its factor (shards read
// later, from the results store, carry the errors normalized as measured).
void judgeShards(std::vector<ShardResult>& shards, const TensorResult& result);

}  // namespace ttrace
