#pragma once

#include <QString>
#include <QStringView>
#include <optional>

#include "trace/DType.h"

namespace ttrace {

// The format a recipe keeps its block scales in, where narrower than float64
// (trace-format.md, `scale_format`): MX's E8M0 powers of two, NVFP4's E4M3 numbers.
enum class ScaleFormat { E8M0, E4M3 };

std::optional<ScaleFormat> scaleFormatFromName(QStringView name);
// "e8m0", "e4m3": the name scale_format gives it.
QString scaleFormatName(ScaleFormat format);
// Whether `scaleInv` is a positive number the format holds exactly.
bool holdsScale(ScaleFormat format, double scaleInv);
// The recipe that scales elements of `dtype` by scales of `format`, per block (else per
// tensor), by its name: "MXFP8" and "MXFP4" (E8M0 block scales), "NVFP4" (fp4 under E4M3
// block scales); else the dtype's family, "fp8" or "fp4" (scaledFamily).
QString recipeName(DType dtype, std::optional<ScaleFormat> format, bool perBlock);
// The elements one scale of the format's recipes covers along its block's dimension: MX's
// 32 (E8M0), NVFP4's 16 (E4M3).
std::int64_t recipeBlockElements(ScaleFormat format);
// What the format holds, in words that finish "... is not ": "a power of two from ...".
QString scaleFormatRange(ScaleFormat format);

}  // namespace ttrace
