#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "trace/DType.h"

namespace ttrace {

// The stored words that hold a box of elements of a dataset. For every dtype but fp4 a word
// is an element and the box is the same; fp4 packs two elements a byte along the last
// dimension (trace-format.md), so the box's last dimension is rounded out to whole bytes and
// `skip` says how many elements of each row's first byte lie before the box.
struct StoredBox {
    std::vector<std::int64_t> shape;  // the HDF5 dataset's extent, in words
    std::vector<std::int64_t> start;
    std::vector<std::int64_t> count;
    std::size_t skip = 0;

    std::size_t words() const;
};

// The dataset's extent in words, from its shape in elements (localShape).
std::vector<std::int64_t> storedShape(DType dtype, std::span<const std::int64_t> shape);
// The dataset's shape in elements, from its HDF5 extent in words.
std::vector<std::int64_t> elementShape(DType dtype, std::span<const std::int64_t> words);
StoredBox storedBox(DType dtype, std::span<const std::int64_t> shape,
                    std::span<const std::int64_t> start, std::span<const std::int64_t> count);
// Bytes a dataset of `shape` (in elements) stores.
std::int64_t datasetBytes(DType dtype, std::span<const std::int64_t> shape);

// Decodes the box's stored words (row-major, as readStored leaves them) into its elements,
// row-major, unscaled.
void decodeBox(DType dtype, const StoredBox& box, std::span<const std::int64_t> count,
               const void* stored, float* out);

}  // namespace ttrace
