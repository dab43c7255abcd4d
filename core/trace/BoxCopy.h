#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace ttrace {

// Copies the box [start, start + count) of a row-major array of `shape` (elements of
// `elementBytes` bytes starting at `array`) into `out`, packed row-major. Trailing dimensions
// the box covers whole are merged, so each copy is as long as the layout allows.
void copyBox(const std::byte* array, std::span<const std::int64_t> shape,
             std::span<const std::int64_t> start, std::span<const std::int64_t> count,
             std::size_t elementBytes, std::byte* out);

// The reverse: writes `packed` (the box's elements, row-major) into the box [start,
// start + count) of the row-major array of `shape` at `array`.
void pasteBox(const std::byte* packed, std::span<const std::int64_t> shape,
              std::span<const std::int64_t> start, std::span<const std::int64_t> count,
              std::size_t elementBytes, std::byte* array);

// A box of a row-major array as equally spaced runs: run k is the `runLength` elements from
// offset + k * stride (in elements).
struct BoxRows {
    std::int64_t offset = 0;
    std::int64_t stride = 1;
    std::int64_t runLength = 1;
    std::int64_t rows = 1;
};

// The box [start, start + count) as equally spaced runs, which it is when the dimensions
// outside its longest runs step by one stride (a column range of a matrix, for instance);
// nullopt when they do not (a box cut in two outer dimensions).
std::optional<BoxRows> boxRows(std::span<const std::int64_t> shape,
                               std::span<const std::int64_t> start,
                               std::span<const std::int64_t> count);

}  // namespace ttrace
