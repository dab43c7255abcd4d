#pragma once

#include <cstdint>
#include <vector>

#include "mapping/LogicalTensor.h"

namespace ttrace {

// The order a trace set computed its tensors in, as one sequence over all its ranks:
// positions[i] (0 to n-1) is the place of tensors[i]. Each rank records its own order
// (TensorRecord::seq); a tensor held by several ranks (replicas, shards) ties their orders
// together, and where nothing does (pipeline stages hold other layers), the order is the data
// flow's: per iteration and micro-batch, forward before backward, forward through the stages
// that hold lower layers first and backward through them last. A single-device run's order is
// its own seq. Ranks that disagree (a cycle) are followed as far as they agree, then the
// earliest of what is left by that rule goes first.
[[nodiscard]] std::vector<std::int64_t> executionOrder(const std::vector<LogicalTensor>& tensors);

}  // namespace ttrace
