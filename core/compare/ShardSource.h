#pragma once

#include <cstddef>
#include <vector>

#include "compare/TensorResult.h"

namespace ttrace {

// Where the shards of results loaded without them come from: a stored run of thousands of
// ranks holds millions of shard copies, so the GUI loads its tensors without them and reads
// the shards of the tensors it shows when it shows them.
class ShardSource {
public:
    virtual ~ShardSource() = default;
    // Every shard copy of result `index`, in the order they were stored; empty when they
    // cannot be read.
    [[nodiscard]] virtual std::vector<ShardResult> shardsOf(std::size_t index) const = 0;
};

}  // namespace ttrace
