#include <array>
#include <cstring>

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

    void add(std::size_t lane, std::int64_t pos, float r, float d) {
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
        // Non-finite pairs are counted above and left out of every sum and maximum.
        const bool finite = !(rSpecial | dSpecial);
        const double rv = static_cast<double>(finite ? r : 0.0f);
        const double dv = static_cast<double>(finite ? d : 0.0f);
        const double diff = dv - rv;
        sumSqDiff[lane] += diff * diff;
        sumSqRef[lane] += rv * rv;
        sumSqDist[lane] += dv * dv;
        sumDot[lane] += dv * rv;
        const double absErr = diff < 0 ? -diff : diff;
        const double absCandidate = finite ? absErr : -1.0;
        // Selects, not branches, so that the loop stays vectorisable.
        const bool absBetter = absCandidate > maxAbs[lane];
        maxAbs[lane] = absBetter ? absCandidate : maxAbs[lane];
        maxAbsPos[lane] = absBetter ? pos : maxAbsPos[lane];
        const bool nonZeroRef = finite & (rv != 0.0);
        const double absRef = rv < 0 ? -rv : rv;
        // Divide unconditionally (by 1 where R == 0): a conditional division blocks if-conversion.
        const double rel = absErr / (nonZeroRef ? absRef : 1.0);
        const double relCandidate = nonZeroRef ? rel : -1.0;
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

class CpuBackend final : public MetricsBackend {
public:
    QString name() const override { return QStringLiteral("CPU"); }

    ErrorAccumulator compare(const float* reference, const float* distributed,
                             std::size_t n) const override {
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
