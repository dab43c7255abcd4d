#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "CudaDevices.h"
#include "ElementCompare.h"
#include "compare/ElementErrors.h"
#include "compare/ErrorMetrics.h"

namespace ttrace::gpu {

// Compares runs held in host memory on one or more GPUs. Each calling thread borrows a lane
// (a device, a copy stream and a compute stream, two slots of device buffers): the copy of one
// chunk overlaps the reduction of the previous one, and lanes are spread over the devices, so
// the comparison job's worker threads keep every GPU busy. Thread-safe; errors throw CudaError.
class CudaEngine {
public:
    // `chunkElements`: elements per device chunk (a slot holds its stored words, up to 4 bytes
    // an element of R and of D, and their scales).
    explicit CudaEngine(std::vector<CudaDevice> devices,
                        std::size_t chunkElements = std::size_t{1} << 22);
    ~CudaEngine();
    CudaEngine(const CudaEngine&) = delete;
    CudaEngine& operator=(const CudaEngine&) = delete;

    // `run` in host memory: its stored words and scales cross to the device as they are and are
    // decoded there; page-locked memory (allocatePinned) is copied asynchronously. Positions
    // are offsets into D, as on the CPU backend.
    [[nodiscard]] ErrorAccumulator compare(const RowRun& run) const;

    // Bytes copied to the devices by compare() so far: what the benchmark divides by elements.
    std::uint64_t bytesCopied() const { return bytesCopied_; }

    // The element-error profile of `piece` (host memory) added to `histogram` and `image`.
    void profile(const ProfilePiece& piece, ErrorHistogram& histogram, ErrorImage& image) const;

    // Page-locked host memory, usable by every device; freed with freePinned.
    static void* allocatePinned(std::size_t bytes);
    static void freePinned(void* memory);

private:
    struct Lane;
    struct LaneDeleter {
        void operator()(Lane* lane) const;
    };
    using LanePtr = std::unique_ptr<Lane, LaneDeleter>;
    LanePtr borrowLane() const;
    void returnLane(LanePtr lane) const;

    std::vector<CudaDevice> devices_;
    std::size_t chunkElements_;
    mutable std::mutex mutex_;  // guards idle_ and lanesMade_
    mutable std::vector<LanePtr> idle_;
    mutable std::size_t lanesMade_ = 0;
    mutable std::atomic<std::uint64_t> bytesCopied_ = 0;
};

}  // namespace ttrace::gpu
