#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "compare/Localization.h"

namespace ttrace {

// The root-cause rule of localize(): walking the faulty tensors in the reference's execution
// order, the first one whose inputs are within tolerance convicts its module. `order` holds
// every result index in that order (unknown referenceSeq last); `firstFaulty` is the fallback
// when no faulty tensor qualifies.
[[nodiscard]] std::optional<RootCause> findRootCause(const std::vector<TensorResult>& results,
                                                     const std::vector<std::size_t>& order,
                                                     std::optional<std::size_t> firstFaulty);

}  // namespace ttrace
