#pragma once

#include <cstddef>

#include "ElementCompare.h"

namespace ttrace::gpu {

// `rows` rows of `width` units, `pitch` units apart, from unit `first` of a buffer: what a
// copy takes, and packs row after row where it lands. One row is a span.
struct CopyRows {
    std::size_t first = 0;
    std::size_t width = 0;
    std::size_t pitch = 0;
    std::size_t rows = 0;

    std::size_t units() const { return width * rows; }
};

// How one operand of a chunk of `rows` rows of `rowLength` crosses to the device: its words
// (in bytes; a shard's rows of a block gathered by the copy engine, not by the kernel), the
// rows of its scale table the chunk reads (in floats; none without a table), and the operand
// as the kernel reads it once `placed` at the copies. Host arithmetic only, so that what the
// device reads is tested on the host (tests/gpu/test_gpu_backend.cpp,
// copyPlansPackWhatTheKernelReads).
struct CopyPlan {
    CopyRows words;
    CopyRows scales;
    Operand device;
};

// As a chunk gives them: at least one row of at least one element, rows apart by at least a
// row (a stride of rowLength or more where rows > 1), a table's pitch at least 1. An empty
// run plans nothing.
CopyPlan planCopy(const Operand& host, std::size_t rowLength, std::size_t rows);

// The plan's operand with its words at `words` and its scale table at `scales`.
Operand placed(const CopyPlan& plan, const void* words, const float* scales);

// Copies `what` (units of `unitBytes`) from `from` into `to`, packed: as cudaMemcpy2D does,
// for the scale tables staged on the host and for the tests.
void gatherRows(const void* from, const CopyRows& what, std::size_t unitBytes, void* to);

}  // namespace ttrace::gpu
