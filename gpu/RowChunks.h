#pragma once

#include <cstddef>
#include <functional>

#include "ElementCompare.h"
#include "compare/ErrorMetrics.h"

namespace ttrace::gpu {

// Positions inside one reduction are 32-bit (Partial), and a device holds a bounded buffer:
// a comparison of any size goes through in chunks of at most this many elements.
inline constexpr std::size_t kMaxChunkElements = std::size_t{1} << 30;

// One chunk of a RowRun: its rows (or, for rows longer than a chunk, a piece of one row), by
// the run's row and column of its first element.
struct RowChunk {
    std::size_t firstRow = 0;
    std::size_t firstColumn = 0;
    std::size_t rowLength = 0;
    std::size_t rows = 0;

    std::size_t elements() const { return rowLength * rows; }
    // The offset of its first element among D's positions, in a run of `runRowLength`.
    std::size_t position(std::size_t runRowLength) const {
        return firstRow * runRowLength + firstColumn;
    }
};

// Calls `visit` for each chunk of at most `maxElements` elements of a run of `rows` rows of
// `rowLength`, in order: whole rows where a row fits, else pieces of each row.
void forEachChunk(std::size_t rowLength, std::size_t rows, std::size_t maxElements,
                  const std::function<void(const RowChunk&)>& visit);

// `operand` seen from the run's element (row, column) on.
Operand advanced(Operand operand, std::size_t row, std::size_t column);

// The part of `run` a chunk covers, as a run of its own.
RowRun chunkOf(const RowRun& run, const RowChunk& chunk);

// A chunk's Partial as an accumulator of `elements` elements whose positions start at `offset`.
ErrorAccumulator toAccumulator(const Partial& partial, std::size_t elements, std::size_t offset);

}  // namespace ttrace::gpu
