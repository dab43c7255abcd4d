#include "compare/ErrorMetrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ttrace {

namespace {

// Larger value wins; on a tie the smaller position, so that merging is associative and
// commutative and the result does not depend on how the work was split.
void mergeMax(double& value, std::int64_t& pos, double otherValue, std::int64_t otherPos) {
    if (otherPos < 0) {
        return;
    }
    if (pos < 0 || otherValue > value || (otherValue == value && otherPos < pos)) {
        value = otherValue;
        pos = otherPos;
    }
}

std::vector<std::int64_t> unravel(std::int64_t index, const std::vector<std::int64_t>& shape) {
    if (index < 0) {
        return {};
    }
    std::vector<std::int64_t> coord(shape.size(), 0);
    for (std::size_t d = shape.size(); d-- > 0;) {
        const auto extent = std::max<std::int64_t>(1, shape[d]);
        coord[d] = index % extent;
        index /= extent;
    }
    return coord;
}

}  // namespace

void ErrorAccumulator::merge(const ErrorAccumulator& other) {
    count += other.count;
    sumSqDiff += other.sumSqDiff;
    sumSqRef += other.sumSqRef;
    sumSqDist += other.sumSqDist;
    sumDot += other.sumDot;
    mergeMax(maxAbsError, maxAbsPos, other.maxAbsError, other.maxAbsPos);
    mergeMax(maxRelError, maxRelPos, other.maxRelError, other.maxRelPos);
    zeroRefMismatches += other.zeroRefMismatches;
    nanDist += other.nanDist;
    infDist += other.infDist;
    nanRef += other.nanRef;
    infRef += other.infRef;
    bitDifferences += other.bitDifferences;
}

double relativeErrorBeyondFactor(const ErrorMetrics& metrics, double factor) {
    const double r = metrics.refNorm;
    if (factor == 1 || !(r > 0) || !std::isfinite(metrics.relativeError)) {
        return metrics.relativeError;
    }
    // ||D - aR||^2 = ||D - R||^2 - 2(a - 1)<D - R, R> + (a - 1)^2 ||R||^2, all relative to
    // ||R||^2; <D - R, R> / ||R||^2 = cos ||D|| / ||R|| - 1.
    const double e = metrics.relativeError;
    const double cross = metrics.cosine * metrics.distNorm / r - 1;
    const double a = factor - 1;
    return std::sqrt(std::max(e * e - 2 * a * cross + a * a, 0.0));
}

ErrorMetrics finalizeMetrics(const ErrorAccumulator& acc,
                             const std::vector<std::int64_t>& globalShape) {
    ErrorMetrics metrics;
    metrics.count = acc.count;
    const double diffNorm = std::sqrt(acc.sumSqDiff);
    metrics.refNorm = std::sqrt(acc.sumSqRef);
    metrics.distNorm = std::sqrt(acc.sumSqDist);
    if (metrics.refNorm > 0) {
        metrics.relativeError = diffNorm / metrics.refNorm;
    } else {
        metrics.relativeError = diffNorm > 0 ? std::numeric_limits<double>::infinity() : 0.0;
    }
    if (metrics.refNorm > 0 && metrics.distNorm > 0) {
        // Norms of the rounded sums can put |cos| a hair above 1.
        metrics.cosine = std::clamp(acc.sumDot / (metrics.refNorm * metrics.distNorm), -1.0, 1.0);
    } else {
        metrics.cosine = metrics.refNorm == metrics.distNorm ? 1.0 : 0.0;
    }
    metrics.maxAbsError = acc.maxAbsError;
    metrics.maxAbsIndex = unravel(acc.maxAbsPos, globalShape);
    metrics.maxRelError = acc.maxRelError;
    metrics.maxRelIndex = unravel(acc.maxRelPos, globalShape);
    metrics.zeroRefMismatches = acc.zeroRefMismatches;
    metrics.nanDist = acc.nanDist;
    metrics.infDist = acc.infDist;
    metrics.nanRef = acc.nanRef;
    metrics.infRef = acc.infRef;
    metrics.bitDifferences = acc.bitDifferences;
    return metrics;
}

}  // namespace ttrace
