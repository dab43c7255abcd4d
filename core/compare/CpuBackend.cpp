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

// Elements per sub-block of the fast path: small enough to stay in L1 when a maximum has to
// be located again, large enough that the per-sub-block work is negligible.
constexpr std::size_t kSubBlock = 4096;

std::uint32_t bitsOf(float value) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    return bits;
}

double absError(float r, float d) {
    const double diff = static_cast<double>(d) - static_cast<double>(r);
    return diff < 0 ? -diff : diff;
}

// Lanes of the fast path: eight floats per step, as two AVX2 registers of doubles per
// accumulator (measured: four lanes, one register each, were 10% slower).
constexpr std::size_t kFastLanes = 8;

// The common case, a sub-block of finite values: sums and maxima in independent lanes with no
// per-element position bookkeeping, so the loop vectorises (and gets an AVX2 clone where the
// processor has it). Positions of the maxima are found afterwards, by a second look at the
// sub-block, only when the sub-block raises a maximum. Returns nullopt when the sub-block
// holds a NaN or Inf: then its sums mean nothing and the careful path redoes it. No separate
// test is needed for that: a non-finite value makes the sum of squares NaN or Inf, while
// squares of finite floats cannot overflow a double.
struct FiniteSums {
    ErrorAccumulator acc;      // maxima without positions
    bool hasRelative = false;  // some R != 0, so maxRelError means something
    // maxRelError as the pair (|D-R|, |R|) that set it, so that its position can be found
    // again by multiplication instead of division.
    double relNum = -1.0, relDen = 1.0;
};

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
std::optional<FiniteSums>
compareFinite(const float* reference, const float* distributed, std::size_t n) {
    std::array<double, kFastLanes> sumSqDiff{}, sumSqRef{}, sumSqDist{}, maxAbs{};
    // The largest |D-R| / |R| of each lane as the pair (|D-R|, |R|), compared by cross
    // multiplication: a division per element was the most expensive instruction of the loop.
    // The products are exact (a difference of two floats times a float fits a double's 53
    // bits), so the comparison is exact too. -1/1 is below every ratio.
    std::array<double, kFastLanes> relNum, relDen;
    relNum.fill(-1.0);
    relDen.fill(1.0);
    // A sub-block has at most kSubBlock elements: 32-bit counters cannot overflow.
    std::array<std::int32_t, kFastLanes> zeroRef{}, bits{};
    std::size_t i = 0;
    for (; i + kFastLanes <= n; i += kFastLanes) {
        for (std::size_t l = 0; l < kFastLanes; ++l) {
            const float rf = reference[i + l];
            const float df = distributed[i + l];
            const double r = rf;
            const double d = df;
            const double diff = d - r;
            sumSqDiff[l] += diff * diff;
            sumSqRef[l] += r * r;
            sumSqDist[l] += d * d;
            const double absErr = absError(rf, df);
            maxAbs[l] = std::max(maxAbs[l], absErr);
            const double absRef = r < 0 ? -r : r;
            const bool relBetter = (absRef != 0.0) & (absErr * relDen[l] > relNum[l] * absRef);
            relNum[l] = relBetter ? absErr : relNum[l];
            relDen[l] = relBetter ? absRef : relDen[l];
            zeroRef[l] += (rf == 0.0f) & (df != rf);
            bits[l] += bitsOf(rf) != bitsOf(df);
        }
    }
    for (std::size_t l = 0; i < n; ++i, ++l) {
        const double r = reference[i];
        const double d = distributed[i];
        const double diff = d - r;
        sumSqDiff[l] += diff * diff;
        sumSqRef[l] += r * r;
        sumSqDist[l] += d * d;
        const double absErr = absError(reference[i], distributed[i]);
        maxAbs[l] = std::max(maxAbs[l], absErr);
        const double absRef = r < 0 ? -r : r;
        const bool relBetter = (absRef != 0.0) & (absErr * relDen[l] > relNum[l] * absRef);
        relNum[l] = relBetter ? absErr : relNum[l];
        relDen[l] = relBetter ? absRef : relDen[l];
        zeroRef[l] += (reference[i] == 0.0f) & (distributed[i] != reference[i]);
        bits[l] += bitsOf(reference[i]) != bitsOf(distributed[i]);
    }
    FiniteSums sums;
    ErrorAccumulator& acc = sums.acc;
    acc.count = static_cast<std::int64_t>(n);
    for (std::size_t l = 0; l < kFastLanes; ++l) {
        acc.sumSqDiff += sumSqDiff[l];
        acc.sumSqRef += sumSqRef[l];
        acc.sumSqDist += sumSqDist[l];
        acc.maxAbsError = std::max(acc.maxAbsError, maxAbs[l]);
        if (relNum[l] >= 0.0 && relNum[l] / relDen[l] > acc.maxRelError) {
            acc.maxRelError = relNum[l] / relDen[l];
            sums.relNum = relNum[l];
            sums.relDen = relDen[l];
            sums.hasRelative = true;
        }
        acc.zeroRefMismatches += zeroRef[l];
        acc.bitDifferences += bits[l];
    }
    if (!std::isfinite(acc.sumSqRef) || !std::isfinite(acc.sumSqDist)) {
        return std::nullopt;
    }
    // sum(D*R) from |D-R|^2 = |D|^2 + |R|^2 - 2 D.R, one product less per element. Its rounding
    // error is a few units of the last place of the larger norm, as for a direct sum.
    acc.sumDot = 0.5 * (acc.sumSqRef + acc.sumSqDist - acc.sumSqDiff);
    return sums;
}

// The first position in [0, n) where `matches` holds (it repeats the arithmetic of the pass
// that found the maximum, so the comparison is exact).
template <typename Predicate>
std::int64_t firstPositionWhere(const float* reference, const float* distributed, std::size_t n,
                                Predicate matches) {
    for (std::size_t i = 0; i < n; ++i) {
        if (matches(reference[i], distributed[i])) {
            return static_cast<std::int64_t>(i);
        }
    }
    return -1;
}

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
        // Finite sub-blocks report maxima without positions; the first sub-block holding the
        // largest one is remembered and searched once at the end, instead of searching every
        // sub-block that raises a maximum.
        struct Pending {
            double value = -1.0;
            std::size_t start = 0, count = 0;
            double num = -1.0, den = 1.0;  // the relative maximum as |D-R| and |R|
        };
        Pending abs, rel;
        ErrorAccumulator total;
        for (std::size_t start = 0; start < n; start += kSubBlock) {
            const std::size_t count = std::min(kSubBlock, n - start);
            const float* r = reference + start;
            const float* d = distributed + start;
            if (auto finite = compareFinite(r, d, count)) {
                if (finite->acc.maxAbsError > abs.value) {
                    abs = {finite->acc.maxAbsError, start, count};
                }
                if (finite->hasRelative && finite->acc.maxRelError > rel.value) {
                    rel = {finite->acc.maxRelError, start, count, finite->relNum, finite->relDen};
                }
                total.merge(finite->acc);  // maxima without positions are left out
                continue;
            }
            ErrorAccumulator part = compareWithSpecials(r, d, count);
            shiftPositions(part, start);
            total.merge(part);
        }
        // merge() keeps the earlier position on ties with maxima from NaN/Inf sub-blocks.
        if (abs.value >= 0.0) {
            ErrorAccumulator found;
            found.maxAbsError = abs.value;
            const double target = abs.value;
            found.maxAbsPos = firstPositionWhere(
                reference + abs.start, distributed + abs.start, abs.count,
                [target](float rf, float df) { return absError(rf, df) == target; });
            shiftPositions(found, abs.start);
            total.merge(found);
        }
        if (rel.value >= 0.0) {
            ErrorAccumulator found;
            found.maxRelError = rel.value;
            // The same cross-multiplied test as the pass that found it; zero references have
            // no relative error, so never a position.
            const double num = rel.num, den = rel.den;
            found.maxRelPos = firstPositionWhere(
                reference + rel.start, distributed + rel.start, rel.count,
                [num, den](float rf, float df) {
                    const double absRef = std::fabs(static_cast<double>(rf));
                    return absRef != 0.0 && absError(rf, df) * den == num * absRef;
                });
            shiftPositions(found, rel.start);
            total.merge(found);
        }
        return total;
    }

private:
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
