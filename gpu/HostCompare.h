#pragma once

#include <cstddef>

#include "RowChunks.h"
#include "compare/ElementErrors.h"

namespace ttrace::gpu {

// The CUDA backend's reduction (ReduceRun.h) run on the host through Thrust's OpenMP system
// (its sequential one where OpenMP is missing), chunk by chunk as on the device: how CI checks
// the GPU's algorithm against the CPU backend without a GPU. `maxChunkElements` is the
// device's chunk; tests make it small to exercise the merging of chunks.
ErrorAccumulator compareOnHost(const RowRun& run, std::size_t maxChunkElements = kMaxChunkElements);

// The element-error profile of `piece` (ElementProfile.h) on the host, the same way: what CI
// checks against the CPU backend's profile.
void profileOnHost(const ProfilePiece& piece, ErrorHistogram& histogram, ErrorImage& image,
                   std::size_t maxChunkElements = kMaxChunkElements);

// The Thrust host system compareOnHost runs on: "OpenMP" or "sequential".
const char* hostSystemName();

}  // namespace ttrace::gpu
