#include "compare/Fp8Scales.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ttrace {

namespace {

bool isFp8(DType dtype) {
    return dtype == DType::FP8E4M3 || dtype == DType::FP8E5M2;
}

}  // namespace

std::optional<Fp8ScaleCheck> checkFp8Scales(const ComparisonTask& task, const Threshold& threshold,
                                            double safetyFactor) {
    if (!isFp8(task.distributed->dtype) || !isFp8(task.reference->dtype)) {
        return std::nullopt;
    }
    Fp8ScaleCheck check;
    check.referenceScaleInv = task.reference->scaleInv;
    // The scale of one element (the largest) moves with round-off; the perturbed reference
    // shows by how much, and the tensor's theoretical bound is the floor when it shows none
    // (its largest element rounded to the same value).
    double perturbedDifference = 0;
    if (task.perturbed && isFp8(task.perturbed->dtype)) {
        check.perturbedScaleInv = task.perturbed->scaleInv;
        perturbedDifference = std::abs(*check.perturbedScaleInv / check.referenceScaleInv - 1);
    }
    check.tolerance = std::max(safetyFactor * perturbedDifference, threshold.theoretical);

    std::vector<ScaleMismatch> beyond;
    std::optional<double> first;
    for (const auto& shard : task.distributed->shards) {
        for (const auto& replica : shard.replicas) {
            if (replica.summands.size() != 1) {
                continue;
            }
            const double scaleInv = replica.summands.front()->scaleInv;
            check.copiesAgree = check.copiesAgree && (!first || *first == scaleInv);
            first = first.value_or(scaleInv);
            const double ratio = scaleInv / check.referenceScaleInv;
            const double difference = std::abs(ratio - 1);
            check.maxDifference = std::max(check.maxDifference, difference);
            if (difference > check.tolerance) {
                beyond.push_back({shard.ranges, replica.ranks(), scaleInv, ratio});
            }
        }
    }
    // One scale on every copy: the amax was reduced over the tensor's ranks. If it is not the
    // reference's, the tensor's largest element is not: a difference of values, which the
    // value comparison judges (and which cascades from any error upstream), not of scaling.
    if (!check.copiesAgree) {
        check.mismatches = std::move(beyond);
    }
    std::stable_sort(check.mismatches.begin(), check.mismatches.end(),
                     [](const ScaleMismatch& a, const ScaleMismatch& b) {
                         return std::abs(a.ratio - 1) > std::abs(b.ratio - 1);
                     });
    return check;
}

}  // namespace ttrace
