#pragma once

#include "ElementCompare.h"
#include "compare/StoredRun.h"

namespace ttrace::gpu {

// The reduction's view of a run of stored words the comparison job read (MetricsBackend::
// compareStored): the same words and scale table, nothing decoded.
RowRun rowRunOf(const StoredRun& run);

// fp32 values in host memory, row k at values + k * stride.
Operand floatsAt(const float* values, std::size_t stride);

}  // namespace ttrace::gpu
