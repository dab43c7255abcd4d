#include "HostCompare.h"

#include <vector>

#include "ElementProfile.h"
#include "ReduceRun.h"

#if defined(TTRACE_THRUST_OMP)
#include <thrust/system/omp/execution_policy.h>
#else
#include <thrust/system/cpp/execution_policy.h>
#endif

namespace ttrace::gpu {

namespace {

#if defined(TTRACE_THRUST_OMP)
const auto& kHostPolicy = thrust::omp::par;
#else
const auto& kHostPolicy = thrust::cpp::par;
#endif

}  // namespace

ErrorAccumulator compareOnHost(const RowRun& run, std::size_t maxChunkElements) {
    ErrorAccumulator total;
    forEachChunk(run.rowLength, run.rows, maxChunkElements, [&](const RowChunk& chunk) {
        const Partial partial = reduceRun(kHostPolicy, chunkOf(run, chunk));
        total.merge(toAccumulator(partial, chunk.elements(), chunk.position(run.rowLength)));
    });
    return total;
}

void profileOnHost(const ProfilePiece& piece, ErrorHistogram& histogram, ErrorImage& image,
                   std::size_t maxChunkElements) {
    const BinEdges edges = binEdges();
    forEachProfilePart(
        piece, image.width, maxChunkElements, [&](const ProfileRun& part, std::size_t) {
            const std::size_t n = part.elements();
            std::vector<int> slots(n), pixels(n), pixelsOut(n);
            std::vector<float> errors(n), maximaOut(n);
            std::vector<int> slotEnds(kHistogramSlots);
            const ProfileScratch scratch{slots.data(),     pixels.data(),    errors.data(),
                                         pixelsOut.data(), maximaOut.data(), slotEnds.data()};
            const std::size_t count = profileRun(kHostPolicy, part, edges, scratch);
            mergeProfile(slotEnds.data(), pixelsOut.data(), maximaOut.data(), count, histogram,
                         image);
        });
}

const char* hostSystemName() {
#if defined(TTRACE_THRUST_OMP)
    return "OpenMP";
#else
    return "sequential";
#endif
}

}  // namespace ttrace::gpu
