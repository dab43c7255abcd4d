#pragma once

#include <optional>

#include "ElementCompare.h"
#include "compare/StoredRun.h"

namespace ttrace::gpu {

// The reduction's view of a run of stored words the comparison job read (MetricsBackend::
// compareStored): the same words and scale tables, nothing decoded. Nothing where a side has
// more than kMaxSummands summands.
std::optional<RowRun> rowRunOf(const StoredRun& run);

// fp32 values in host memory, row k at values + k * stride.
Operand floatsAt(const float* values, std::size_t stride);

}  // namespace ttrace::gpu
