#include "HostCompare.h"

#include "ReduceRun.h"

#if defined(TTRACE_THRUST_OMP)
#include <thrust/system/omp/execution_policy.h>
#else
#include <thrust/system/cpp/execution_policy.h>
#endif

namespace ttrace::gpu {

ErrorAccumulator compareOnHost(const RowRun& run, std::size_t maxChunkElements) {
    ErrorAccumulator total;
    forEachChunk(run.referenceStride, run.rowLength, run.rows, maxChunkElements,
                 [&](const RowChunk& chunk) {
                     RowRun part;
                     part.reference = advanced(run.reference, chunk.referenceStart);
                     part.distributed = advanced(run.distributed, chunk.distributedStart);
                     part.referenceStride = run.referenceStride;
                     part.rowLength = chunk.rowLength;
                     part.rows = chunk.rows;
#if defined(TTRACE_THRUST_OMP)
                     const Partial partial = reduceRun(thrust::omp::par, part);
#else
                     const Partial partial = reduceRun(thrust::cpp::par, part);
#endif
                     total.merge(toAccumulator(partial, chunk.elements(), chunk.distributedStart));
                 });
    return total;
}

const char* hostSystemName() {
#if defined(TTRACE_THRUST_OMP)
    return "OpenMP";
#else
    return "sequential";
#endif
}

}  // namespace ttrace::gpu
