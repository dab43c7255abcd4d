#pragma once

#include <QString>
#include <cstdint>
#include <optional>
#include <vector>

#include "compare/TensorResult.h"
#include "trace/Diagnostic.h"

namespace ttrace {

// Thresholds a check cannot rest on, said once per check rather than once per tensor
// (docs/thresholds.md): tensors whose perturbed reference moved them further than any
// perturbation can (judged by the theoretical threshold instead), and tensors whose threshold
// is too large for any bug to show.

// The tensors of `results` whose threshold is blind (Threshold::blind).
[[nodiscard]] std::int64_t countBlind(const std::vector<TensorResult>& results);

// The perturbed reference of a check, as the warnings name it.
struct PerturbedReferenceInfo {
    QString folder;
    std::optional<double> declaredPerturbation;  // its manifest's perturbation.relative
    DType computeDtype = DType::F32;             // the distributed run's
};

// One warning for the perturbation thresholds rejected as damage (NaN, Inf, the tensor's size
// or more), one for those beyond what the declared perturbation can give, both naming the
// perturbed reference's folder, and one for the blind tensors naming `distributedFolder`;
// each names the first few tensors with their numbers.
void warnUntrustedThresholds(const std::vector<TensorResult>& results,
                             const PerturbedReferenceInfo& perturbed,
                             const QString& distributedFolder, Diagnostics& diagnostics);

}  // namespace ttrace
