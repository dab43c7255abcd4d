#include "compare/StoredRun.h"

#include <cstddef>
#include <vector>

namespace ttrace {

namespace {

// The byte holding stored element `element`.
std::size_t byteOf(DType dtype, std::size_t element) {
    return element / static_cast<std::size_t>(elementsPerWord(dtype)) *
           static_cast<std::size_t>(storageBytes(dtype));
}

float scaleAt(const StoredScales& scales, std::size_t element) {
    if (scales.table == nullptr) {
        return scales.scaleInv;
    }
    const std::size_t row = element / scales.pitch;
    const std::size_t column = element - row * scales.pitch;
    const std::size_t entry =
        scales.blockColumns == 0
            ? 0
            : static_cast<std::size_t>(static_cast<std::int64_t>(column) + scales.columnShift) /
                  scales.blockColumns;
    return scales.table[row * scales.rowEntries + entry];
}

void decodeOne(const StoredWords& words, std::size_t rowLength, std::size_t rows, float* out) {
    const auto* base = static_cast<const std::byte*>(words.data);
    const auto perWord = static_cast<std::size_t>(elementsPerWord(words.dtype));
    for (std::size_t k = 0; k < rows; ++k) {
        const std::size_t first = words.origin + k * words.stride;
        float* row = out + k * rowLength;
        decode(words.dtype, base + byteOf(words.dtype, first), row, rowLength, first % perWord);
        if (isScaled(words.dtype)) {
            for (std::size_t j = 0; j < rowLength; ++j) {
                row[j] *= scaleAt(words.scales, first + j);
            }
        }
    }
}

}  // namespace

void decodeStored(const StoredWords& words, std::span<const StoredWords> more,
                  std::size_t rowLength, std::size_t rows, float* out) {
    decodeOne(words, rowLength, rows, out);
    if (more.empty()) {
        return;
    }
    const std::size_t n = rowLength * rows;
    std::vector<float> summand(n);
    for (const StoredWords& part : more) {
        decodeOne(part, rowLength, rows, summand.data());
        for (std::size_t i = 0; i < n; ++i) {
            out[i] += summand[i];
        }
    }
}

}  // namespace ttrace
