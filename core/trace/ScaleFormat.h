#pragma once

#include <QString>
#include <QStringView>
#include <optional>

namespace ttrace {

// The format a recipe keeps its block scales in, where narrower than float64
// (trace-format.md, `scale_format`): MX's E8M0 powers of two, NVFP4's E4M3 numbers.
enum class ScaleFormat { E8M0, E4M3 };

std::optional<ScaleFormat> scaleFormatFromName(QStringView name);
// Whether `scaleInv` is a positive number the format holds exactly.
bool holdsScale(ScaleFormat format, double scaleInv);
// What the format holds, in words that finish "... is not ": "a power of two from ...".
QString scaleFormatRange(ScaleFormat format);

}  // namespace ttrace
