#pragma once

#include <cstdint>
#include <vector>

namespace ttrace {

// Splits tasks of the given sizes (estimated bytes) over `parts` processes, balanced greedily:
// largest task first, each to the least loaded part (lowest index on ties, task order on
// equal sizes). Deterministic, so that every process computes the same split on its own.
// Returns, per part, its task indices in ascending order.
[[nodiscard]] std::vector<std::vector<std::size_t>> partitionTasks(
    const std::vector<std::int64_t>& taskBytes, int parts);

}  // namespace ttrace
