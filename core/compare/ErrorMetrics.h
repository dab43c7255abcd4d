#pragma once

#include <cstdint>
#include <vector>

namespace ttrace {

// Streaming sums of one comparison of a distributed (or perturbed) tensor D against the
// reference R, accumulated in double. Positions are whatever index space the producer uses
// (offsets inside a block for a backend, global linear indices once merged by the job).
struct ErrorAccumulator {
    std::int64_t count = 0;
    double sumSqDiff = 0;  // sum (D-R)^2 over finite pairs
    double sumSqRef = 0;   // sum R^2
    double sumSqDist = 0;  // sum D^2
    double sumDot = 0;     // sum D*R
    double maxAbsError = 0;
    std::int64_t maxAbsPos = -1;
    // max |D-R| / |R| over elements with R != 0; elements with R == 0 and D != 0 are counted
    // in zeroRefMismatches instead, so that one tiny denominator cannot dominate.
    double maxRelError = 0;
    std::int64_t maxRelPos = -1;
    std::int64_t zeroRefMismatches = 0;
    std::int64_t nanDist = 0, infDist = 0, nanRef = 0, infRef = 0;
    // Elements where D and R differ in bits (exact equality check, replicas and sanity).
    std::int64_t bitDifferences = 0;

    // Adds `other`; its positions must be in the same index space as this one's.
    void merge(const ErrorAccumulator& other);
};

// What a user reads: derived from an accumulator.
struct ErrorMetrics {
    std::int64_t count = 0;
    double relativeError = 0;  // ||D-R||_F / ||R||_F (0 when both are 0, inf when only R is)
    double maxAbsError = 0;
    std::vector<std::int64_t> maxAbsIndex;  // global coordinate
    double maxRelError = 0;
    std::vector<std::int64_t> maxRelIndex;
    double cosine = 1;  // <D,R> / (||D|| ||R||), 1 when both are 0
    double refNorm = 0;
    double distNorm = 0;
    std::int64_t zeroRefMismatches = 0;
    std::int64_t nanDist = 0, infDist = 0, nanRef = 0, infRef = 0;
    std::int64_t bitDifferences = 0;

    bool hasNonFinite() const { return nanDist + infDist > 0; }
};

// ||D - factor R|| / ||R|| from the sums `metrics` holds (the error left once a factor common
// to D is taken out); metrics.relativeError when the factor is 1, R is 0 or the error is not
// finite.
[[nodiscard]] double relativeErrorBeyondFactor(const ErrorMetrics& metrics, double factor);

// Turns sums into metrics; positions are global linear indices into `globalShape`.
ErrorMetrics finalizeMetrics(const ErrorAccumulator& acc,
                             const std::vector<std::int64_t>& globalShape);

}  // namespace ttrace
