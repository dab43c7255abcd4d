#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "compare/MetricsBackend.h"

namespace ttrace {

namespace {

constexpr std::uint32_t kExponentMask = 0x7f800000u;
constexpr std::uint32_t kMantissaMask = 0x007fffffu;

// Independent partial sums, one set per lane: the lanes carry no dependency from one element
// to the next, so the compiler can keep them in vector registers, and the result does not
// depend on the machine (the lanes are merged in a fixed order).
constexpr std::size_t kLanes = 8;

struct Lanes {
    std::array<double, kLanes> sumSqDiff{}, sumSqRef{}, sumSqDist{}, sumDot{};
    std::array<double, kLanes> maxAbs, maxRel;
    std::array<std::int64_t, kLanes> maxAbsPos, maxRelPos;
    std::array<std::int64_t, kLanes> zeroRef{}, nanDist{}, infDist{}, nanRef{}, infRef{}, bits{};

    Lanes() {
        maxAbs.fill(-1.0);  // below every |D-R|, so the first finite pair sets a position
        maxRel.fill(-1.0);
        maxAbsPos.fill(-1);
        maxRelPos.fill(-1);
    }

    inline void add(std::size_t lane, std::int64_t pos, float r, float d) {
        std::uint32_t rb = 0, db = 0;
        std::memcpy(&rb, &r, sizeof rb);
        std::memcpy(&db, &d, sizeof db);
        bits[lane] += rb != db;
        const bool rSpecial = (rb & kExponentMask) == kExponentMask;
        const bool dSpecial = (db & kExponentMask) == kExponentMask;
        nanRef[lane] += rSpecial & ((rb & kMantissaMask) != 0);
        infRef[lane] += rSpecial & ((rb & kMantissaMask) == 0);
        nanDist[lane] += dSpecial & ((db & kMantissaMask) != 0);
        infDist[lane] += dSpecial & ((db & kMantissaMask) == 0);
        // Non-finite pairs are counted above and left out of every sum. Where the two sides
        // do not match (a NaN or Inf on one side only, NaN against Inf, Inf of the other
        // sign), the error at that element is unbounded: it makes the squared difference
        // infinite, so the tensor's relative error is infinite and it is faulty, and it is the
        // position of the largest error. Matching non-finite pairs (NaN and NaN, the same Inf)
        // are equal.
        const bool finite = !(rSpecial | dSpecial);
        const bool bothNan = ((rb & kMantissaMask) != 0) & ((db & kMantissaMask) != 0);
        const bool unbounded = !finite & !(rSpecial & dSpecial & (bothNan | (rb == db)));
        constexpr double kInf = std::numeric_limits<double>::infinity();
        const double rv = static_cast<double>(finite ? r : 0.0f);
        const double dv = static_cast<double>(finite ? d : 0.0f);
        const double diff = dv - rv;
        sumSqDiff[lane] += unbounded ? kInf : diff * diff;
        sumSqRef[lane] += rv * rv;
        sumSqDist[lane] += dv * dv;
        sumDot[lane] += dv * rv;
        const double absErr = diff < 0 ? -diff : diff;
        const double absCandidate = unbounded ? kInf : (finite ? absErr : -1.0);
        // Selects, not branches, so that the loop stays vectorisable.
        const bool absBetter = absCandidate > maxAbs[lane];
        maxAbs[lane] = absBetter ? absCandidate : maxAbs[lane];
        maxAbsPos[lane] = absBetter ? pos : maxAbsPos[lane];
        const bool nonZeroRef = finite & (rv != 0.0);
        const double absRef = rv < 0 ? -rv : rv;
        // Divide unconditionally (by 1 where R == 0): a conditional division blocks if-conversion.
        const double rel = absErr / (nonZeroRef ? absRef : 1.0);
        const double relCandidate = unbounded ? kInf : (nonZeroRef ? rel : -1.0);
        const bool relBetter = relCandidate > maxRel[lane];
        maxRel[lane] = relBetter ? relCandidate : maxRel[lane];
        maxRelPos[lane] = relBetter ? pos : maxRelPos[lane];
        zeroRef[lane] += finite & (rv == 0.0) & (dv != rv);
    }

    ErrorAccumulator finish(std::int64_t n) const {
        ErrorAccumulator acc;
        acc.count = n;
        for (std::size_t l = 0; l < kLanes; ++l) {
            ErrorAccumulator lane;
            lane.sumSqDiff = sumSqDiff[l];
            lane.sumSqRef = sumSqRef[l];
            lane.sumSqDist = sumSqDist[l];
            lane.sumDot = sumDot[l];
            if (maxAbsPos[l] >= 0) {
                lane.maxAbsError = maxAbs[l];
                lane.maxAbsPos = maxAbsPos[l];
            }
            if (maxRelPos[l] >= 0) {
                lane.maxRelError = maxRel[l];
                lane.maxRelPos = maxRelPos[l];
            }
            lane.zeroRefMismatches = zeroRef[l];
            lane.nanDist = nanDist[l];
            lane.infDist = infDist[l];
            lane.nanRef = nanRef[l];
            lane.infRef = infRef[l];
            lane.bitDifferences = bits[l];
            acc.merge(lane);  // ties go to the smaller position: the first maximum
        }
        return acc;
    }
};

// Elements per sub-block of the fast path: a NaN or Inf makes the careful path redo one
// sub-block only.
constexpr std::size_t kSubBlock = 4096;

std::uint32_t bitsOf(float value) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    return bits;
}

// The common case, a sub-block of finite values: sums and maxima in independent lanes, so the
// loop vectorises. Each lane keeps the step at which its maxima were set, a select per maximum:
// searching for the positions afterwards cost as much as the comparison itself on small shard
// pieces. Returns nullopt when the sub-block holds a NaN or Inf: then its sums mean nothing and
// the careful path redoes it. No separate test is needed for that: a non-finite value makes
// the sum of squares NaN or Inf, while squares of finite floats cannot overflow a double.
//
// Every maximum and sum is a chain from one step to the next, so more lanes are more chains in
// flight, as long as the registers hold them (measured per element with AVX-512: 8 lanes
// 0.75 ns, 16 lanes 0.60 ns, 32 lanes 0.85 ns; with AVX2's 16 registers, 8 lanes 1.17 ns and
// 16 lanes 1.26 ns). Inlined into one function per instruction set below. The order of the
// additions, hence the last bits of a sum, thus depends on the processor (as FMA contraction
// made it do before); on one machine a result never depends on threads or processes.
template <std::size_t kFastLanes>
[[gnu::always_inline]] inline std::optional<ErrorAccumulator> compareFiniteLanes(
    const float* reference, std::size_t referenceStride, const float* distributed,
    std::size_t rowLength, std::size_t rows) {
    std::array<double, kFastLanes> sumSqDiff{}, sumSqRef{}, sumSqDist{}, maxAbs;
    maxAbs.fill(-1.0);  // below every |D-R|, so the first pair sets a position
    // The largest |D-R| / |R| of each lane as the pair (|D-R|, |R|), compared by cross
    // multiplication: a division per element was the most expensive instruction of the loop.
    // -1/1 is below every ratio.
    std::array<double, kFastLanes> relNum, relDen;
    relNum.fill(-1.0);
    relDen.fill(1.0);
    // The step (index of the lane's first element) where each maximum was set; doubles hold
    // it exactly and keep the selects the width of the values.
    std::array<double, kFastLanes> absAt, relAt;
    absAt.fill(-1.0);
    relAt.fill(-1.0);
    // A sub-block has at most kSubBlock elements: 32-bit counters cannot overflow.
    std::array<std::int32_t, kFastLanes> zeroRef{}, bits{};
    // Inlined by force: a clone cannot inline a lambda of the default target by itself.
    const auto step = [&](std::size_t l, float rf, float df, double at)
        __attribute__((always_inline)) {
        const double r = rf;
        const double d = df;
        const double diff = d - r;
        sumSqDiff[l] += diff * diff;
        sumSqRef[l] += r * r;
        sumSqDist[l] += d * d;
        const double absErr = std::fabs(diff);  // fabs, not a select: vectorised without AVX too
        const bool absBetter = absErr > maxAbs[l];  // strictly: the first maximum of the lane
        maxAbs[l] = absBetter ? absErr : maxAbs[l];
        absAt[l] = absBetter ? at : absAt[l];
        const double absRef = std::fabs(r);
        const bool relBetter = (absRef != 0.0) & (absErr * relDen[l] > relNum[l] * absRef);
        relNum[l] = relBetter ? absErr : relNum[l];
        relDen[l] = relBetter ? absRef : relDen[l];
        relAt[l] = relBetter ? at : relAt[l];
        zeroRef[l] += (rf == 0.0f) & (df != rf);
        bits[l] += bitsOf(rf) != bitsOf(df);
    };
    // Positions are offsets into D, whose rows are packed. Lanes carry on from one row to the
    // next, so that short rows cost no more than one long one.
    for (std::size_t row = 0; row < rows; ++row) {
        const float* r = reference + row * referenceStride;
        const float* d = distributed + row * rowLength;
        const std::size_t base = row * rowLength;
        std::size_t i = 0;
        for (; i + kFastLanes <= rowLength; i += kFastLanes) {
            const auto at = static_cast<double>(base + i);
            for (std::size_t l = 0; l < kFastLanes; ++l) {
                step(l, r[i + l], d[i + l], at);
            }
        }
        const auto tailAt = static_cast<double>(base + i);
        for (std::size_t l = 0; i < rowLength; ++i, ++l) {
            step(l, r[i], d[i], tailAt);
        }
    }
    const std::size_t n = rows * rowLength;
    ErrorAccumulator acc;
    acc.count = static_cast<std::int64_t>(n);
    for (std::size_t l = 0; l < kFastLanes; ++l) {
        ErrorAccumulator lane;
        lane.sumSqDiff = sumSqDiff[l];
        lane.sumSqRef = sumSqRef[l];
        lane.sumSqDist = sumSqDist[l];
        if (absAt[l] >= 0.0) {
            lane.maxAbsError = maxAbs[l];
            lane.maxAbsPos = static_cast<std::int64_t>(absAt[l]) + static_cast<std::int64_t>(l);
        }
        if (relAt[l] >= 0.0) {
            lane.maxRelError = relNum[l] / relDen[l];
            lane.maxRelPos = static_cast<std::int64_t>(relAt[l]) + static_cast<std::int64_t>(l);
        }
        lane.zeroRefMismatches = zeroRef[l];
        lane.bitDifferences = bits[l];
        acc.merge(lane);  // ties go to the smaller position: the first maximum
    }
    if (!std::isfinite(acc.sumSqRef) || !std::isfinite(acc.sumSqDist)) {
        return std::nullopt;
    }
    // sum(D*R) from |D-R|^2 = |D|^2 + |R|^2 - 2 D.R, one product less per element. Its rounding
    // error is a few units of the last place of the larger norm, as for a direct sum.
    acc.sumDot = 0.5 * (acc.sumSqRef + acc.sumSqDist - acc.sumSqDiff);
    return acc;
}

#if defined(__x86_64__)
__attribute__((target("arch=x86-64-v4"))) std::optional<ErrorAccumulator> compareFiniteAvx512(
    const float* reference, std::size_t referenceStride, const float* distributed,
    std::size_t rowLength, std::size_t rows) {
    return compareFiniteLanes<16>(reference, referenceStride, distributed, rowLength, rows);
}

__attribute__((target_clones("arch=x86-64-v3", "default"))) std::optional<ErrorAccumulator>
compareFiniteAvx2(const float* reference, std::size_t referenceStride, const float* distributed,
                  std::size_t rowLength, std::size_t rows) {
    return compareFiniteLanes<8>(reference, referenceStride, distributed, rowLength, rows);
}

std::optional<ErrorAccumulator> compareFinite(const float* reference, std::size_t referenceStride,
                                              const float* distributed, std::size_t rowLength,
                                              std::size_t rows) {
    static const bool avx512 = __builtin_cpu_supports("x86-64-v4") != 0;
    return avx512 ? compareFiniteAvx512(reference, referenceStride, distributed, rowLength, rows)
                  : compareFiniteAvx2(reference, referenceStride, distributed, rowLength, rows);
}
#else
// Other processors (ARM's NEON has 32 registers of two doubles): the compiler's own target.
std::optional<ErrorAccumulator> compareFinite(const float* reference, std::size_t referenceStride,
                                              const float* distributed, std::size_t rowLength,
                                              std::size_t rows) {
    return compareFiniteLanes<8>(reference, referenceStride, distributed, rowLength, rows);
}
#endif

void shiftPositions(ErrorAccumulator& acc, std::size_t offset) {
    if (acc.maxAbsPos >= 0) {
        acc.maxAbsPos += static_cast<std::int64_t>(offset);
    }
    if (acc.maxRelPos >= 0) {
        acc.maxRelPos += static_cast<std::int64_t>(offset);
    }
}

class CpuBackend final : public MetricsBackend {
public:
    QString name() const override { return QStringLiteral("CPU"); }

    ErrorAccumulator compare(const float* reference, const float* distributed,
                             std::size_t n) const override {
        ErrorAccumulator total;
        for (std::size_t start = 0; start < n; start += kSubBlock) {
            const std::size_t count = std::min(kSubBlock, n - start);
            auto part = compareSubBlock(reference + start, count, distributed + start, count, 1);
            shiftPositions(part, start);
            total.merge(part);
        }
        return total;
    }

    ErrorAccumulator compareRows(const float* reference, std::size_t referenceStride,
                                 const float* distributed, std::size_t rowLength,
                                 std::size_t rows) const override {
        if (rowLength == 0 || rows == 0) {
            return {};
        }
        if (rowLength >= kSubBlock || rows == 1) {  // each row is a sub-block or more
            return rowByRow(
                reference, referenceStride, distributed, rowLength, rows,
                [this](const float* r, const float* d, std::size_t n) { return compare(r, d, n); });
        }
        // Sub-blocks of whole rows.
        const std::size_t rowsPerSubBlock = kSubBlock / rowLength;
        ErrorAccumulator total;
        for (std::size_t first = 0; first < rows; first += rowsPerSubBlock) {
            const std::size_t count = std::min(rowsPerSubBlock, rows - first);
            auto part = compareSubBlock(reference + first * referenceStride, referenceStride,
                                        distributed + first * rowLength, rowLength, count);
            shiftPositions(part, first * rowLength);
            total.merge(part);
        }
        return total;
    }

private:
    // At most kSubBlock elements in rows: the fast path, or where it meets a NaN or Inf, the
    // careful one.
    static ErrorAccumulator compareSubBlock(const float* reference, std::size_t referenceStride,
                                            const float* distributed, std::size_t rowLength,
                                            std::size_t rows) {
        if (auto fast = compareFinite(reference, referenceStride, distributed, rowLength, rows)) {
            return *fast;
        }
        return rowByRow(reference, referenceStride, distributed, rowLength, rows,
                        compareWithSpecials);
    }

    // Compares each row with `compareRun` and merges the results, positions offsets into D.
    template <typename CompareRun>
    static ErrorAccumulator rowByRow(const float* reference, std::size_t referenceStride,
                                     const float* distributed, std::size_t rowLength,
                                     std::size_t rows, CompareRun compareRun) {
        ErrorAccumulator total;
        for (std::size_t row = 0; row < rows; ++row) {
            auto part = compareRun(reference + row * referenceStride, distributed + row * rowLength,
                                   rowLength);
            shiftPositions(part, row * rowLength);
            total.merge(part);
        }
        return total;
    }

    // NaN and Inf need per-element care: the general lane loop.
    static ErrorAccumulator compareWithSpecials(const float* reference, const float* distributed,
                                                std::size_t n) {
        Lanes lanes;
        std::size_t i = 0;
        for (; i + kLanes <= n; i += kLanes) {
            for (std::size_t l = 0; l < kLanes; ++l) {
                lanes.add(l, static_cast<std::int64_t>(i + l), reference[i + l],
                          distributed[i + l]);
            }
        }
        for (std::size_t l = 0; i + l < n; ++l) {
            lanes.add(l, static_cast<std::int64_t>(i + l), reference[i + l], distributed[i + l]);
        }
        return lanes.finish(static_cast<std::int64_t>(n));
    }
};

}  // namespace

std::unique_ptr<MetricsBackend> makeCpuBackend() {
    return std::make_unique<CpuBackend>();
}

}  // namespace ttrace
