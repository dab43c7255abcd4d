#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "mapping/LogicalTensor.h"

namespace ttrace {

// A tensor as its run's execution order needs it: where each rank recorded a piece of it, not
// the pieces themselves, so that a trusted run of millions of pieces is ordered in a few bytes
// per piece (ComparisonPlan).
struct OrderedTensor {
    TensorKey key;
    int layer = -1;
    std::vector<std::pair<int, std::int64_t>> pieces;  // (rank, seq) of each piece
};

// The order's view of an assembled tensor: every summand of every replica of every shard.
[[nodiscard]] OrderedTensor orderedTensor(const LogicalTensor& tensor);

// The order a trace set computed its tensors in, as one sequence over all its ranks:
// positions[i] (0 to n-1) is the place of tensors[i]. Each rank records its own order
// (TensorRecord::seq); a tensor held by several ranks (replicas, shards) ties their orders
// together, and where nothing does (pipeline stages hold other layers), the data flow does: a
// micro-batch's forward goes through the stages in order (a stage is the lowest layer its rank
// holds) and its backward in reverse, so no tensor of a pass comes before the pass's earlier
// stages are done; among what is left free, earlier iterations and micro-batches go first,
// forward before backward. A single-device run's order is its own seq. Ranks that disagree (a
// cycle) are followed as far as they agree, then the earliest of what is left goes first.
[[nodiscard]] std::vector<std::int64_t> executionOrder(const std::vector<OrderedTensor>& tensors);

}  // namespace ttrace
