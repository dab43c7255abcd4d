#include "RowChunks.h"

#include <algorithm>

namespace ttrace::gpu {

void forEachChunk(std::size_t rowLength, std::size_t rows, std::size_t maxElements,
                  const std::function<void(const RowChunk&)>& visit) {
    maxElements = std::clamp<std::size_t>(maxElements, 1, kMaxChunkElements);
    if (rowLength == 0 || rows == 0) {
        return;
    }
    if (rowLength <= maxElements) {
        const std::size_t rowsPerChunk = maxElements / rowLength;
        for (std::size_t first = 0; first < rows; first += rowsPerChunk) {
            visit(RowChunk{first, 0, rowLength, std::min(rowsPerChunk, rows - first)});
        }
        return;
    }
    for (std::size_t row = 0; row < rows; ++row) {
        for (std::size_t start = 0; start < rowLength; start += maxElements) {
            visit(RowChunk{row, start, std::min(maxElements, rowLength - start), 1});
        }
    }
}

Operand advanced(Operand operand, std::size_t row, std::size_t column) {
    operand.origin += row * operand.stride + column;
    operand.scaleOrigin += row * operand.scaleStride + column;
    return operand;
}

RowRun chunkOf(const RowRun& run, const RowChunk& chunk) {
    RowRun part = run;
    part.reference = advanced(run.reference, chunk.firstRow, chunk.firstColumn);
    part.distributed = advanced(run.distributed, chunk.firstRow, chunk.firstColumn);
    for (int s = 0; s + 1 < run.referenceSummands; ++s) {
        part.moreReference[s] = advanced(run.moreReference[s], chunk.firstRow, chunk.firstColumn);
    }
    for (int s = 0; s + 1 < run.distributedSummands; ++s) {
        part.moreDistributed[s] =
            advanced(run.moreDistributed[s], chunk.firstRow, chunk.firstColumn);
    }
    part.rowLength = chunk.rowLength;
    part.rows = chunk.rows;
    return part;
}

ErrorAccumulator toAccumulator(const Partial& partial, std::size_t elements, std::size_t offset) {
    ErrorAccumulator acc;
    acc.count = static_cast<std::int64_t>(elements);
    acc.sumSqDiff = partial.sumSqDiff;
    acc.sumSqRef = partial.sumSqRef;
    acc.sumSqDist = partial.sumSqDist;
    acc.sumDot = partial.sumDot;
    if (partial.maxAbsAt != Partial::kNone) {
        acc.maxAbsError = partial.maxAbs;
        acc.maxAbsPos = static_cast<std::int64_t>(offset + partial.maxAbsAt);
    }
    if (partial.maxRelAt != Partial::kNone) {
        acc.maxRelError = partial.maxRel;
        acc.maxRelPos = static_cast<std::int64_t>(offset + partial.maxRelAt);
    }
    acc.zeroRefMismatches = partial.zeroRefMismatches;
    acc.bitDifferences = partial.bitDifferences;
    acc.nanRef = partial.nanRef;
    acc.infRef = partial.infRef;
    acc.nanDist = partial.nanDist;
    acc.infDist = partial.infDist;
    return acc;
}

}  // namespace ttrace::gpu
