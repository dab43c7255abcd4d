#include "report/ErrorColorMap.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace ttrace {

namespace {

struct Rgb {
    double r, g, b;
};

// ColorBrewer RdBu (11 classes), split at its white centre: the blue half runs dark to light
// towards 1.0, the red half light-orange to dark from 1.0, so that 1.0 is a visible edge.
constexpr std::array<Rgb, 5> kBelow = {
    {{5, 48, 97}, {33, 102, 172}, {67, 147, 195}, {146, 197, 222}, {209, 229, 240}}};
constexpr std::array<Rgb, 5> kAbove = {
    {{253, 219, 199}, {244, 165, 130}, {214, 96, 77}, {178, 24, 43}, {103, 0, 31}}};

template <std::size_t N>
Rgb interpolate(const std::array<Rgb, N>& stops, double t) {
    t = std::clamp(t, 0.0, 1.0) * static_cast<double>(N - 1);
    const auto i = std::min(static_cast<std::size_t>(t), N - 2);
    const double f = t - static_cast<double>(i);
    const Rgb& a = stops[i];
    const Rgb& b = stops[i + 1];
    return {a.r + (b.r - a.r) * f, a.g + (b.g - a.g) * f, a.b + (b.b - a.b) * f};
}

QString hex(const Rgb& c) {
    const auto channel = [](double v) {
        return QStringLiteral("%1").arg(static_cast<int>(std::lround(v)), 2, 16, QLatin1Char('0'));
    };
    return QLatin1Char('#') + channel(c.r) + channel(c.g) + channel(c.b);
}

}  // namespace

QString errorColor(double normalizedError) {
    if (std::isnan(normalizedError) || normalizedError > 1.0) {
        const double decade =
            std::isnan(normalizedError) ? kErrorColorMaxDecade : std::log10(normalizedError);
        return hex(interpolate(kAbove, decade / kErrorColorMaxDecade));
    }
    if (normalizedError <= 0) {
        return hex(kBelow.front());
    }
    const double decade = std::log10(normalizedError);  // in [min, 0]
    return hex(interpolate(kBelow, 1.0 - decade / kErrorColorMinDecade));
}

}  // namespace ttrace
