#pragma once

#include <vector>

#include "mapping/LogicalTensor.h"
#include "trace/Diagnostic.h"
#include "trace/TraceSet.h"

namespace ttrace {

// One distributed tensor and the whole-tensor records it is compared against.
struct ComparisonTask {
    const LogicalTensor* distributed = nullptr;
    const TensorRecord* reference = nullptr;
    const TensorRecord* perturbed = nullptr;  // null when there is no usable perturbed copy
};

// Matches every distributed tensor with the reference (and perturbed reference) by key.
// Tensors missing in the reference are skipped with a warning; a reference that does not
// hold the tensor whole, or with another global shape, is an error for that tensor.
[[nodiscard]] std::vector<ComparisonTask> pairTensors(
    const std::vector<LogicalTensor>& distributed, const TraceSet& reference,
    const std::vector<LogicalTensor>& referenceTensors, const TraceSet* perturbed,
    const std::vector<LogicalTensor>* perturbedTensors, Diagnostics& diagnostics);

}  // namespace ttrace
