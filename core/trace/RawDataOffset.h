#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>

#include "trace/DType.h"

namespace ttrace {

// The HDF5 memory type a dtype's stored words are read as: float32, 16-bit or 8-bit words.
[[nodiscard]] hid_t storedMemoryType(DType dtype);

// Where a dataset's bytes lie in its file when they can be read as they are, without HDF5:
// contiguous (hence unfiltered), allocated, not external, and stored exactly as
// storedMemoryType(dtype). Nullopt otherwise (chunked, compressed, byte-swapped, never
// written): such a dataset is read through HDF5.
[[nodiscard]] std::optional<std::uint64_t> rawDataOffset(hid_t dataset, DType dtype);

}  // namespace ttrace
