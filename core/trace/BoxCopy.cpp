#include "trace/BoxCopy.h"

#include <cstring>
#include <vector>

namespace ttrace {

namespace {

// Calls run(arrayOffsetBytes, runBytes) for each contiguous run of the box
// [start, start + count) of a row-major array of `shape`, in row-major order. Trailing
// dimensions the box covers whole are merged, so each run is as long as the layout allows.
template <typename Run>
void forEachRun(std::span<const std::int64_t> shape, std::span<const std::int64_t> start,
                std::span<const std::int64_t> count, std::size_t elementBytes, Run run) {
    const std::size_t rank = shape.size();
    if (rank == 0) {
        run(std::size_t{0}, elementBytes);
        return;
    }
    // Runs are contiguous from dimension `inner` on: every later dimension is taken whole.
    std::size_t inner = rank - 1;
    while (inner > 0 && start[inner] == 0 && count[inner] == shape[inner]) {
        --inner;
    }
    std::vector<std::int64_t> stride(rank, 1);  // in elements
    for (std::size_t d = rank - 1; d > 0; --d) {
        stride[d - 1] = stride[d] * shape[d];
    }
    const std::size_t runBytes =
        static_cast<std::size_t>(count[inner] * stride[inner]) * elementBytes;
    std::vector<std::int64_t> index(inner, 0);  // position among the runs, outer dimensions
    while (true) {
        std::int64_t offset = start[inner] * stride[inner];
        for (std::size_t d = 0; d < inner; ++d) {
            offset += (start[d] + index[d]) * stride[d];
        }
        run(static_cast<std::size_t>(offset) * elementBytes, runBytes);
        std::size_t d = inner;
        while (d > 0) {
            --d;
            if (++index[d] < count[d]) {
                break;
            }
            index[d] = 0;
            if (d == 0) {
                return;
            }
        }
        if (inner == 0) {
            return;
        }
    }
}

}  // namespace

void copyBox(const std::byte* array, std::span<const std::int64_t> shape,
             std::span<const std::int64_t> start, std::span<const std::int64_t> count,
             std::size_t elementBytes, std::byte* out) {
    forEachRun(shape, start, count, elementBytes, [&](std::size_t offset, std::size_t bytes) {
        std::memcpy(out, array + offset, bytes);
        out += bytes;
    });
}

void pasteBox(const std::byte* packed, std::span<const std::int64_t> shape,
              std::span<const std::int64_t> start, std::span<const std::int64_t> count,
              std::size_t elementBytes, std::byte* array) {
    forEachRun(shape, start, count, elementBytes, [&](std::size_t offset, std::size_t bytes) {
        std::memcpy(array + offset, packed, bytes);
        packed += bytes;
    });
}

std::optional<BoxRows> boxRows(std::span<const std::int64_t> shape,
                               std::span<const std::int64_t> start,
                               std::span<const std::int64_t> count) {
    const std::size_t rank = shape.size();
    std::vector<std::int64_t> stride(rank, 1);  // in elements
    for (std::size_t d = rank; d-- > 1;) {
        stride[d - 1] = stride[d] * shape[d];
    }
    BoxRows rows;
    // The runs: every dimension the box takes whole, from the last, and the one before them.
    std::size_t inner = rank;
    while (inner > 0) {
        --inner;
        rows.runLength *= count[inner];
        if (count[inner] != shape[inner]) {
            break;
        }
    }
    for (std::size_t d = 0; d < rank; ++d) {
        rows.offset += start[d] * stride[d];
    }
    // The outer dimensions step by one stride when, after the first that has more than one
    // index, each is taken whole.
    bool stepping = false;
    for (std::size_t d = 0; d < inner; ++d) {
        if (stepping && count[d] != shape[d]) {
            return std::nullopt;
        }
        if (count[d] > 1) {
            stepping = true;
        }
        rows.rows *= count[d];
    }
    if (inner > 0) {
        rows.stride = stride[inner - 1];
    }
    return rows;
}

}  // namespace ttrace
