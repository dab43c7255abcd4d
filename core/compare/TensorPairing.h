#pragma once

#include <vector>

#include "mapping/LogicalTensor.h"
#include "trace/Diagnostic.h"
#include "trace/TraceCatalog.h"
#include "trace/TraceSet.h"

namespace ttrace {

// One distributed tensor to compare, as its trace set's catalog lists it, and the
// whole-tensor records it is compared against: what the comparison plans with before it reads
// the tensor's records.
struct PlannedTask {
    TensorKey key;
    std::vector<std::int64_t> globalShape;
    // Trace bytes it reads: every distributed piece, and the reference and perturbed
    // reference once (shards tile the tensor). What processes and progress are balanced by.
    std::int64_t bytes = 0;
    const TensorRecord* reference = nullptr;
    const TensorRecord* perturbed = nullptr;  // null when there is no usable perturbed copy
};

// A distributed tensor assembled from its records, and what it is compared against.
struct ComparisonTask {
    const LogicalTensor* distributed = nullptr;
    const TensorRecord* reference = nullptr;
    const TensorRecord* perturbed = nullptr;  // null when there is no usable perturbed copy
};

// Matches every distributed tensor with the reference (and perturbed reference) by key.
// Tensors missing in the reference are skipped (measureCoverage names them); a reference that does
// not hold the tensor whole, or with another global shape, is an error for that tensor.
[[nodiscard]] std::vector<PlannedTask> pairTensors(
    const std::vector<CatalogTensor>& distributed, const TraceSet& reference,
    const std::vector<LogicalTensor>& referenceTensors, const TraceSet* perturbed,
    const std::vector<LogicalTensor>* perturbedTensors, Diagnostics& diagnostics);

}  // namespace ttrace
