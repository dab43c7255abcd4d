#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "compare/MetricsBackend.h"

namespace ttrace {

namespace {

constexpr std::uint32_t kExponentMask = 0x7f800000u;
constexpr std::uint32_t kMantissaMask = 0x007fffffu;

// Elements per sub-block: a NaN or Inf makes the careful path redo one sub-block only, and its
// 32-bit counters cannot overflow.
constexpr std::size_t kSubBlock = 4096;

std::uint32_t bitsOf(float value) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    return bits;
}

// One pass over a sub-block of rows (run k of R at reference + k * referenceStride, of D at
// distributed + k * rowLength; positions are offsets into D), with sums and maxima in
// independent lanes so that the loop vectorises. Each lane keeps the step at which its maxima
// were set, a select per maximum: searching for the positions afterwards cost as much as the
// comparison itself on small shard pieces. Lanes carry on from one row to the next, so that
// short rows cost no more than one long one.
//
// Two variants. The fast one (kSpecials false) is for the common case, finite values: it
// returns nullopt when the sub-block holds a NaN or Inf, and the careful one (kSpecials true)
// redoes it. No separate test is needed for that: a non-finite value makes a sum of squares
// NaN or Inf, while squares of finite floats cannot overflow a double. The careful one counts
// NaN and Inf and treats unmatched ones as unbounded errors. GCC 12 does not vectorise it
// (about 7 ns per element, against 0.6 for the fast one), which sub-blocks with a NaN pay.
//
// Every maximum and sum is a chain from one step to the next, so more lanes are more chains in
// flight, as long as the registers hold them (measured per element with AVX-512: 8 lanes
// 0.75 ns, 16 lanes 0.60 ns, 32 lanes 0.85 ns; with AVX2's 16 registers, 8 lanes 1.17 ns and
// 16 lanes 1.26 ns). Inlined into one function per instruction set below. The order of the
// additions, hence the last bits of a sum, thus depends on the processor (as FMA contraction
// made it do before); on one machine a result never depends on threads or processes.
template <std::size_t kLaneCount, bool kSpecials>
[[gnu::always_inline]] inline std::optional<ErrorAccumulator> compareLanes(
    const float* reference, std::size_t referenceStride, const float* distributed,
    std::size_t rowLength, std::size_t rows) {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    std::array<double, kLaneCount> sumSqDiff{}, sumSqRef{}, sumSqDist{}, sumDot{}, maxAbs;
    maxAbs.fill(-1.0);  // below every |D-R|, so the first pair sets a position
    // The largest |D-R| / |R| of each lane as the pair (|D-R|, |R|), compared by cross
    // multiplication: a division per element was the most expensive instruction of the loop.
    // -1/1 is below every ratio.
    std::array<double, kLaneCount> relNum, relDen;
    relNum.fill(-1.0);
    relDen.fill(1.0);
    // The step (index of the lane's first element) where each maximum was set; doubles hold
    // it exactly and keep the selects the width of the values.
    std::array<double, kLaneCount> absAt, relAt;
    absAt.fill(-1.0);
    relAt.fill(-1.0);
    std::array<std::int32_t, kLaneCount> zeroRef{}, bits{}, nanRef{}, infRef{}, nanDist{},
        infDist{};
    // Inlined by force: a clone cannot inline a lambda of the default target by itself.
    const auto step = [&](std::size_t l, float rf, float df, double at)
        __attribute__((always_inline)) {
        const std::uint32_t rb = bitsOf(rf), db = bitsOf(df);
        bits[l] += rb != db;
        double r = rf, d = df;
        bool finite = true, unbounded = false;
        if constexpr (kSpecials) {
            const bool rSpecial = (rb & kExponentMask) == kExponentMask;
            const bool dSpecial = (db & kExponentMask) == kExponentMask;
            const bool rNan = rSpecial & ((rb & kMantissaMask) != 0);
            const bool dNan = dSpecial & ((db & kMantissaMask) != 0);
            nanRef[l] += rNan;
            infRef[l] += rSpecial & !rNan;
            nanDist[l] += dNan;
            infDist[l] += dSpecial & !dNan;
            // Non-finite pairs are counted above and left out of every sum. Where the two
            // sides do not match (a NaN or Inf on one side only, NaN against Inf, Inf of the
            // other sign), the error at that element is unbounded: it makes the squared
            // difference infinite, so the tensor's relative error is infinite and it is faulty,
            // and it is the position of the largest error. Matching non-finite pairs (NaN and
            // NaN, the same Inf) are equal.
            finite = !(rSpecial | dSpecial);
            unbounded = !finite & !(rSpecial & dSpecial & ((rNan & dNan) | (rb == db)));
            r = finite ? r : 0.0;
            d = finite ? d : 0.0;
        }
        const double diff = d - r;
        sumSqRef[l] += r * r;
        sumSqDist[l] += d * d;
        const double absErr = std::fabs(diff);  // fabs, not a select: vectorised without AVX too
        const double absRef = std::fabs(r);
        double absCandidate = absErr;
        bool relBetter = (absRef != 0.0) & (absErr * relDen[l] > relNum[l] * absRef);
        double num = absErr, den = absRef;
        if constexpr (kSpecials) {
            sumSqDiff[l] += unbounded ? kInf : diff * diff;
            sumDot[l] += d * r;  // not derived from the other sums: sumSqDiff may be infinite
            // -1 leaves matching non-finite pairs out of the maxima; an unbounded error is the
            // largest, the first one of the lane.
            absCandidate = unbounded ? kInf : (finite ? absErr : -1.0);
            relBetter = unbounded ? relNum[l] != kInf : relBetter;  // non-finite: absRef == 0
            num = unbounded ? kInf : absErr;
            den = unbounded ? 1.0 : absRef;
        } else {
            sumSqDiff[l] += diff * diff;
        }
        const bool absBetter = absCandidate > maxAbs[l];  // strictly: the first maximum
        maxAbs[l] = absBetter ? absCandidate : maxAbs[l];
        absAt[l] = absBetter ? at : absAt[l];
        relNum[l] = relBetter ? num : relNum[l];
        relDen[l] = relBetter ? den : relDen[l];
        relAt[l] = relBetter ? at : relAt[l];
        zeroRef[l] += finite & (rf == 0.0f) & (df != rf);
    };
    for (std::size_t row = 0; row < rows; ++row) {
        const float* r = reference + row * referenceStride;
        const float* d = distributed + row * rowLength;
        const std::size_t base = row * rowLength;
        std::size_t i = 0;
        for (; i + kLaneCount <= rowLength; i += kLaneCount) {
            const auto at = static_cast<double>(base + i);
            for (std::size_t l = 0; l < kLaneCount; ++l) {
                step(l, r[i + l], d[i + l], at);
            }
        }
        const auto tailAt = static_cast<double>(base + i);
        for (std::size_t l = 0; i < rowLength; ++i, ++l) {
            step(l, r[i], d[i], tailAt);
        }
    }
    ErrorAccumulator acc;
    acc.count = static_cast<std::int64_t>(rows * rowLength);
    for (std::size_t l = 0; l < kLaneCount; ++l) {
        ErrorAccumulator lane;
        lane.sumSqDiff = sumSqDiff[l];
        lane.sumSqRef = sumSqRef[l];
        lane.sumSqDist = sumSqDist[l];
        lane.sumDot = sumDot[l];
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
        lane.nanRef = nanRef[l];
        lane.infRef = infRef[l];
        lane.nanDist = nanDist[l];
        lane.infDist = infDist[l];
        acc.merge(lane);  // ties go to the smaller position: the first maximum
    }
    if constexpr (!kSpecials) {
        if (!std::isfinite(acc.sumSqRef) || !std::isfinite(acc.sumSqDist)) {
            return std::nullopt;
        }
        // sum(D*R) from |D-R|^2 = |D|^2 + |R|^2 - 2 D.R, one product less per element. Its
        // rounding error is a few units of the last place of the larger norm, as for a direct
        // sum.
        acc.sumDot = 0.5 * (acc.sumSqRef + acc.sumSqDist - acc.sumSqDiff);
    }
    return acc;
}

// The careful variant keeps 8 lanes everywhere: its extra counters would not fit 16.
#if defined(__x86_64__)
__attribute__((target("arch=x86-64-v4"))) std::optional<ErrorAccumulator> compareFiniteAvx512(
    const float* reference, std::size_t referenceStride, const float* distributed,
    std::size_t rowLength, std::size_t rows) {
    return compareLanes<16, false>(reference, referenceStride, distributed, rowLength, rows);
}

__attribute__((target_clones("arch=x86-64-v3", "default"))) std::optional<ErrorAccumulator>
compareFiniteAvx2(const float* reference, std::size_t referenceStride, const float* distributed,
                  std::size_t rowLength, std::size_t rows) {
    return compareLanes<8, false>(reference, referenceStride, distributed, rowLength, rows);
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) ErrorAccumulator
compareCareful(const float* reference, std::size_t referenceStride, const float* distributed,
               std::size_t rowLength, std::size_t rows) {
    return *compareLanes<8, true>(reference, referenceStride, distributed, rowLength, rows);
}

std::optional<ErrorAccumulator> compareFinite(const float* reference, std::size_t referenceStride,
                                              const float* distributed, std::size_t rowLength,
                                              std::size_t rows) {
    // x86-64-v4's AVX-512 subsets, by name: clang knows no level names here.
    static const bool avx512 =
        __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl");
    return avx512 ? compareFiniteAvx512(reference, referenceStride, distributed, rowLength, rows)
                  : compareFiniteAvx2(reference, referenceStride, distributed, rowLength, rows);
}
#else
// Other processors (ARM's NEON has 32 registers of two doubles): the compiler's own target.
std::optional<ErrorAccumulator> compareFinite(const float* reference, std::size_t referenceStride,
                                              const float* distributed, std::size_t rowLength,
                                              std::size_t rows) {
    return compareLanes<8, false>(reference, referenceStride, distributed, rowLength, rows);
}

ErrorAccumulator compareCareful(const float* reference, std::size_t referenceStride,
                                const float* distributed, std::size_t rowLength, std::size_t rows) {
    return *compareLanes<8, true>(reference, referenceStride, distributed, rowLength, rows);
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
    explicit CpuBackend(std::string name) : name_(std::move(name)) {}
    std::string name() const override { return name_; }

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
            ErrorAccumulator total;
            for (std::size_t row = 0; row < rows; ++row) {
                auto part = compare(reference + row * referenceStride,
                                    distributed + row * rowLength, rowLength);
                shiftPositions(part, row * rowLength);
                total.merge(part);
            }
            return total;
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

    void profile(const ProfilePiece& piece, ErrorHistogram& histogram,
                 ErrorImage& image) const override {
        const auto width = static_cast<std::size_t>(image.width);
        std::size_t offset = 0;
        for (std::size_t run = 0; run < piece.rows; ++run) {
            float* pixels =
                image.maxError.data() + static_cast<std::size_t>(piece.pixelRows[run]) * width;
            for (std::size_t j = 0; j < piece.rowLength; ++j, ++offset) {
                const double error = elementError(piece.reference[offset], piece.values[offset]);
                histogram.add(error);
                float& pixel = pixels[piece.pixelColumns[j]];
                pixel = std::max(pixel, static_cast<float>(error));
            }
        }
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
        return compareCareful(reference, referenceStride, distributed, rowLength, rows);
    }

    std::string name_;
};

}  // namespace

std::unique_ptr<MetricsBackend> makeCpuBackend(std::string name) {
    return std::make_unique<CpuBackend>(std::move(name));
}

}  // namespace ttrace
