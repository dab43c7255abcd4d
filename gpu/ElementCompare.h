#pragma once

// The arithmetic of one comparison, element by element and as a reduction, written once for
// the GPU (nvcc) and the host (g++, through Thrust's host systems): what the CUDA backend runs
// is what CI runs against the CPU backend. Plain C++ only: no HDF5, no Qt, no CUDA headers.

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define TTRACE_HOST_DEVICE __host__ __device__
#else
#define TTRACE_HOST_DEVICE
#endif

namespace ttrace::gpu {

// How a run of stored words decodes (docs/trace-format.md): every type decodes exactly to
// fp32; fp8 and fp4 values are then multiplied by their scale_inv, in float, as the CPU path
// does (BlockScales::apply). E2M1 packs two elements a byte, the first in the low nibble.
enum class StoredType : std::uint8_t { F32, F16, BF16, E4M3, E5M2, E2M1 };

// Bytes of one stored word; E2M1's byte holds two elements.
TTRACE_HOST_DEVICE inline int storedBytes(StoredType type) {
    switch (type) {
        case StoredType::F32:
            return 4;
        case StoredType::F16:
        case StoredType::BF16:
            return 2;
        case StoredType::E4M3:
        case StoredType::E5M2:
        case StoredType::E2M1:
            return 1;
    }
    return 4;
}

TTRACE_HOST_DEVICE inline bool isScaledType(StoredType type) {
    return type == StoredType::E4M3 || type == StoredType::E5M2 || type == StoredType::E2M1;
}

// The byte holding element `element` of a run of `type`, and the bytes up to the end of
// element `end - 1`: what a copy of elements [element, end) must move.
TTRACE_HOST_DEVICE inline std::size_t byteOfElement(StoredType type, std::size_t element) {
    return type == StoredType::E2M1 ? element / 2
                                    : element * static_cast<std::size_t>(storedBytes(type));
}
TTRACE_HOST_DEVICE inline std::size_t bytesThroughElement(StoredType type, std::size_t end) {
    return type == StoredType::E2M1 ? (end + 1) / 2
                                    : end * static_cast<std::size_t>(storedBytes(type));
}

// The trace format's name of the type: "fp32", "fp8_e4m3".
inline const char* storedTypeName(StoredType type) {
    switch (type) {
        case StoredType::F32:
            return "fp32";
        case StoredType::F16:
            return "fp16";
        case StoredType::BF16:
            return "bf16";
        case StoredType::E4M3:
            return "fp8_e4m3";
        case StoredType::E5M2:
            return "fp8_e5m2";
        case StoredType::E2M1:
            return "fp4_e2m1";
    }
    return "";
}

// Stored words in memory the reduction can read (host memory for the host systems, device
// memory on the GPU), and how element (k, j) of a run (row k, column j) is found and scaled.
// Where the words lie and where the element sits in its dataset's box are kept apart: a copy
// to the device may pack the rows of a strided run, but each element keeps its block's scale.
struct Operand {
    const void* data = nullptr;
    StoredType type = StoredType::F32;
    // Element (k, j) is word origin + k * stride + j of `data` (a nibble for E2M1).
    std::size_t origin = 0;
    std::size_t stride = 0;
    // Scaled types without a table: every element times scaleInv.
    float scaleInv = 1.0F;
    // Scaled types with a table: element (k, j) is element e = scaleOrigin + k * scaleStride + j
    // of its box, whose rows hold `pitch` elements; row e / pitch of the table holds
    // `rowEntries` scales, each for `blockColumns` columns (0: one for the whole row), the
    // box's column c under entry (c + columnShift) / blockColumns.
    const float* scales = nullptr;
    std::size_t scaleOrigin = 0;
    std::size_t scaleStride = 0;
    std::size_t pitch = 1;
    std::size_t rowEntries = 1;
    std::size_t blockColumns = 0;
    std::int64_t columnShift = 0;
};

TTRACE_HOST_DEVICE inline float floatFromBits(std::uint32_t bits) {
    float value;
    __builtin_memcpy(&value, &bits, sizeof value);
    return value;
}

TTRACE_HOST_DEVICE inline std::uint32_t bitsOfFloat(float value) {
    std::uint32_t bits;
    __builtin_memcpy(&bits, &value, sizeof bits);
    return bits;
}

TTRACE_HOST_DEVICE inline float halfToFloat(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000U) << 16;
    const std::uint32_t exponent = (h >> 10) & 0x1fU;
    const std::uint32_t mantissa = h & 0x3ffU;
    if (exponent == 0x1f) {  // inf and NaN keep their payload
        return floatFromBits(sign | 0x7f800000U | (mantissa << 13));
    }
    if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in fp32
        const float magnitude = static_cast<float>(mantissa) * 0x1p-24F;
        return sign ? -magnitude : magnitude;
    }
    return floatFromBits(sign | ((exponent + 112U) << 23) | (mantissa << 13));
}

// The CPU path's arithmetic on decoded values, bit for bit on the device too: products and
// sums rounded one by one (never fused), and NaNs as x86's SSE makes them, which the CPU
// backend compares bit for bit: the first NaN operand made quiet, and a NaN from non-NaN
// operands (Inf - Inf, 0 x Inf) the "default NaN" 0xffc00000. A GPU would return its own
// canonical NaN.
TTRACE_HOST_DEVICE inline float quieted(float nan) {
    return floatFromBits(bitsOfFloat(nan) | 0x00400000U);
}

// `result` of an operation on a and b, with its NaN as x86 would make it.
TTRACE_HOST_DEVICE inline float withCpuNan(float a, float b, float result) {
    if (a != a || b != b) {
        return quieted(a != a ? a : b);
    }
    return result != result ? floatFromBits(0xffc00000U) : result;
}

TTRACE_HOST_DEVICE inline float productAsOnTheCpu(float a, float b) {
#if defined(__CUDA_ARCH__)
    return withCpuNan(a, b, __fmul_rn(a, b));
#else
    return withCpuNan(a, b, a * b);
#endif
}

TTRACE_HOST_DEVICE inline float sumAsOnTheCpu(float a, float b) {
#if defined(__CUDA_ARCH__)
    return withCpuNan(a, b, __fadd_rn(a, b));
#else
    return withCpuNan(a, b, a + b);
#endif
}

// OCP FP8: e4m3 (no infinities; S.1111.111 is NaN) and e5m2 (IEEE-like).
TTRACE_HOST_DEVICE inline float fp8ToFloat(std::uint8_t b, bool e4m3) {
    const int mantissaBits = e4m3 ? 3 : 2;
    const int bias = e4m3 ? 7 : 15;
    const int e = (b >> mantissaBits) & (e4m3 ? 0xf : 0x1f);
    const int m = b & ((1 << mantissaBits) - 1);
    const std::uint32_t sign = (b & 0x80U) ? 0x80000000U : 0U;
    if (e4m3 && e == 15 && m == 7) {
        return floatFromBits(0x7fc00000U);
    }
    if (!e4m3 && e == 31) {
        return floatFromBits(m ? 0x7fc00000U : (sign | 0x7f800000U));
    }
    if (e == 0) {  // subnormal: m * 2^(1 - bias - mantissaBits)
        const float magnitude = static_cast<float>(m) * (e4m3 ? 0x1p-9F : 0x1p-16F);
        return sign ? -magnitude : magnitude;
    }
    return floatFromBits(sign | (static_cast<std::uint32_t>(e - bias + 127) << 23) |
                         (static_cast<std::uint32_t>(m) << (23 - mantissaBits)));
}

// OCP FP4 e2m1: sign, 2 exponent bits (bias 1), 1 mantissa bit; no infinities or NaN.
TTRACE_HOST_DEVICE inline float fp4ToFloat(unsigned nibble) {
    const unsigned magnitude = nibble & 0x7U;
    // 0, 0.5, 1, 1.5, 2, 3, 4, 6: e == 0 is m * 0.5, else (1 + m / 2) * 2^(e - 1)
    const float value = (magnitude < 2U)
                            ? 0.5F * static_cast<float>(magnitude)
                            : static_cast<float>(2U + (magnitude & 1U)) *
                                  static_cast<float>(1U << ((magnitude >> 1) - 1U)) * 0.5F;
    return (nibble & 0x8U) ? -value : value;
}

// The scale_inv element (k, j) of `operand` decodes by.
TTRACE_HOST_DEVICE inline float scaleAt(const Operand& operand, std::size_t k, std::size_t j) {
    if (operand.scales == nullptr) {
        return operand.scaleInv;
    }
    const std::size_t e = operand.scaleOrigin + k * operand.scaleStride + j;
    const std::size_t row = e / operand.pitch;
    const std::size_t column = e - row * operand.pitch;
    const std::size_t entry =
        operand.blockColumns == 0
            ? 0
            : static_cast<std::size_t>(static_cast<std::int64_t>(column) + operand.columnShift) /
                  operand.blockColumns;
    return operand.scales[row * operand.rowEntries + entry];
}

// Element (k, j) of `operand`, decoded (and scaled).
TTRACE_HOST_DEVICE inline float load(const Operand& operand, std::size_t k, std::size_t j) {
    const std::size_t i = operand.origin + k * operand.stride + j;
    float value = 0.0F;
    switch (operand.type) {
        case StoredType::F32:
            return static_cast<const float*>(operand.data)[i];
        case StoredType::F16:
            return halfToFloat(static_cast<const std::uint16_t*>(operand.data)[i]);
        case StoredType::BF16:
            return floatFromBits(
                static_cast<std::uint32_t>(static_cast<const std::uint16_t*>(operand.data)[i])
                << 16);
        case StoredType::E4M3:
        case StoredType::E5M2:
            value = fp8ToFloat(static_cast<const std::uint8_t*>(operand.data)[i],
                               operand.type == StoredType::E4M3);
            break;
        case StoredType::E2M1:
            value = fp4ToFloat(
                (static_cast<const std::uint8_t*>(operand.data)[i / 2] >> (4 * (i % 2))) & 0xfU);
            break;
    }
    return productAsOnTheCpu(value, scaleAt(operand, k, j));  // as BlockScales::apply
}

// The sums and maxima of a run of at most 2^32 - 1 elements, positions relative to its start.
// Kept small (80 bytes): the GPU holds one per thread in registers. kNone marks a maximum no
// element has set yet.
struct Partial {
    static constexpr std::uint32_t kNone = 0xffffffffU;
    double sumSqDiff = 0, sumSqRef = 0, sumSqDist = 0, sumDot = 0;
    double maxAbs = 0, maxRel = 0;
    std::uint32_t maxAbsAt = kNone, maxRelAt = kNone;
    std::uint32_t zeroRefMismatches = 0, bitDifferences = 0;
    std::uint32_t nanRef = 0, infRef = 0, nanDist = 0, infDist = 0;
};

// Larger value wins, a tie goes to the smaller position: associative and commutative, so the
// result does not depend on how a GPU or the host splits the work (ErrorAccumulator::merge).
TTRACE_HOST_DEVICE inline void keepMax(double& value, std::uint32_t& at, double otherValue,
                                       std::uint32_t otherAt) {
    if (otherAt == Partial::kNone) {
        return;
    }
    if (at == Partial::kNone || otherValue > value || (otherValue == value && otherAt < at)) {
        value = otherValue;
        at = otherAt;
    }
}

struct CombinePartials {
    TTRACE_HOST_DEVICE Partial operator()(Partial a, const Partial& b) const {
        a.sumSqDiff += b.sumSqDiff;
        a.sumSqRef += b.sumSqRef;
        a.sumSqDist += b.sumSqDist;
        a.sumDot += b.sumDot;
        keepMax(a.maxAbs, a.maxAbsAt, b.maxAbs, b.maxAbsAt);
        keepMax(a.maxRel, a.maxRelAt, b.maxRel, b.maxRelAt);
        a.zeroRefMismatches += b.zeroRefMismatches;
        a.bitDifferences += b.bitDifferences;
        a.nanRef += b.nanRef;
        a.infRef += b.infRef;
        a.nanDist += b.nanDist;
        a.infDist += b.infDist;
        return a;
    }
};

// One pair (R, D) as a Partial, with the CPU backend's rules (CpuBackend.cpp): NaN and Inf
// are counted and left out of the sums; where they do not match on the two sides (a NaN or
// Inf on one side only, NaN against Inf, Inf of the other sign) the error is unbounded, so the
// squared difference is infinite and that element holds both maxima; matching pairs are equal.
// Relative errors only where R is finite and non-zero; a zero R against a different D counts
// as a zero-reference mismatch.
TTRACE_HOST_DEVICE inline Partial comparePair(float rf, float df, std::uint32_t at) {
    constexpr std::uint32_t kExponentMask = 0x7f800000U;
    constexpr std::uint32_t kMantissaMask = 0x007fffffU;
    const double kInf = __builtin_huge_val();
    const std::uint32_t rb = bitsOfFloat(rf), db = bitsOfFloat(df);
    const bool rSpecial = (rb & kExponentMask) == kExponentMask;
    const bool dSpecial = (db & kExponentMask) == kExponentMask;
    const bool rNan = rSpecial && (rb & kMantissaMask) != 0;
    const bool dNan = dSpecial && (db & kMantissaMask) != 0;
    const bool finite = !rSpecial && !dSpecial;
    const bool unbounded = !finite && !(rSpecial && dSpecial && ((rNan && dNan) || rb == db));
    Partial p;
    p.bitDifferences = rb != db;
    p.nanRef = rNan;
    p.infRef = rSpecial && !rNan;
    p.nanDist = dNan;
    p.infDist = dSpecial && !dNan;
    if (unbounded) {
        p.sumSqDiff = kInf;
        p.maxAbs = kInf;
        p.maxAbsAt = at;
        p.maxRel = kInf;
        p.maxRelAt = at;
        return p;
    }
    if (!finite) {  // a matching NaN or Inf: equal, and in no sum or maximum
        return p;
    }
    const double r = rf, d = df;
    const double diff = d - r;
    p.sumSqDiff = diff * diff;
    p.sumSqRef = r * r;
    p.sumSqDist = d * d;
    p.sumDot = d * r;
    p.maxAbs = diff < 0 ? -diff : diff;
    p.maxAbsAt = at;
    const double absRef = r < 0 ? -r : r;
    if (absRef != 0.0) {
        p.maxRel = p.maxAbs / absRef;
        p.maxRelAt = at;
    }
    p.zeroRefMismatches = rf == 0.0F && df != rf;
    return p;
}

// The most summands one side of a run may have: a copy held as partial sums over more ranks
// is added up on the host (MetricsBackend::compareStored's default).
inline constexpr int kMaxSummands = 8;

// A run of the reduction: `rows` rows of `rowLength` elements of R and of D, each operand
// saying where its row k lies. Positions are offsets into D seen packed, k * rowLength + j.
// A side held as partial sums has further summands, added to its first in order, in fp32,
// as the CPU path adds them (readReplicaSum).
struct RowRun {
    Operand reference;
    Operand distributed;
    Operand moreReference[kMaxSummands - 1];
    Operand moreDistributed[kMaxSummands - 1];
    int referenceSummands = 1;
    int distributedSummands = 1;
    std::size_t rowLength = 0;
    std::size_t rows = 0;

    std::size_t elements() const { return rowLength * rows; }
};

// Element (k, j) of a side: its first summand, plus the others in order.
TTRACE_HOST_DEVICE inline float loadSum(const Operand& first, const Operand* more, int summands,
                                        std::size_t k, std::size_t j) {
    float value = load(first, k, j);
    for (int s = 1; s < summands; ++s) {
        value = sumAsOnTheCpu(value, load(more[s - 1], k, j));  // as readReplicaSum
    }
    return value;
}

// Element i of a RowRun as a Partial: what Thrust's transform_reduce maps over the run.
struct PairAt {
    RowRun run;
    TTRACE_HOST_DEVICE Partial operator()(std::uint32_t i) const {
        std::size_t k = 0, j = i;
        if (run.rows > 1) {
            k = i / run.rowLength;
            j = i - k * run.rowLength;
        }
        return comparePair(
            loadSum(run.reference, run.moreReference, run.referenceSummands, k, j),
            loadSum(run.distributed, run.moreDistributed, run.distributedSummands, k, j), i);
    }
};

}  // namespace ttrace::gpu
