#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "compare/ElementErrors.h"
#include "compare/ErrorMetrics.h"
#include "compare/StoredRun.h"

namespace ttrace {

// Host memory for the values a backend compares, and how it is given back.
struct HostBufferRelease {
    void (*release)(float*) = nullptr;
    void operator()(float* memory) const { release(memory); }
};
using HostBuffer = std::unique_ptr<float[], HostBufferRelease>;

// Where the arithmetic of a comparison runs. The CPU backend is always built and is the
// oracle; the CUDA backend (gpu/) implements the same interface and must agree with it. Plain
// C++ (no Qt), so that gpu/ can implement it.
class MetricsBackend {
public:
    virtual ~MetricsBackend() = default;
    // What ran, as reports and the status bar say it: "CPU", "CUDA on NVIDIA H200".
    virtual std::string name() const = 0;

    // Buffers of `elements` floats to read values into: plain memory for the CPU, page-locked
    // memory for a GPU, so that reads land where the device copies from, asynchronously.
    [[nodiscard]] virtual HostBuffer allocateHostBuffer(std::size_t elements) const {
        return HostBuffer(new float[elements], {[](float* memory) { delete[] memory; }});
    }

    // Compares n decoded elements of D against R in one pass. Positions in the result are
    // offsets into the arrays. Must be safe to call from several threads at once.
    [[nodiscard]] virtual ErrorAccumulator compare(const float* reference, const float* distributed,
                                                   std::size_t n) const = 0;

    // The same over `rows` runs of `rowLength` elements: run k of R starts at
    // reference + k * referenceStride, run k of D at distributed + k * rowLength (D is packed).
    // Positions are offsets into D. What a shard piece of a reference block is, where the
    // shard cuts the block's rows (column-parallel layers): compared in place, not gathered.
    [[nodiscard]] virtual ErrorAccumulator compareRows(const float* reference,
                                                       std::size_t referenceStride,
                                                       const float* distributed,
                                                       std::size_t rowLength,
                                                       std::size_t rows) const = 0;

    // Whether compareStored is how this backend wants its values: it decodes stored words
    // itself, so that bf16, fp8 and fp4 cross to it at their own width, not as fp32. The
    // comparison job then reads words wherever a copy has at most summandsPerSide partial
    // sums (a trusted run laid out over ranks too, where its pieces' words and scales paste
    // together: BlockComparer::readTrustedHeld).
    virtual bool comparesStoredWords() const { return false; }
    // How many partial sums of a copy compareStored adds itself: a copy with more is summed in
    // fp32 on the host first, and given as fp32 words.
    virtual std::size_t summandsPerSide() const { return 1; }

    // The comparison of compareRows on stored words: each side decodes and scales as the
    // reader would (Hdf5Reader::read). This default decodes on the host and compares floats.
    [[nodiscard]] virtual ErrorAccumulator compareStored(const StoredRun& run) const;

    // Bytes this backend has copied to a device so far (0 for the CPU): what the benchmark
    // divides by the elements compared.
    virtual std::uint64_t bytesToDevice() const { return 0; }

    // The element-error profile the GUI shows for one tensor: adds every element's error
    // (elementError) of `piece` to `histogram` and raises each pixel of `image` to the largest
    // error on it.
    virtual void profile(const ProfilePiece& piece, ErrorHistogram& histogram,
                         ErrorImage& image) const = 0;
};

// Vectorisable single-pass loop; the comparison job runs it on several threads at once.
// `name` is what reports say ran: "CPU", or with why a GPU was not used.
std::unique_ptr<MetricsBackend> makeCpuBackend(std::string name = "CPU");

}  // namespace ttrace
