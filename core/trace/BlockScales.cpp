#include "trace/BlockScales.h"

#include <algorithm>

#include "trace/StoredBox.h"

namespace ttrace {

std::vector<std::int64_t> BlockScales::grid(std::span<const std::int64_t> shape) const {
    std::vector<std::int64_t> blocks(shape.size(), 1);
    for (std::size_t d = 0; d < shape.size() && d < block.size(); ++d) {
        blocks[d] = (shape[d] + block[d] - 1) / block[d];
    }
    return blocks;
}

void BlockScales::apply(std::span<const std::int64_t> shape, std::span<const std::int64_t> start,
                        std::span<const std::int64_t> count, float* out) const {
    const std::size_t rank = shape.size();
    std::int64_t elements = 1;
    for (const auto c : count) {
        elements *= c;
    }
    if (elements == 0) {
        return;
    }
    if (perTensor() || rank == 0) {
        const auto scale = static_cast<float>(scaleInv.front());
        std::for_each(out, out + elements, [scale](float& v) { v *= scale; });
        return;
    }
    const auto blocks = grid(shape);
    const std::size_t last = rank - 1;
    std::vector<std::int64_t> at(last, 0);  // the row's position in the box, leading dimensions
    for (std::int64_t rowStart = 0; rowStart < elements; rowStart += count[last]) {
        std::int64_t leading = 0;  // flat index of the row's block over the leading dimensions
        for (std::size_t d = 0; d < last; ++d) {
            leading = leading * blocks[d] + (start[d] + at[d]) / block[d];
        }
        // Along the row, one scale per run of elements in the same block.
        for (std::int64_t j = 0; j < count[last];) {
            const std::int64_t b = (start[last] + j) / block[last];
            const std::int64_t end = std::min(count[last], (b + 1) * block[last] - start[last]);
            const auto scale = static_cast<float>(scaleInv[leading * blocks[last] + b]);
            for (; j < end; ++j) {
                out[rowStart + j] *= scale;
            }
        }
        for (std::size_t d = last; d-- > 0;) {
            if (++at[d] < count[d]) {
                break;
            }
            at[d] = 0;
        }
    }
}

StoredScales BlockScales::boxScales(DType dtype, std::span<const std::int64_t> shape,
                                    std::span<const std::int64_t> start,
                                    std::span<const std::int64_t> count,
                                    std::vector<float>& table) const {
    StoredScales out;
    table.clear();
    const std::size_t rank = shape.size();
    if (perTensor() || rank == 0) {
        out.scaleInv = static_cast<float>(scaleInv.front());
        return out;
    }
    const StoredBox words = storedBox(dtype, shape, start, count);
    const std::size_t last = rank - 1;
    out.pitch = static_cast<std::size_t>(words.count[last] * elementsPerWord(dtype));
    std::int64_t rows = 1;
    for (std::size_t d = 0; d < last; ++d) {
        rows *= count[d];
    }
    if (rows == 0 || count[last] == 0) {
        return out;
    }
    const auto blocks = grid(shape);
    const std::int64_t width = block[last];
    const std::int64_t firstBlock = start[last] / width;
    const std::int64_t entries = (start[last] + count[last] - 1) / width - firstBlock + 1;
    table.resize(static_cast<std::size_t>(rows * entries));
    std::vector<std::int64_t> at(last, 0);  // the row's position in the box, leading dimensions
    for (std::int64_t row = 0; row < rows; ++row) {
        std::int64_t leading = 0;
        for (std::size_t d = 0; d < last; ++d) {
            leading = leading * blocks[d] + (start[d] + at[d]) / block[d];
        }
        for (std::int64_t e = 0; e < entries; ++e) {
            table[static_cast<std::size_t>(row * entries + e)] =
                static_cast<float>(scaleInv[leading * blocks[last] + firstBlock + e]);
        }
        for (std::size_t d = last; d-- > 0;) {
            if (++at[d] < count[d]) {
                break;
            }
            at[d] = 0;
        }
    }
    out.table = table.data();
    out.rowEntries = static_cast<std::size_t>(entries);
    out.blockColumns = static_cast<std::size_t>(width);
    // Stored column c is the dataset's column start - skip + c.
    out.columnShift = start[last] % width - static_cast<std::int64_t>(words.skip);
    return out;
}

}  // namespace ttrace
