#include "compare/CommonGradientFactor.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <utility>

namespace ttrace {

namespace {

// The total norm is summed in fp32 (torch accumulates bf16 and fp16 in fp32 too).
constexpr double kUnitRoundoff = 0x1p-24;
// Sequential sums of N squares differ from another order's by about 0.41 sqrt(N) u in the
// norm (docs/thresholds.md); 4 sqrt(N) u is ten of those.
constexpr double kRoundOffsWide = 4;
// A median of fewer gradients says nothing about what they have in common.
constexpr int kFewestGradients = 3;
// A factor is common when it stands out of the gradients' own scatter around it by this much;
// else the errors are each gradient's own (bf16 round-off) and removing it would only move
// them.
constexpr double kAboveScatter = 3;

bool isGradient(const TensorResult& result) {
    return result.key.kind == TensorKind::ParamGrad || result.key.kind == TensorKind::MainGrad;
}

// The factor alpha that best maps R onto D for this tensor alone: 1 + <D - R, R> / ||R||^2.
std::optional<double> ownFactor(const ErrorMetrics& m) {
    if (!(m.refNorm > 0) || !std::isfinite(m.relativeError) || m.hasNonFinite()) {
        return std::nullopt;
    }
    return m.cosine * m.distNorm / m.refNorm;
}

double median(std::vector<double> values) {
    const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
    std::nth_element(values.begin(), middle, values.end());
    if (values.size() % 2 == 1) {
        return *middle;
    }
    return (*middle + *std::max_element(values.begin(), middle)) / 2;
}

// The largest |alpha - 1| removed from the gradients of each iteration or an earlier one: an
// optimizer's state carries every earlier step's gradients.
std::map<int, double> factorsSoFar(const std::vector<CommonGradientFactor>& fits) {
    std::map<int, double> largest;
    for (const auto& fit : fits) {
        if (fit.removed()) {
            largest[fit.iteration] = std::max(largest[fit.iteration], std::abs(fit.factor - 1));
        }
    }
    double soFar = 0;
    for (auto& [iteration, value] : largest) {
        soFar = std::max(soFar, value);
        value = soFar;
    }
    return largest;
}

std::optional<double> factorSoFar(const std::map<int, double>& soFar, int iteration) {
    auto after = soFar.upper_bound(iteration);
    if (after == soFar.begin()) {
        return std::nullopt;
    }
    return std::prev(after)->second;
}

// A parameter updated from gradients that carried a factor: Adam's step is the same for any
// factor common to all steps but rounds differently, and moves by the change of the factor
// between steps; SGD's step moves by the factor itself. Either way the step, p_new - p_old,
// moves by at most |alpha - 1| of itself, and ||p_new - p_old|| <= ||p_new|| + ||p_old||: the
// threshold of the updated parameter (and of the next iteration's parameter, the same values)
// is at least that, relative to ||p_new||. Each is counted in the fit of its iteration's
// step when it is within tolerance only so.
void allowForUpdates(std::vector<TensorResult>& results, std::vector<CommonGradientFactor>& fits) {
    const auto soFar = factorsSoFar(fits);
    if (soFar.empty()) {
        return;
    }
    std::map<std::pair<QString, int>, double> paramNorms;  // (name, iteration) -> ||R||
    for (const auto& result : results) {
        if (result.key.kind == TensorKind::Param) {
            paramNorms[{result.key.name, result.key.iteration}] = result.metrics.refNorm;
        }
    }
    for (auto& result : results) {
        const TensorKind kind = result.key.kind;
        // The iteration whose step made these values.
        const int step = result.key.iteration - (kind == TensorKind::Param ? 1 : 0);
        if ((kind != TensorKind::UpdatedParam && kind != TensorKind::Param) || step < 0) {
            continue;
        }
        const auto factor = factorSoFar(soFar, step);
        const auto before = paramNorms.find({result.key.name, step});
        const double after = result.metrics.refNorm;
        if (!factor || before == paramNorms.end() || !(after > 0)) {
            continue;
        }
        const bool faulty = result.isFaulty();
        auto& threshold = result.threshold;
        threshold.stepAllowance = *factor * (after + before->second) / after;
        if (*threshold.stepAllowance > threshold.value) {
            threshold.value = *threshold.stepAllowance;
            threshold.method = ThresholdMethod::StepAllowance;
        }
        result.normalizedError = threshold.normalize(result.judgedError());
        judgeShards(result.shards, result);
        if (faulty && !result.isFaulty()) {
            for (auto& fit : fits) {
                if (fit.iteration == step && fit.removed()) {
                    ++fit.updatesAccepted;
                    break;
                }
            }
        }
    }
}

}  // namespace

bool CommonGradientFactor::removed() const {
    const double distance = std::abs(factor - 1);
    return distance <= bound && distance >= kAboveScatter * scatter;
}

std::vector<CommonGradientFactor> removeCommonGradientFactors(std::vector<TensorResult>& results) {
    struct Group {
        std::vector<std::size_t> members;
        std::vector<double> factors;
        std::int64_t elements = 0;
    };
    std::map<std::pair<int, TensorKind>, Group> groups;
    for (std::size_t i = 0; i < results.size(); ++i) {
        const auto& result = results[i];
        if (!isGradient(result)) {
            continue;
        }
        auto& group = groups[{result.key.iteration, result.key.kind}];
        group.members.push_back(i);
        group.elements += result.metrics.count;
        if (const auto factor = ownFactor(result.metrics)) {
            group.factors.push_back(*factor);
        }
    }
    std::vector<CommonGradientFactor> fits;
    for (const auto& [slot, group] : groups) {
        if (static_cast<int>(group.factors.size()) < kFewestGradients) {
            continue;
        }
        CommonGradientFactor fit;
        fit.iteration = slot.first;
        fit.kind = slot.second;
        // The median, not a least-squares fit over all of them: one wrong gradient does not
        // move it, and stays wrong beyond it.
        fit.factor = median(group.factors);
        std::vector<double> deviations;
        for (const double own : group.factors) {
            deviations.push_back(std::abs(own - fit.factor));
        }
        fit.scatter = median(deviations);
        fit.elements = group.elements;
        fit.tensors = static_cast<int>(group.factors.size());
        fit.bound = kRoundOffsWide * std::sqrt(static_cast<double>(fit.elements)) * kUnitRoundoff;
        if (fit.removed()) {
            for (const auto i : group.members) {
                auto& result = results[i];
                const bool faulty = result.isFaulty();
                result.commonFactor = fit.factor;
                result.normalizedError = result.threshold.normalize(result.judgedError());
                judgeShards(result.shards, result);
                fit.acceptedBeyond += faulty && !result.isFaulty() ? 1 : 0;
            }
        }
        fits.push_back(fit);
    }
    allowForUpdates(results, fits);
    return fits;
}

Diagnostics describeRemovedFactors(const std::vector<CommonGradientFactor>& fits,
                                   const QString& folder) {
    Diagnostics notes;
    for (const auto& fit : fits) {
        if (!fit.removed() || fit.acceptedBeyond + fit.updatesAccepted == 0) {
            continue;
        }
        notes.push_back(fileDiagnostic(
            Severity::Info, folder,
            QStringLiteral(
                "the %1 tensors of iteration %2 are %3 times the reference's, a factor common "
                "to all %4 of them and within what their total norm's round-off explains "
                "(|factor - 1| <= %5 = 4 sqrt(N) u, N = %6 elements; gradient clipping or a "
                "loss scale summed in another order): each is judged by its error beyond it, "
                "and %7 of them are within tolerance only so%8")
                .arg(tensorKindName(fit.kind))
                .arg(fit.iteration)
                .arg(QString::number(fit.factor, 'g', 8))
                .arg(fit.tensors)
                .arg(QString::number(fit.bound, 'g', 3))
                .arg(fit.elements)
                .arg(fit.acceptedBeyond)
                .arg(fit.updatesAccepted == 0
                         ? QString()
                         : QStringLiteral("; %1 parameters updated from them are within "
                                          "tolerance only by the share of their step the "
                                          "factor can move")
                               .arg(fit.updatesAccepted))));
    }
    return notes;
}

void judgeShards(std::vector<ShardResult>& shards, const TensorResult& result) {
    for (auto& shard : shards) {
        shard.normalizedError = result.threshold.normalize(
            relativeErrorBeyondFactor(shard.metrics, result.commonFactor));
    }
}

}  // namespace ttrace
