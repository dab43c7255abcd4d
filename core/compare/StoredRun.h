#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "trace/BlockScales.h"
#include "trace/DType.h"

namespace ttrace {

// One side of a comparison in its stored words. Element (k, j) of a run is stored element
// origin + k * stride + j of `data` (fp4: a nibble, the first of a byte in its low bits) and of
// the box the scales describe. Unscaled dtypes ignore `scales`; fp32 words are the values.
struct StoredWords {
    const void* data = nullptr;
    DType dtype = DType::F32;
    std::size_t origin = 0;
    std::size_t stride = 0;
    StoredScales scales;
};

// `rows` runs of `rowLength` elements of R and of D, in their stored words: what
// MetricsBackend::compareStored compares. Positions are offsets into D seen packed,
// k * rowLength + j.
struct StoredRun {
    StoredWords reference;
    StoredWords distributed;
    std::size_t rowLength = 0;
    std::size_t rows = 0;
    // A side held as partial sums: its further summands, each with its own words and scales
    // at the same elements, added to its first in order, in fp32, as readReplicaSum adds them.
    std::span<const StoredWords> moreReference, moreDistributed;

    std::size_t elements() const { return rowLength * rows; }
};

// The run's elements of `words`, decoded and scaled as the reader does (Hdf5Reader::read), into
// `out` (rowLength * rows floats, packed), then each of `more` added in order.
void decodeStored(const StoredWords& words, std::span<const StoredWords> more,
                  std::size_t rowLength, std::size_t rows, float* out);

}  // namespace ttrace
