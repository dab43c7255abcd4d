#include "compare/Threshold.h"

#include <QRegularExpression>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace ttrace {

double Threshold::normalize(double relativeError) const {
    if (value > 0) {
        return relativeError / value;
    }
    return relativeError > 0 ? std::numeric_limits<double>::infinity() : 0.0;
}

QString thresholdMethodName(ThresholdMethod method) {
    switch (method) {
        case ThresholdMethod::Perturbation:
            return QStringLiteral("perturbation");
        case ThresholdMethod::Theoretical:
            return QStringLiteral("theoretical");
        case ThresholdMethod::Override:
            return QStringLiteral("override");
        case ThresholdMethod::StepAllowance:
            return QStringLiteral("step allowance");
    }
    return {};
}

namespace {

// Number of round-off amplifying steps between the run's inputs and this tensor in the error
// analysis (docs/thresholds.md): forward grows with the layer, backward starts after the
// whole forward and grows as it walks back to layer 0 (Megatron-LM: L+1-l).
int errorDepth(TensorKind kind, int layer, int numLayers) {
    const int layers = std::max(numLayers, 1);
    if (kind == TensorKind::Param) {
        return 0;  // parameters are inputs of the step: only storage rounding
    }
    if (layer < 0 || layer >= layers) {
        // Outside the layers (embedding before them, final norm and loss after): the layer
        // number alone cannot tell which, so take the deepest position, the loose end.
        return layers + 1;
    }
    if (kind == TensorKind::ForwardInput || kind == TensorKind::ForwardOutput) {
        return layer + 1;
    }
    return layers + 1 - layer;  // gradients, and updated parameters made from them
}

bool globMatches(const QString& pattern, const QString& name) {
    // Compiled once per pattern and thread: a check matches every tensor against every
    // override. Anchored: the pattern must cover the whole name ("layers.*.mlp.*").
    thread_local std::map<QString, QRegularExpression> compiled;
    auto it = compiled.find(pattern);
    if (it == compiled.end()) {
        it = compiled
                 .emplace(pattern, QRegularExpression(
                                       QRegularExpression::wildcardToRegularExpression(pattern)))
                 .first;
    }
    return it->second.match(name).hasMatch();
}

const ThresholdOverride* findOverride(const TensorKey& key, const ThresholdConfig& config) {
    for (const auto& item : config.overrides) {
        if (item.kind && *item.kind != key.kind) {
            continue;
        }
        if (globMatches(item.pattern, key.name)) {
            return &item;
        }
    }
    return nullptr;
}

}  // namespace

std::optional<double> declaredPerturbationBound(const TensorKey& key, DType dtype,
                                                DType computeDtype,
                                                std::optional<double> declared) {
    if (!declared || key.kind != TensorKind::Param || key.iteration != 0) {
        return std::nullopt;
    }
    return 2.0 * *declared + std::max(machineEpsilon(dtype), machineEpsilon(computeDtype));
}

double safetyFactorFor(const TensorKey& key, const ThresholdConfig& config) {
    const ThresholdOverride* match = findOverride(key, config);
    return (match && match->safetyFactor) ? *match->safetyFactor : config.safetyFactor;
}

TheoryEpsilon theoryEpsilon(TensorKind kind, DType computeDtype,
                            std::optional<DType> operandDtype) {
    // A recipe that rounds GEMM operands to fp8 or fp4 lets round-off of the compute dtype
    // move an operand by a whole step of that format where it falls near a rounding boundary,
    // and every activation and gradient after the first such GEMM carries it. Parameters do
    // not: a step moves them by a learning rate's share of a gradient, so they keep their
    // own round-off.
    const bool isParameter = kind == TensorKind::Param || kind == TensorKind::UpdatedParam;
    if (operandDtype && !isParameter &&
        elementEpsilon(*operandDtype) > machineEpsilon(computeDtype)) {
        return {elementEpsilon(*operandDtype), *operandDtype};
    }
    return {machineEpsilon(computeDtype), computeDtype};
}

Threshold computeThreshold(const ThresholdInput& input, const ThresholdConfig& config) {
    const double eps = machineEpsilon(input.computeDtype);
    const ThresholdOverride* match = findOverride(input.key, config);
    const double safety =
        (match && match->safetyFactor) ? *match->safetyFactor : config.safetyFactor;

    Threshold t;
    t.floor = config.floorFactor * eps;
    // Only in the recipe's own quantized formats: bf16 where an fp32 run's reference holds
    // fp32 is a precision fault to show, not a rounding to allow.
    const bool coarser =
        input.referenceDtype && input.operandDtype && isScaled(input.dtype) &&
        elementEpsilon(input.dtype) > std::max(eps, elementEpsilon(*input.referenceDtype));
    const bool otherGrid = input.ownScales && elementEpsilon(input.dtype) > eps;
    if (coarser || otherGrid) {
        t.floor = config.floorFactor * elementEpsilon(input.dtype);
    }
    int depth = errorDepth(input.key.kind, input.layer, input.numLayers);
    if (input.madeInForward) {
        depth = std::max(depth, errorDepth(TensorKind::ForwardInput, input.layer, input.numLayers));
    }
    t.theoretical = config.theoryK * std::pow(config.theoryC, depth) *
                    theoryEpsilon(input.key.kind, input.computeDtype, input.operandDtype).value;
    if (match && match->safetyFactor && config.safetyFactor > 0) {
        // A module declared noisier is loosened by the same ratio in both estimates.
        t.theoretical *= *match->safetyFactor / config.safetyFactor;
    }

    t.perturbationError = input.perturbationError;
    // A non-finite or negative e_pert (a broken perturbed reference) says nothing about
    // round-off; nor does one of the tensor's own size or more: a perturbation that moves a
    // tensor that far (a zeroed dataset moves it by 1, a flipped exponent bit by 2^100) is
    // damage, not round-off. Fall back to the theoretical bound rather than to a threshold no
    // bug could exceed.
    const auto bound = declaredPerturbationBound(input.key, input.dtype, input.computeDtype,
                                                 input.declaredPerturbation);
    const bool perturbationUsable =
        input.perturbationError && std::isfinite(*input.perturbationError) &&
        *input.perturbationError >= 0 && *input.perturbationError < Threshold::kFirstOrderLimit &&
        (!bound || *input.perturbationError <= *bound);
    if (perturbationUsable) {
        t.perturbationThreshold = std::max(safety * *input.perturbationError, t.floor);
        t.value = *t.perturbationThreshold;
        t.method = ThresholdMethod::Perturbation;
    } else {
        t.value = std::max(t.theoretical, t.floor);
        t.method = ThresholdMethod::Theoretical;
    }

    if (match && match->threshold) {
        t.value = *match->threshold;  // the user's number, as given, even below the floor
        t.method = ThresholdMethod::Override;
        t.overridePattern = match->pattern;
    }
    return t;
}

}  // namespace ttrace
