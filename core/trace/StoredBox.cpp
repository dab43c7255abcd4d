#include "trace/StoredBox.h"

#include <functional>
#include <numeric>

namespace ttrace {

namespace {

std::int64_t product(std::span<const std::int64_t> extents) {
    return std::accumulate(extents.begin(), extents.end(), std::int64_t{1}, std::multiplies<>());
}

}  // namespace

std::size_t StoredBox::words() const {
    return static_cast<std::size_t>(product(count));
}

std::vector<std::int64_t> storedShape(DType dtype, std::span<const std::int64_t> shape) {
    std::vector<std::int64_t> words(shape.begin(), shape.end());
    const int per = elementsPerWord(dtype);
    if (per > 1 && !words.empty()) {
        words.back() = (words.back() + per - 1) / per;
    }
    return words;
}

std::vector<std::int64_t> elementShape(DType dtype, std::span<const std::int64_t> words) {
    std::vector<std::int64_t> shape(words.begin(), words.end());
    if (!shape.empty()) {
        shape.back() *= elementsPerWord(dtype);
    }
    return shape;
}

StoredBox storedBox(DType dtype, std::span<const std::int64_t> shape,
                    std::span<const std::int64_t> start, std::span<const std::int64_t> count) {
    StoredBox box{
        storedShape(dtype, shape), {start.begin(), start.end()}, {count.begin(), count.end()}, 0};
    const int per = elementsPerWord(dtype);
    if (per > 1 && !box.start.empty()) {
        const std::int64_t first = start.back() / per;
        const std::int64_t end = (start.back() + count.back() + per - 1) / per;
        box.skip = static_cast<std::size_t>(start.back() % per);
        box.start.back() = first;
        box.count.back() = count.back() == 0 ? 0 : end - first;
    }
    return box;
}

std::int64_t datasetBytes(DType dtype, std::span<const std::int64_t> shape) {
    return product(storedShape(dtype, shape)) * storageBytes(dtype);
}

void decodeBox(DType dtype, const StoredBox& box, std::span<const std::int64_t> count,
               const void* stored, float* out) {
    const auto elements = static_cast<std::size_t>(product(count));
    if (elementsPerWord(dtype) == 1 || count.empty()) {
        decode(dtype, stored, out, elements);
        return;
    }
    // Packed: each row of the box starts on a word of its own.
    const auto rowElements = static_cast<std::size_t>(count.back());
    const auto rowBytes = static_cast<std::size_t>(box.count.back() * storageBytes(dtype));
    const auto* in = static_cast<const std::uint8_t*>(stored);
    for (std::size_t row = 0; rowElements > 0 && row < elements / rowElements; ++row) {
        decode(dtype, in + row * rowBytes, out + row * rowElements, rowElements, box.skip);
    }
}

}  // namespace ttrace
