#include "RowChunks.h"

#include <algorithm>

namespace ttrace::gpu {

void forEachChunk(std::size_t referenceStride, std::size_t rowLength, std::size_t rows,
                  std::size_t maxElements, const std::function<void(const RowChunk&)>& visit) {
    maxElements = std::clamp<std::size_t>(maxElements, 1, kMaxChunkElements);
    if (rowLength == 0 || rows == 0) {
        return;
    }
    if (rowLength <= maxElements) {
        const std::size_t rowsPerChunk = maxElements / rowLength;
        for (std::size_t first = 0; first < rows; first += rowsPerChunk) {
            RowChunk chunk;
            chunk.referenceStart = first * referenceStride;
            chunk.distributedStart = first * rowLength;
            chunk.rowLength = rowLength;
            chunk.rows = std::min(rowsPerChunk, rows - first);
            visit(chunk);
        }
        return;
    }
    for (std::size_t row = 0; row < rows; ++row) {
        for (std::size_t start = 0; start < rowLength; start += maxElements) {
            RowChunk chunk;
            chunk.referenceStart = row * referenceStride + start;
            chunk.distributedStart = row * rowLength + start;
            chunk.rowLength = std::min(maxElements, rowLength - start);
            chunk.rows = 1;
            visit(chunk);
        }
    }
}

Operand advanced(Operand operand, std::size_t start) {
    operand.data = static_cast<const std::byte*>(operand.data) +
                   start * static_cast<std::size_t>(storedBytes(operand.type));
    return operand;
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
