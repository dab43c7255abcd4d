#pragma once

#include "compare/BackendChoice.h"

namespace ttrace {

// The CUDA backend this build offers, for chooseBackend: a probe of the machine's GPUs where
// the build has the CUDA backend (gpu/), null where it was built without nvcc.
CudaProbe cudaProbe();

}  // namespace ttrace
