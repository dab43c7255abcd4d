#pragma once

#include <QString>
#include <optional>
#include <vector>

#include "trace/DType.h"
#include "trace/Diagnostic.h"
#include "trace/TensorKey.h"

namespace ttrace {

// StepAllowance: a parameter updated from gradients whose common factor the check took out,
// allowed the factor's share of its step (CommonGradientFactor.h).
enum class ThresholdMethod { Perturbation, Theoretical, Override, StepAllowance };
QString thresholdMethodName(ThresholdMethod method);

// One user override, from the config file: every tensor whose name matches the glob
// `pattern` (and `kind`, when given) gets this threshold or these factors.
struct ThresholdOverride {
    QString pattern;
    std::optional<TensorKind> kind;
    std::optional<double> threshold;     // absolute relative-error threshold
    std::optional<double> safetyFactor;  // replaces the default for matching tensors
};

struct ThresholdConfig {
    double safetyFactor = 8.0;  // perturbation threshold = safetyFactor * e_pert ...
    double floorFactor = 1.0;   // ... but never below floorFactor * eps(compute dtype), or
                                // of a stored format coarser than the reference's
    double theoryK = 4.0;       // theoretical: k * C^depth * eps (Megatron-LM's test: 4, 1.03)
    double theoryC = 1.03;
    std::vector<ThresholdOverride> overrides;  // first match wins
};

// Reads a JSON config (docs/thresholds.md); problems are diagnostics naming the file.
struct ThresholdConfigResult {
    ThresholdConfig config;
    Diagnostics diagnostics;
};
[[nodiscard]] ThresholdConfigResult readThresholdConfig(const QString& path);

// The tolerance of one tensor and how it was set.
struct Threshold {
    double value = 0;  // relative-error threshold in force
    ThresholdMethod method = ThresholdMethod::Theoretical;
    double theoretical = 0;                       // always computed, shown beside
    std::optional<double> perturbationError;      // e_pert = ||P-R|| / ||R||, when available
    std::optional<double> perturbationThreshold;  // max(safety * e_pert, floor)
    double floor = 0;
    QString overridePattern;  // set when method == Override
    // For a parameter updated from gradients that carried a factor common to them
    // (CommonGradientFactor.h): how far the factor may move it, relative. `value` is at least
    // this.
    std::optional<double> stepAllowance;

    // e_pert was measured but not believed: non-finite, beyond the first-order limit, or
    // beyond what the declared perturbation can give (declaredPerturbationBound).
    bool perturbationRejected() const { return perturbationError && !perturbationThreshold; }
    // A relative error in units of this threshold: the normalized error (infinite for an
    // error against a threshold of 0).
    double normalize(double relativeError) const;
    // Too large for a bug to show (docs/thresholds.md, "Blind tensors").
    bool blind() const { return value >= kBlindThreshold; }
    // The relative error of a tensor of zeros: a threshold at least as large cannot tell the
    // tensor from nothing.
    static constexpr double kBlindThreshold = 1.0;
    // An e_pert of this or more is refused whatever the tensor: a tensor moved by its own norm
    // was replaced (a zeroed one is moved by exactly 1), not perturbed. Below it a large e_pert
    // is believed and makes the tensor blind: fp8 training legitimately moves some gradients
    // by half their norm within three iterations (docs/thresholds.md).
    static constexpr double kFirstOrderLimit = 1.0;
};

struct ThresholdInput {
    TensorKey key;
    int layer = -1;            // global layer, -1 outside the layers
    int numLayers = 1;         // global number of layers of the model
    DType dtype = DType::F32;  // the tensor's, as stored
    DType computeDtype = DType::F32;
    // The element format the run's recipe rounds GEMM operands to (Manifest::operandDtype):
    // its epsilon, not the compute dtype's, sets the theoretical bound.
    std::optional<DType> operandDtype;
    // The reference's stored dtype. Where `dtype` is a coarser fp8 or fp4 format of a recipe
    // that quantizes (operandDtype; torchao's tensor parallelism gathers activations in fp8
    // that the reference holds in bf16), the tensor differs from the reference by that
    // format's rounding, which a perturbation of the reference does not show: the floor is
    // that format's epsilon. Not for a run of another recipe in a coarser float (bf16 where
    // an fp32 reference holds fp32): a fault to show.
    std::optional<DType> referenceDtype;
    // The distributed run's fp8 copies carry scales of their own (samples quantized per
    // data-parallel rank: Fp8ScaleCheck::dataParallelBlocks): its values lie on another grid
    // than the reference's, one rounding of `dtype` apart; the floor is its epsilon too.
    bool ownScales = false;
    // A backward GEMM's operand made from the forward (Manifest::madeInForward): its error
    // is the forward's, as deep as the forward has gone, so it takes the deeper of the two
    // depths.
    bool madeInForward = false;
    std::optional<double> perturbationError;
    // The perturbed reference's manifest's perturbation.relative.
    std::optional<double> declaredPerturbation;
};

// The largest e_pert the declared perturbation can give `key` where the analysis knows it
// (docs/thresholds.md, "A perturbed reference that cannot be believed"): a parameter of the
// first iteration is x (1 + relative r), |r| <= 1, rounded to its dtype, so it moves by at
// most relative plus a rounding; twice relative plus one epsilon of the coarser of the stored
// and compute dtypes leaves room for both. None for other tensors, or without a declaration.
[[nodiscard]] std::optional<double> declaredPerturbationBound(const TensorKey& key, DType dtype,
                                                              DType computeDtype,
                                                              std::optional<double> declared);

// The epsilon of a tensor's theoretical bound and the dtype it is of: the compute dtype's,
// or under a recipe that rounds GEMM operands to fp8 or fp4 the coarser operand format's, for
// every tensor but parameters (docs/thresholds.md).
struct TheoryEpsilon {
    double value = 0;
    DType dtype = DType::F32;
};
[[nodiscard]] TheoryEpsilon theoryEpsilon(TensorKind kind, DType computeDtype,
                                          std::optional<DType> operandDtype);

[[nodiscard]] Threshold computeThreshold(const ThresholdInput& input,
                                         const ThresholdConfig& config);

// The safety factor in force for a tensor: its override's, else the config's.
[[nodiscard]] double safetyFactorFor(const TensorKey& key, const ThresholdConfig& config);

}  // namespace ttrace
