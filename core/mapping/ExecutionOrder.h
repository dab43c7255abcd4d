#pragma once

#include <cstdint>
#include <vector>

#include "mapping/LogicalTensor.h"

namespace ttrace {

// The order a trace set computed its tensors in, as one sequence over all its ranks:
// positions[i] (0 to n-1) is the place of tensors[i]. Each rank records its own order
// (TensorRecord::seq); a tensor held by several ranks (replicas, shards) ties their orders
// together, and where nothing does (pipeline stages hold other layers), the data flow does: a
// micro-batch's forward goes through the stages in order (a stage is the lowest layer its rank
// holds) and its backward in reverse, so no tensor of a pass comes before the pass's earlier
// stages are done; among what is left free, earlier iterations and micro-batches go first,
// forward before backward. A single-device run's order is its own seq. Ranks that disagree (a
// cycle) are followed as far as they agree, then the earliest of what is left goes first.
[[nodiscard]] std::vector<std::int64_t> executionOrder(const std::vector<LogicalTensor>& tensors);

}  // namespace ttrace
