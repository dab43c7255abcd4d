#include "trace/DType.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace ttrace {

namespace {

float halfToFloat(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exponent = (h >> 10) & 0x1fu;
    std::uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1f) {  // inf / nan keep their payload
        return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
    }
    if (exponent == 0) {
        // zero or subnormal: value = mantissa * 2^-24, exact in fp32
        const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
        return sign ? -magnitude : magnitude;
    }
    return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// All 256 values of an OCP FP8 format, indexed by bit pattern.
std::array<float, 256> fp8Table(int exponentBits, int mantissaBits, int bias, bool e4m3) {
    std::array<float, 256> table{};
    for (int b = 0; b < 256; ++b) {
        const float sign = (b & 0x80) ? -1.0f : 1.0f;
        const int e = (b >> mantissaBits) & ((1 << exponentBits) - 1);
        const int m = b & ((1 << mantissaBits) - 1);
        float value;
        if (e4m3 && e == 15 && m == 7) {
            value = std::numeric_limits<float>::quiet_NaN();
        } else if (!e4m3 && e == 31) {
            value = m ? std::numeric_limits<float>::quiet_NaN()
                      : sign * std::numeric_limits<float>::infinity();
        } else if (e == 0) {
            value = sign * std::ldexp(static_cast<float>(m), 1 - bias - mantissaBits);
        } else {
            value = sign *
                    std::ldexp(1.0f + static_cast<float>(m) / static_cast<float>(1 << mantissaBits),
                               e - bias);
        }
        table[static_cast<std::size_t>(b)] = value;
    }
    return table;
}

// Kept apart, with restrict pointers, so that the loops vectorise: inside the dtype switch
// the compiler could not rule out that input and output overlap.
#if defined(__x86_64__)
__attribute__((target_clones("avx2", "default")))
#endif
void decodeBf16(
    const std::uint16_t* __restrict in, float* __restrict out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        // memcpy rather than bit_cast: GCC 12 vectorises only this form
        const std::uint32_t word = static_cast<std::uint32_t>(in[i]) << 16;
        std::memcpy(out + i, &word, sizeof word);
    }
}

void decodeF16(const std::uint16_t* __restrict in, float* __restrict out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        out[i] = halfToFloat(in[i]);
    }
}

}  // namespace

std::optional<DType> dtypeFromName(QStringView name) {
    if (name == u"fp32")
        return DType::F32;
    if (name == u"fp16")
        return DType::F16;
    if (name == u"bf16")
        return DType::BF16;
    if (name == u"fp8_e4m3")
        return DType::FP8E4M3;
    if (name == u"fp8_e5m2")
        return DType::FP8E5M2;
    if (name == u"fp4_e2m1")
        return DType::FP4E2M1;
    return std::nullopt;
}

QString dtypeName(DType dtype) {
    switch (dtype) {
        case DType::F32:
            return QStringLiteral("fp32");
        case DType::F16:
            return QStringLiteral("fp16");
        case DType::BF16:
            return QStringLiteral("bf16");
        case DType::FP8E4M3:
            return QStringLiteral("fp8_e4m3");
        case DType::FP8E5M2:
            return QStringLiteral("fp8_e5m2");
        case DType::FP4E2M1:
            return QStringLiteral("fp4_e2m1");
    }
    return {};
}

bool isScaled(DType dtype) {
    return dtype == DType::FP8E4M3 || dtype == DType::FP8E5M2 || dtype == DType::FP4E2M1;
}

QString scaledFamily(DType dtype) {
    return dtype == DType::FP4E2M1 ? QStringLiteral("fp4") : QStringLiteral("fp8");
}

int elementsPerWord(DType dtype) {
    return dtype == DType::FP4E2M1 ? 2 : 1;
}

int storageBytes(DType dtype) {
    switch (dtype) {
        case DType::F32:
            return 4;
        case DType::F16:
        case DType::BF16:
            return 2;
        case DType::FP8E4M3:
        case DType::FP8E5M2:
        case DType::FP4E2M1:
            return 1;
    }
    return 4;
}

double machineEpsilon(DType dtype) {
    switch (dtype) {
        case DType::F32:
            return std::ldexp(1.0, -23);
        case DType::F16:
            return std::ldexp(1.0, -10);
        case DType::BF16:
        case DType::FP8E4M3:
        case DType::FP8E5M2:
        case DType::FP4E2M1:
            return std::ldexp(1.0, -7);
    }
    return std::ldexp(1.0, -23);
}

double elementEpsilon(DType dtype) {
    switch (dtype) {
        case DType::FP8E4M3:
            return std::ldexp(1.0, -3);
        case DType::FP8E5M2:
            return std::ldexp(1.0, -2);
        case DType::FP4E2M1:
            return std::ldexp(1.0, -1);
        default:
            return machineEpsilon(dtype);
    }
}

void decode(DType dtype, const void* stored, float* out, std::size_t n, std::size_t skip) {
    switch (dtype) {
        case DType::F32: {
            const auto* in = static_cast<const float*>(stored);
            std::copy(in, in + n, out);
            return;
        }
        case DType::BF16:
            decodeBf16(static_cast<const std::uint16_t*>(stored), out, n);
            return;
        case DType::F16:
            decodeF16(static_cast<const std::uint16_t*>(stored), out, n);
            return;
        case DType::FP8E4M3:
        case DType::FP8E5M2: {
            static const auto e4m3 = fp8Table(4, 3, 7, true);
            static const auto e5m2 = fp8Table(5, 2, 15, false);
            const auto& table = dtype == DType::FP8E4M3 ? e4m3 : e5m2;
            const auto* in = static_cast<const std::uint8_t*>(stored);
            for (std::size_t i = 0; i < n; ++i) {
                out[i] = table[in[i]];
            }
            return;
        }
        case DType::FP4E2M1: {
            // OCP e2m1: sign, 2 exponent bits (bias 1), 1 mantissa bit; no inf or NaN.
            static constexpr std::array<float, 8> magnitude{0.0f, 0.5f, 1.0f, 1.5f,
                                                            2.0f, 3.0f, 4.0f, 6.0f};
            const auto* in = static_cast<const std::uint8_t*>(stored);
            for (std::size_t i = 0; i < n; ++i) {
                const std::size_t element = i + skip;
                // the first element of a pair in the low nibble, as torch's float4_e2m1fn_x2
                const unsigned nibble = (in[element / 2] >> (4 * (element % 2))) & 0xfu;
                const float value = magnitude[nibble & 0x7u];
                out[i] = (nibble & 0x8u) ? -value : value;
            }
            return;
        }
    }
}

}  // namespace ttrace
