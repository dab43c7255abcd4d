#pragma once

#include <QString>
#include <cstdint>
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

// One warning for the rejected perturbation thresholds, naming the perturbed reference's
// `perturbedFolder`, and one for the blind tensors, each naming the first few with their
// numbers.
void warnUntrustedThresholds(const std::vector<TensorResult>& results,
                             const QString& perturbedFolder, const QString& distributedFolder,
                             Diagnostics& diagnostics);

}  // namespace ttrace
