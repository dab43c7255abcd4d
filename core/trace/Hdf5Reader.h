#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "trace/Diagnostic.h"
#include "trace/TensorRecord.h"

namespace ttrace {

class Hdf5Trail;

// Reads boxes of captured datasets and decodes them to float. Thread-safe; keeps a bounded
// number of rank files open (read-only) so that streaming many small blocks stays cheap.
// Contiguous data at the offset its index found is read with pread; everything else goes
// through HDF5, in a worker process when isolated (IsolatedHdf5.h), where `cancel` stops a
// read stuck inside the library.
class Hdf5Reader {
public:
    explicit Hdf5Reader(const std::atomic<bool>* cancel = nullptr, int maxOpenFiles = 64);
    ~Hdf5Reader();
    Hdf5Reader(const Hdf5Reader&) = delete;
    Hdf5Reader& operator=(const Hdf5Reader&) = delete;

    // Reads the box [localStart, localStart + count) of `record`'s dataset (local coordinates
    // of that dataset) into `out` (product(count) floats, row-major), decoding its dtype.
    // Returns a diagnostic naming the file and dataset when the read fails.
    [[nodiscard]] std::optional<Diagnostic> read(const TensorRecord& record,
                                                 std::span<const std::int64_t> localStart,
                                                 std::span<const std::int64_t> count, float* out);

    // The stored words holding the box (its StoredBox, storageBytes(dtype) each, row-major,
    // undecoded and unscaled) into `target`, by the same paths as read(): what a backend that
    // decodes on its device is given.
    [[nodiscard]] std::optional<Diagnostic> readWords(const TensorRecord& record,
                                                      std::span<const std::int64_t> localStart,
                                                      std::span<const std::int64_t> count,
                                                      std::uint8_t* target);

    // The HDF5 path of read(), in this process: the stored words holding the box (its
    // StoredBox, storageBytes(dtype) each, row-major, undecoded and unscaled) into `target`,
    // marking each step on `trail`; nullopt on success, else the problem. What an isolated
    // worker runs.
    [[nodiscard]] std::optional<QString> readStored(const TensorRecord& record,
                                                    std::span<const std::int64_t> localStart,
                                                    std::span<const std::int64_t> count,
                                                    std::uint8_t* target,
                                                    Hdf5Trail* trail = nullptr);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace ttrace
