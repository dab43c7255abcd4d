#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "trace/Diagnostic.h"
#include "trace/TensorRecord.h"

namespace ttrace {

// Reads boxes of captured datasets and decodes them to float. Thread-safe; keeps a bounded
// number of rank files open (read-only) so that streaming many small blocks stays cheap.
class Hdf5Reader {
public:
    explicit Hdf5Reader(int maxOpenFiles = 64);
    ~Hdf5Reader();
    Hdf5Reader(const Hdf5Reader&) = delete;
    Hdf5Reader& operator=(const Hdf5Reader&) = delete;

    // Reads the box [localStart, localStart + count) of `record`'s dataset (local coordinates
    // of that dataset) into `out` (product(count) floats, row-major), decoding its dtype.
    // Returns a diagnostic naming the file and dataset when the read fails.
    [[nodiscard]] std::optional<Diagnostic> read(const TensorRecord& record,
                                                 std::span<const std::int64_t> localStart,
                                                 std::span<const std::int64_t> count, float* out);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace ttrace
