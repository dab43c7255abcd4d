#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "compare/Localization.h"

namespace ttrace {

// The shard rule of localize(): within one faulty tensor, the copy that differs from the
// majority of its replicas, else the shard whose normalized error stands out (above 1 and
// about 4x the median of the others, or the only one above 1), `ranks` naming every copy
// above 1 with it. When none stands out the reason says so, and whether the shards' errors
// agree, and `ranks` lists every rank of the tensor. nullopt when the result has no
// shards.
[[nodiscard]] std::optional<FaultyShard> findFaultyShard(const std::vector<TensorResult>& results,
                                                         std::size_t result);

// How far above the median of the other shards one must be to stand out.
inline constexpr double kShardStandOutRatio = 4.0;
// How far apart the shards' errors may be for an error that no shard carries alone to be
// called common to the ranks.
inline constexpr double kCommonErrorSpread = 2.0;

}  // namespace ttrace
