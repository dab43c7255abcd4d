#pragma once

#include <memory>

#include "CudaDevices.h"
#include "compare/MetricsBackend.h"

namespace ttrace::gpu {

// The CUDA backend behind MetricsBackend: every GPU of `available` (which must hold at least
// one). It takes stored words (compareStored): bf16, fp8 and fp4 cross PCIe at their own width
// with their scales, and are decoded on the device. Errors of the device throw, and stop the
// comparison with their reason (ComparisonJob).
std::unique_ptr<MetricsBackend> makeCudaBackend(const CudaAvailability& available);

}  // namespace ttrace::gpu
