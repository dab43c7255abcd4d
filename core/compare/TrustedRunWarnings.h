#pragma once

#include <QString>
#include <optional>

#include "compare/TensorTally.h"
#include "mapping/LogicalTensor.h"
#include "trace/Diagnostic.h"

namespace ttrace {

// What a trusted run's own pieces of one tensor say against trusting it there, said of the
// trusted run (never blamed on the distributed run). `role` is "reference" or "perturbed
// reference".

// Their codes (Diagnostic::code), for the JSON report and the verdict's line.
namespace trusted_run_code {
inline constexpr QLatin1String kCopiesDiffer{"copies_differ"};
inline constexpr QLatin1String kScalesDiffer{"fp8_scales_differ"};
inline constexpr QLatin1String kRecomputedDifferently{"recomputed_differently"};
}  // namespace trusted_run_code

// A piece whose recomputation under activation checkpointing differed from its first forward:
// the run's own backward used other values, so its gradients from there on are not those of
// the forward it recorded. A warning, from the first such piece.
[[nodiscard]] std::optional<Diagnostic> recomputedDifferently(const LogicalTensor& tensor,
                                                              const QString& role);

// Copies of a shard that are not bitwise the same (a laid-out run's data-parallel replicas
// that diverged), from the tally's `copies` of this run: one diagnostic of `severity` per
// copy that differs from its shard's first, ending with `consequence`.
[[nodiscard]] Diagnostics copiesDisagree(const LogicalTensor& tensor,
                                         const TensorTally::CopyAgreements& copies,
                                         const QString& role, Severity severity,
                                         const QString& consequence);

}  // namespace ttrace
