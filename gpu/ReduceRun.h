#pragma once

#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform_reduce.h>

#include <cstdint>

#include "ElementCompare.h"

namespace ttrace::gpu {

// The reduction of one run of at most kMaxChunkElements elements under a Thrust execution
// policy: the CUDA system on the GPU (CudaEngine.cu), a host system in CI (HostCompare.cpp).
// One source, so that what CI checks against the CPU backend is what runs on the device.
template <class Policy>
Partial reduceRun(const Policy& policy, const RowRun& run) {
    const auto n = static_cast<std::uint32_t>(run.elements());
    return thrust::transform_reduce(policy, thrust::counting_iterator<std::uint32_t>(0),
                                    thrust::counting_iterator<std::uint32_t>(n), PairAt{run},
                                    Partial{}, CombinePartials{});
}

}  // namespace ttrace::gpu
