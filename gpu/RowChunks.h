#pragma once

#include <cstddef>
#include <functional>

#include "ElementCompare.h"
#include "compare/ErrorMetrics.h"

namespace ttrace::gpu {

// Positions inside one reduction are 32-bit (Partial), and a device holds a bounded buffer:
// a comparison of any size goes through in chunks of at most this many elements.
inline constexpr std::size_t kMaxChunkElements = std::size_t{1} << 30;

// One chunk of a RowRun: its rows (or, for rows longer than a chunk, a piece of one row), where
// they start in R and D (elements), and the offset of its first element among D's positions.
struct RowChunk {
    std::size_t referenceStart = 0;
    std::size_t distributedStart = 0;
    std::size_t rowLength = 0;
    std::size_t rows = 0;

    std::size_t elements() const { return rowLength * rows; }
    // Elements of R the chunk spans, strides included: what a device copy of it must hold.
    std::size_t referenceSpan(std::size_t referenceStride) const {
        return rows == 0 ? 0 : (rows - 1) * referenceStride + rowLength;
    }
};

// Calls `visit` for each chunk of at most `maxElements` elements, in order: whole rows where a
// row fits, else pieces of each row. Both are contiguous in D.
void forEachChunk(std::size_t referenceStride, std::size_t rowLength, std::size_t rows,
                  std::size_t maxElements, const std::function<void(const RowChunk&)>& visit);

// The run `operand` from element `start` on.
Operand advanced(Operand operand, std::size_t start);

// A chunk's Partial as an accumulator of `elements` elements whose positions start at `offset`.
ErrorAccumulator toAccumulator(const Partial& partial, std::size_t elements, std::size_t offset);

}  // namespace ttrace::gpu
