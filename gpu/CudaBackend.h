#pragma once

#include <memory>

#include "CudaDevices.h"
#include "compare/MetricsBackend.h"

namespace ttrace::gpu {

// The CUDA backend behind MetricsBackend: every GPU of `available` (which must hold at least
// one), decoded fp32 from page-locked host buffers. Errors of the device throw, and stop the
// comparison with their reason (ComparisonJob).
std::unique_ptr<MetricsBackend> makeCudaBackend(const CudaAvailability& available);

}  // namespace ttrace::gpu
