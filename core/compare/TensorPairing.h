#pragma once

#include <vector>

#include "compare/TrustedRun.h"
#include "mapping/LogicalTensor.h"
#include "trace/Diagnostic.h"
#include "trace/TraceCatalog.h"

namespace ttrace {

// One distributed tensor to compare, as its trace set's catalog lists it, and the trusted
// runs' tensors it is compared against, as their outlines list them: what the comparison plans
// with before it reads any of their records. The trusted runs' tensors are held whole on one
// rank or laid out like any distributed run's (docs/checker.md, "Distributed references").
struct PlannedTask {
    TensorKey key;
    std::vector<std::int64_t> globalShape;
    // Trace bytes it reads: every distributed piece, and every piece of the reference and
    // perturbed reference. What processes and progress are balanced by.
    std::int64_t bytes = 0;
    const TrustedTensor* reference = nullptr;
    const TrustedTensor* perturbed = nullptr;  // null when there is no usable perturbed copy
};

// A distributed tensor and the trusted runs' copies, each assembled from its records.
struct ComparisonTask {
    const LogicalTensor* distributed = nullptr;
    const LogicalTensor* reference = nullptr;
    const LogicalTensor* perturbed = nullptr;  // null when there is no usable perturbed copy
};

// Matches every distributed tensor with the reference (and perturbed reference) by key.
// Tensors missing in the reference are skipped (measureCoverage names them); a reference with
// another global shape is an error for that tensor.
[[nodiscard]] std::vector<PlannedTask> pairTensors(const std::vector<CatalogTensor>& distributed,
                                                   const TrustedRun& reference,
                                                   const TrustedRun* perturbed,
                                                   Diagnostics& diagnostics);

}  // namespace ttrace
