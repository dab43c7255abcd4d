#include "compare/ElementErrors.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ttrace {

const std::array<double, ErrorHistogram::kBinCount + 1>& ErrorHistogram::edges() {
    static const auto computed = [] {
        std::array<double, kBinCount + 1> e{};
        for (int b = 0; b <= kBinCount; ++b) {
            e[static_cast<std::size_t>(b)] =
                std::pow(10.0, kMinDecade + static_cast<double>(b) / kBinsPerDecade);
        }
        return e;
    }();
    return computed;
}

double ErrorHistogram::lowerEdge(int bin) {
    return edges()[static_cast<std::size_t>(std::clamp(bin, 0, kBinCount))];
}

void ErrorHistogram::add(double error) {
    const auto& e = edges();
    if (error == 0) {
        ++exact;
        return;
    }
    if (!(error < e.back())) {  // NaN too
        ++above;
        return;
    }
    if (error < e.front()) {
        ++below;
        return;
    }
    // log10 rounding may put a value a hair off its edge; the edges decide.
    auto bin = static_cast<std::size_t>(std::clamp(
        static_cast<int>((std::log10(error) - kMinDecade) * kBinsPerDecade), 0, kBinCount - 1));
    if (error >= e[bin + 1]) {
        ++bin;
    } else if (bin > 0 && error < e[bin]) {
        --bin;
    }
    ++bins[bin];
}

std::int64_t ErrorHistogram::total() const {
    std::int64_t n = exact + below + above;
    for (const auto count : bins) {
        n += count;
    }
    return n;
}

std::int64_t ErrorHistogram::countAtOrAbove(double error) const {
    std::int64_t n = above;
    for (int b = 0; b < kBinCount; ++b) {
        if (lowerEdge(b) >= error) {
            n += bins[static_cast<std::size_t>(b)];
        }
    }
    return n;
}

std::int64_t ErrorImage::rowStart(int pixelRow) const {
    return height > 0 ? pixelRow * rows / height : 0;
}

std::int64_t ErrorImage::columnStart(int pixelColumn) const {
    return width > 0 ? pixelColumn * columns / width : 0;
}

int ErrorImage::pixelRowOf(std::int64_t row) const {
    // The largest pixel whose first row is at or before `row`.
    return rows > 0 ? static_cast<int>(((row + 1) * height + rows - 1) / rows - 1) : 0;
}

int ErrorImage::pixelColumnOf(std::int64_t column) const {
    return columns > 0 ? static_cast<int>(((column + 1) * width + columns - 1) / columns - 1) : 0;
}

double elementError(float reference, float value) {
    constexpr double kTiny = std::numeric_limits<float>::min();
    if (reference == value || (std::isnan(reference) && std::isnan(value))) {
        return 0;
    }
    const double error =
        std::abs(double{value} - double{reference}) / (std::abs(double{reference}) + kTiny);
    return std::isnan(error) ? std::numeric_limits<double>::infinity() : error;
}

}  // namespace ttrace
