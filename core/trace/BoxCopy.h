#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace ttrace {

// Copies the box [start, start + count) of a row-major array of `shape` (elements of
// `elementBytes` bytes starting at `array`) into `out`, packed row-major. Trailing dimensions
// the box covers whole are merged, so each copy is as long as the layout allows.
void copyBox(const std::byte* array, std::span<const std::int64_t> shape,
             std::span<const std::int64_t> start, std::span<const std::int64_t> count,
             std::size_t elementBytes, std::byte* out);

}  // namespace ttrace
