#pragma once

#include <vector>

#include "mapping/LogicalTensor.h"
#include "trace/Diagnostic.h"
#include "trace/TraceCatalog.h"
#include "trace/TraceSet.h"

namespace ttrace {

// One distributed tensor to compare, as its trace set's catalog lists it, and the trusted
// runs' tensors it is compared against: what the comparison plans with before it reads the
// tensor's records. The trusted runs' tensors are held whole on one rank or laid out like any
// distributed run's (docs/checker.md, "Distributed references").
struct PlannedTask {
    TensorKey key;
    std::vector<std::int64_t> globalShape;
    // Trace bytes it reads: every distributed piece, and every piece of the reference and
    // perturbed reference. What processes and progress are balanced by.
    std::int64_t bytes = 0;
    const LogicalTensor* reference = nullptr;
    const LogicalTensor* perturbed = nullptr;  // null when there is no usable perturbed copy
    // Its place in the reference's execution order (executionOrder).
    std::int64_t referenceSeq = -1;
};

// A distributed tensor assembled from its records, and what it is compared against.
struct ComparisonTask {
    const LogicalTensor* distributed = nullptr;
    const LogicalTensor* reference = nullptr;
    const LogicalTensor* perturbed = nullptr;  // null when there is no usable perturbed copy
};

// Matches every distributed tensor with the reference (and perturbed reference) by key.
// Tensors missing in the reference are skipped (measureCoverage names them); a reference with
// another global shape is an error for that tensor. `referenceOrder[i]` is the place of
// referenceTensors[i] in the reference's execution order.
[[nodiscard]] std::vector<PlannedTask> pairTensors(
    const std::vector<CatalogTensor>& distributed, const TraceSet& reference,
    const std::vector<LogicalTensor>& referenceTensors,
    const std::vector<std::int64_t>& referenceOrder, const TraceSet* perturbed,
    const std::vector<LogicalTensor>* perturbedTensors, Diagnostics& diagnostics);

}  // namespace ttrace
