#pragma once

// The element-error profile of one piece of a tensor (the histogram and image the GUI shows),
// written once for the GPU and the host as ElementCompare.h is: per-element functors, and a
// Thrust skeleton (profileRun) that bins, sorts and reduces them under any execution policy.

#include <thrust/binary_search.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/reduce.h>
#include <thrust/sort.h>
#include <thrust/transform.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "ElementCompare.h"
#include "compare/ElementErrors.h"

namespace ttrace::gpu {

// Histogram slots: the bins, then exact, below and above (ErrorHistogram's fields).
inline constexpr int kExactSlot = ErrorHistogram::kBinCount;
inline constexpr int kBelowSlot = ErrorHistogram::kBinCount + 1;
inline constexpr int kAboveSlot = ErrorHistogram::kBinCount + 2;
inline constexpr int kHistogramSlots = ErrorHistogram::kBinCount + 3;

// ErrorHistogram::edges(), by value: the one table every backend bins by.
struct BinEdges {
    double at[ErrorHistogram::kBinCount + 1];
};

// elementError (compare/ElementErrors.h), the same arithmetic.
TTRACE_HOST_DEVICE inline double elementErrorOf(float reference, float value) {
    const bool bothNan = reference != reference && value != value;
    if (reference == value || bothNan) {
        return 0.0;
    }
    const double r = reference, d = value;
    const double diff = d > r ? d - r : r - d;
    const double error = diff / ((r < 0 ? -r : r) + 1.1754943508222875e-38);
    return error != error ? __builtin_huge_val() : error;
}

// ErrorHistogram::add's slot for `error`.
TTRACE_HOST_DEVICE inline int slotOf(double error, const BinEdges& edges) {
    constexpr int kBins = ErrorHistogram::kBinCount;
    if (error == 0) {
        return kExactSlot;
    }
    if (!(error < edges.at[kBins])) {
        return kAboveSlot;
    }
    if (error < edges.at[0]) {
        return kBelowSlot;
    }
    int bin = static_cast<int>((log10(error) - ErrorHistogram::kMinDecade) *
                               ErrorHistogram::kBinsPerDecade);
    bin = bin < 0 ? 0 : (bin > kBins - 1 ? kBins - 1 : bin);
    if (error >= edges.at[bin + 1]) {
        ++bin;
    } else if (bin > 0 && error < edges.at[bin]) {
        --bin;
    }
    return bin;
}

// A piece (ProfilePiece: R and D packed, the pixel of each run and column) in memory the
// policy can read, with the width of the image it lands on.
struct ProfileRun {
    ProfilePiece piece;
    int imageWidth = 0;

    std::size_t elements() const { return piece.rowLength * piece.rows; }
};

struct SlotAt {
    ProfileRun run;
    BinEdges edges;
    TTRACE_HOST_DEVICE int operator()(std::uint32_t i) const {
        return slotOf(elementErrorOf(run.piece.reference[i], run.piece.values[i]), edges);
    }
};

struct PixelAt {
    ProfileRun run;
    TTRACE_HOST_DEVICE int operator()(std::uint32_t i) const {
        const ProfilePiece& p = run.piece;
        const std::size_t row = i / p.rowLength;
        return p.pixelRows[row] * run.imageWidth + p.pixelColumns[i - row * p.rowLength];
    }
};

struct ErrorAt {
    ProfileRun run;
    TTRACE_HOST_DEVICE float operator()(std::uint32_t i) const {
        return static_cast<float>(elementErrorOf(run.piece.reference[i], run.piece.values[i]));
    }
};

// Working memory of profileRun, in memory the policy can write: `elements` ints or floats
// each, and kHistogramSlots ints for `slotEnds`.
struct ProfileScratch {
    int* slots = nullptr;
    int* pixels = nullptr;
    float* errors = nullptr;
    int* pixelsOut = nullptr;
    float* maximaOut = nullptr;
    int* slotEnds = nullptr;
};

// Profiles `run` (at most kMaxChunkElements elements): leaves in scratch.slotEnds the end of
// each histogram slot among the sorted slots (slot k holds slotEnds[k] - slotEnds[k - 1]
// elements), and returns m: the largest error of each of m pixels, in scratch.pixelsOut and
// scratch.maximaOut.
template <class Policy>
std::size_t profileRun(const Policy& policy, const ProfileRun& run, const BinEdges& edges,
                       const ProfileScratch& scratch) {
    const auto n = static_cast<std::uint32_t>(run.elements());
    const thrust::counting_iterator<std::uint32_t> first(0), last(n);
    thrust::transform(policy, first, last, scratch.slots, SlotAt{run, edges});
    thrust::sort(policy, scratch.slots, scratch.slots + n);
    thrust::upper_bound(policy, scratch.slots, scratch.slots + n, thrust::counting_iterator<int>(0),
                        thrust::counting_iterator<int>(kHistogramSlots), scratch.slotEnds);
    thrust::transform(policy, first, last, scratch.pixels, PixelAt{run});
    thrust::transform(policy, first, last, scratch.errors, ErrorAt{run});
    thrust::sort_by_key(policy, scratch.pixels, scratch.pixels + n, scratch.errors);
    const auto ends = thrust::reduce_by_key(policy, scratch.pixels, scratch.pixels + n,
                                            scratch.errors, scratch.pixelsOut, scratch.maximaOut,
                                            thrust::equal_to<int>(), thrust::maximum<float>());
    return static_cast<std::size_t>(ends.first - scratch.pixelsOut);
}

// The edges of ErrorHistogram, for the functors.
BinEdges binEdges();

// Adds what profileRun left (slot ends and pixel maxima, in host memory) to `histogram` and
// `image`.
void mergeProfile(const int* slotEnds, const int* pixels, const float* maxima, std::size_t count,
                  ErrorHistogram& histogram, ErrorImage& image);

// Calls `visit` with each part of `piece` of at most `maxElements` elements (whole runs, or
// pieces of one run), as a ProfileRun over the given memory: pixel rows and columns offset to
// the part.
void forEachProfilePart(
    const ProfilePiece& piece, int imageWidth, std::size_t maxElements,
    const std::function<void(const ProfileRun& part, std::size_t start)>& visit);

}  // namespace ttrace::gpu
