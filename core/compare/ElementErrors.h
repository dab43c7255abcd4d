#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ttrace {

// Element relative errors |d - r| / (|r| + tiny) of one tensor counted on log-spaced bins:
// bin i covers [lowerEdge(i), lowerEdge(i + 1)). `tiny` is the smallest normal float, so an
// element whose reference is 0 and whose value is not lands in `above`.
struct ErrorHistogram {
    static constexpr int kMinDecade = -12;
    static constexpr int kMaxDecade = 4;
    static constexpr int kBinsPerDecade = 4;
    static constexpr int kBinCount = (kMaxDecade - kMinDecade) * kBinsPerDecade;

    std::vector<std::int64_t> bins = std::vector<std::int64_t>(kBinCount, 0);
    std::int64_t exact = 0;  // error 0: bit-equal or both zero
    std::int64_t below = 0;  // 0 < error < 10^kMinDecade
    std::int64_t above = 0;  // error >= 10^kMaxDecade, or not a number (a NaN on one side)

    // lowerEdge(0) .. lowerEdge(kBinCount): the one table every backend bins by.
    static const std::array<double, kBinCount + 1>& edges();
    static double lowerEdge(int bin);
    void add(double error);
    std::int64_t total() const;
    // Elements in the bins that lie wholly at or above `error` (plus `above`).
    std::int64_t countAtOrAbove(double error) const;
};

// The tensor seen as a 2-D array (rows: the leading dimensions flattened row-major; columns:
// the last dimension; a scalar is 1 x 1) downsampled to at most the requested pixels: each
// pixel holds the largest element error of its block of elements.
struct ErrorImage {
    std::int64_t rows = 0;
    std::int64_t columns = 0;
    int height = 0;
    int width = 0;
    std::vector<float> maxError;  // height * width, row-major; NaN errors stored as +inf

    float at(int pixelRow, int pixelColumn) const {
        return maxError[static_cast<std::size_t>(pixelRow) * static_cast<std::size_t>(width) +
                        static_cast<std::size_t>(pixelColumn)];
    }
    // First element row (column) of a pixel row (column); rowStart(height) == rows.
    std::int64_t rowStart(int pixelRow) const;
    std::int64_t columnStart(int pixelColumn) const;
    // The pixel row (column) holding an element row (column).
    int pixelRowOf(std::int64_t row) const;
    int pixelColumnOf(std::int64_t column) const;
};

// |value - reference| / (|reference| + the smallest normal float): 0 where the two are equal
// (NaN and NaN too), +inf where the quotient is not a number.
double elementError(float reference, float value);

// One piece of a tensor for its element-error profile: `rows` runs of `rowLength` elements of
// R and of D, both packed. Run k lies on pixel row pixelRows[k] of the image, element j of every
// run on pixel column pixelColumns[j] (ErrorImage::pixelRowOf, pixelColumnOf: decided by the
// caller, once per piece).
struct ProfilePiece {
    const float* reference = nullptr;
    const float* values = nullptr;
    std::size_t rowLength = 0;
    std::size_t rows = 0;
    const int* pixelRows = nullptr;
    const int* pixelColumns = nullptr;
};

}  // namespace ttrace
