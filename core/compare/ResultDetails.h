#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "compare/TensorResult.h"

namespace ttrace {

// Where the per-shard and per-rank parts of results loaded without them come from: a stored
// run of thousands of ranks holds millions of shard copies and rank sequence numbers, so the
// GUI and the checker load its tensors without them and read those of a tensor when they
// show or report it.
class ResultDetails {
public:
    virtual ~ResultDetails() = default;
    // Every shard copy of result `index`, in the order they were stored; empty when they
    // cannot be read.
    [[nodiscard]] virtual std::vector<ShardResult> shardsOf(std::size_t index) const = 0;
    // Result `index`'s position in each rank's own execution order (TensorResult::rankSeq);
    // empty when it cannot be read.
    [[nodiscard]] virtual std::map<int, std::int64_t> rankSeqOf(std::size_t index) const = 0;
};

}  // namespace ttrace
