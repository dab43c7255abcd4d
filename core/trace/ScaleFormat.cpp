#include "trace/ScaleFormat.h"

#include <cmath>

namespace ttrace {

std::optional<ScaleFormat> scaleFormatFromName(QStringView name) {
    if (name == u"e8m0") {
        return ScaleFormat::E8M0;
    }
    if (name == u"e4m3") {
        return ScaleFormat::E4M3;
    }
    return std::nullopt;
}

QString scaleFormatName(ScaleFormat format) {
    return format == ScaleFormat::E8M0 ? QStringLiteral("e8m0") : QStringLiteral("e4m3");
}

QString recipeName(DType dtype, std::optional<ScaleFormat> format, bool perBlock) {
    const bool fp4 = dtype == DType::FP4E2M1;
    if (perBlock && format == ScaleFormat::E8M0) {
        return fp4 ? QStringLiteral("MXFP4") : QStringLiteral("MXFP8");
    }
    if (perBlock && format == ScaleFormat::E4M3 && fp4) {
        return QStringLiteral("NVFP4");
    }
    return scaledFamily(dtype);
}

std::int64_t recipeBlockElements(ScaleFormat format) {
    return format == ScaleFormat::E8M0 ? 32 : 16;
}

bool holdsScale(ScaleFormat format, double scaleInv) {
    if (!std::isfinite(scaleInv) || scaleInv <= 0.0) {
        return false;
    }
    int exponent = 0;
    const double mantissa = std::frexp(scaleInv, &exponent);  // in [0.5, 1)
    switch (format) {
        case ScaleFormat::E8M0:
            return mantissa == 0.5 && exponent - 1 >= -127 && exponent - 1 <= 127;
        case ScaleFormat::E4M3:
            // fp8 e4m3: subnormals m * 2^-9, normals (1 + m/8) * 2^(e-7), at most 448
            if (scaleInv > 448.0) {
                return false;
            }
            if (scaleInv < std::ldexp(1.0, -6)) {
                const double steps = std::ldexp(scaleInv, 9);
                return steps == std::floor(steps);
            }
            return std::ldexp(mantissa, 4) == std::floor(std::ldexp(mantissa, 4));
    }
    return false;
}

QString scaleFormatRange(ScaleFormat format) {
    switch (format) {
        case ScaleFormat::E8M0:
            return QStringLiteral("a power of two from 2^-127 to 2^127");
        case ScaleFormat::E4M3:
            return QStringLiteral("a positive fp8 e4m3 number (at most 448, 3 mantissa bits)");
    }
    return {};
}

}  // namespace ttrace
