#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "compare/Localization.h"

namespace ttrace {

// The shard rule of localize(): within one faulty tensor, the copy that differs from the
// majority of its replicas, else the shard whose normalized error stands out (above 1 and
// about 4x the median of the others, or the only one above 1). When none stands out the
// reason says so and `ranks` lists every rank of the tensor. nullopt when the result has no
// shards.
[[nodiscard]] std::optional<FaultyShard> findFaultyShard(const std::vector<TensorResult>& results,
                                                         std::size_t result);

// How far above the median of the other shards one must be to stand out.
inline constexpr double kShardStandOutRatio = 4.0;

}  // namespace ttrace
