#pragma once

#include <QString>

namespace ttrace {

// Colour of a normalized error on a log scale, from ColorBrewer's colour-blind-safe RdBu:
// blues below 1 (within tolerance), oranges and reds above, with a visible step at 1.0, the
// threshold. Errors at or below 10^kErrorColorMinDecade are darkest blue, at or above
// 10^kErrorColorMaxDecade (and NaN or infinite) darkest red.
inline constexpr double kErrorColorMinDecade = -3;
inline constexpr double kErrorColorMaxDecade = 3;

// "#rrggbb"
QString errorColor(double normalizedError);

}  // namespace ttrace
