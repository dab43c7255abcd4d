// Tolerances: each method, floors, overrides, depth scaling, per-dtype epsilon and the JSON
// config file. Pure logic on values; config files are written into a temporary folder.
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>

#include "compare/Threshold.h"

using namespace ttrace;

Q_DECLARE_METATYPE(ttrace::DType)

namespace {

ThresholdInput input(const QString& name, TensorKind kind, int layer, int numLayers = 4,
                     DType dtype = DType::F32, std::optional<double> ePert = std::nullopt) {
    ThresholdInput in;
    in.key.name = name;
    in.key.kind = kind;
    in.layer = layer;
    in.numLayers = numLayers;
    in.computeDtype = dtype;
    in.perturbationError = ePert;
    return in;
}

bool close(double a, double b) {
    return std::abs(a - b) <= 1e-12 * std::max(std::abs(a), std::abs(b));
}

}  // namespace

class TestThreshold : public QObject {
    Q_OBJECT

private:
    QTemporaryDir dir_;

    QString writeConfig(const QString& fileName, const QByteArray& text) {
        const QString path = dir_.filePath(fileName);
        QFile file(path);
        if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate)) {
            return {};
        }
        file.write(text);
        return path;
    }

    // The one error of `result`, checked to name the file.
    static QString onlyError(const ThresholdConfigResult& result, const QString& path) {
        int errors = 0;
        QString message;
        for (const auto& d : result.diagnostics) {
            if (d.severity == Severity::Error) {
                ++errors;
                message = d.message;
                if (d.file != path || !d.toString().contains(path)) {
                    return QStringLiteral("diagnostic does not name the file: ") + d.toString();
                }
            }
        }
        return errors == 1 ? message
                           : QStringLiteral("expected one error, got ") + QString::number(errors);
    }

private Q_SLOTS:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void methodNames() {
        QCOMPARE(thresholdMethodName(ThresholdMethod::Perturbation),
                 QStringLiteral("perturbation"));
        QCOMPARE(thresholdMethodName(ThresholdMethod::Theoretical), QStringLiteral("theoretical"));
        QCOMPARE(thresholdMethodName(ThresholdMethod::Override), QStringLiteral("override"));
    }

    void perturbationIsPreferred() {
        const double eps = std::ldexp(1.0, -7);
        const auto t =
            computeThreshold(input(QStringLiteral("layers.1.mlp"), TensorKind::ForwardOutput, 1, 4,
                                   DType::BF16, 0.5 * eps),
                             ThresholdConfig{});
        QCOMPARE(t.method, ThresholdMethod::Perturbation);
        QVERIFY(close(t.value, 8 * 0.5 * eps));
        QVERIFY(t.perturbationThreshold.has_value());
        QVERIFY(close(*t.perturbationThreshold, t.value));
        QVERIFY(close(*t.perturbationError, 0.5 * eps));
        QVERIFY(close(t.floor, eps));
        QVERIFY(close(t.theoretical, 4 * std::pow(1.03, 2) * eps));  // shown beside
        QVERIFY(t.overridePattern.isEmpty());
    }

    void perturbationFloor() {
        // A tensor the perturbation did not move (e_pert = 0) still gets one eps of room.
        const double eps = std::ldexp(1.0, -23);
        ThresholdConfig config;
        config.floorFactor = 2;
        const auto t = computeThreshold(
            input(QStringLiteral("embedding"), TensorKind::ForwardOutput, -1, 4, DType::F32, 0.0),
            config);
        QCOMPARE(t.method, ThresholdMethod::Perturbation);
        QVERIFY(close(t.value, 2 * eps));
        QVERIFY(close(t.floor, 2 * eps));
    }

    void theoreticalWithoutPerturbation() {
        const double eps = std::ldexp(1.0, -23);
        const auto t =
            computeThreshold(input(QStringLiteral("layers.2.attn"), TensorKind::ForwardOutput, 2),
                             ThresholdConfig{});
        QCOMPARE(t.method, ThresholdMethod::Theoretical);
        QVERIFY(close(t.value, 4 * std::pow(1.03, 3) * eps));
        QVERIFY(close(t.theoretical, t.value));
        QVERIFY(!t.perturbationError.has_value());
        QVERIFY(!t.perturbationThreshold.has_value());
    }

    void theoreticalFloor() {
        ThresholdConfig config;
        config.theoryK = 0.25;
        config.floorFactor = 1;
        const auto t = computeThreshold(
            input(QStringLiteral("layers.0.attn"), TensorKind::ForwardOutput, 0), config);
        QCOMPARE(t.method, ThresholdMethod::Theoretical);
        QVERIFY(t.theoretical < t.floor);
        QVERIFY(close(t.value, std::ldexp(1.0, -23)));
    }

    void nonFinitePerturbationFallsBack() {
        const auto nan = std::numeric_limits<double>::quiet_NaN();
        const auto inf = std::numeric_limits<double>::infinity();
        for (const double bad : {nan, inf, -1.0}) {
            const auto t =
                computeThreshold(input(QStringLiteral("layers.0.attn"), TensorKind::ForwardOutput,
                                       0, 4, DType::BF16, bad),
                                 ThresholdConfig{});
            QCOMPARE(t.method, ThresholdMethod::Theoretical);
            QVERIFY(std::isfinite(t.value));
            QVERIFY(!t.perturbationThreshold.has_value());
        }
    }

    // An e_pert of the tensor's own size is no round-off: a zeroed perturbed tensor (e_pert
    // 1) sets no threshold; a large one below that (a router's flips, an fp8 gradient moved by
    // half its norm at iteration 2) still does, and makes the tensor blind.
    void perturbationOfTheWholeTensorFallsBack() {
        const ThresholdConfig config;
        const auto key = QStringLiteral("layers.31.mlp");
        QVERIFY(!computeThreshold(input(key, TensorKind::ForwardOutput, 31, 32, DType::BF16, 0.49),
                                  config)
                     .perturbationRejected());
        const Threshold fp8 =
            computeThreshold(input(key, TensorKind::ParamGrad, 31, 32, DType::BF16, 0.59), config);
        QVERIFY(!fp8.perturbationRejected());
        QCOMPARE(fp8.method, ThresholdMethod::Perturbation);
        QVERIFY(fp8.blind());
        QVERIFY(computeThreshold(input(key, TensorKind::ForwardOutput, 31, 32, DType::BF16, 1.0),
                                 config)
                    .perturbationRejected());
    }

    // A first-iteration parameter of the perturbed reference moves by at most the declared
    // perturbation and a rounding: beyond twice that (a perturbation applied 20x), its e_pert
    // sets no threshold. Other tensors and later iterations have no such bound.
    void declaredPerturbationBoundsFirstParameters() {
        const ThresholdConfig config;
        const double relative = std::ldexp(1.0, -8);  // bf16's unit round-off
        auto param = input(QStringLiteral("layers.0.fc.weight"), TensorKind::Param, 0, 2,
                           DType::BF16, 0.004);
        param.dtype = DType::BF16;
        param.declaredPerturbation = relative;
        const auto bound = declaredPerturbationBound(param.key, DType::BF16, DType::BF16, relative);
        QVERIFY(bound);
        QVERIFY(close(*bound, 2 * relative + std::ldexp(1.0, -7)));
        QVERIFY(!computeThreshold(param, config).perturbationRejected());  // the clean sample's
        param.perturbationError = 20 * 0.004;
        const Threshold beyond = computeThreshold(param, config);
        QVERIFY(beyond.perturbationRejected());
        QCOMPARE(beyond.method, ThresholdMethod::Theoretical);
        param.declaredPerturbation.reset();  // nothing declared: nothing to hold it to
        QVERIFY(!computeThreshold(param, config).perturbationRejected());

        QVERIFY(!declaredPerturbationBound(param.key, DType::BF16, DType::BF16, std::nullopt));
        TensorKey later = param.key;
        later.iteration = 1;
        QVERIFY(!declaredPerturbationBound(later, DType::BF16, DType::BF16, relative));
        TensorKey activation = param.key;
        activation.kind = TensorKind::ForwardOutput;
        QVERIFY(!declaredPerturbationBound(activation, DType::BF16, DType::BF16, relative));
    }

    // A threshold of 1 or more cannot tell a tensor from zeros: blind, whatever set it.
    void blindFromOne() {
        ThresholdConfig config;
        const auto key = QStringLiteral("layers.0.norm1.bias");
        QVERIFY(
            !computeThreshold(input(key, TensorKind::ParamGrad, 0, 4, DType::BF16, 0.12), config)
                 .blind());
        QVERIFY(
            computeThreshold(input(key, TensorKind::ParamGrad, 0, 4, DType::BF16, 0.125), config)
                .blind());
        config.overrides.push_back({QStringLiteral("layers.*"), std::nullopt, 2.0, std::nullopt});
        const auto overridden = computeThreshold(input(key, TensorKind::ParamGrad, 0), config);
        QCOMPARE(overridden.method, ThresholdMethod::Override);
        QVERIFY(overridden.blind());
    }

    void forwardDepthGrowsWithLayer() {
        const ThresholdConfig config;
        double previous = 0;
        for (int layer = 0; layer < 8; ++layer) {
            const auto t = computeThreshold(
                input(QStringLiteral("layers.x"), TensorKind::ForwardOutput, layer, 8), config);
            QVERIFY(t.theoretical > previous);
            QVERIFY(close(t.theoretical, 4 * std::pow(1.03, layer + 1) * std::ldexp(1.0, -23)));
            previous = t.theoretical;
        }
        // Inputs sit at the same depth as the outputs of their layer.
        QVERIFY(close(
            computeThreshold(input(QStringLiteral("x"), TensorKind::ForwardInput, 3, 8), config)
                .theoretical,
            computeThreshold(input(QStringLiteral("x"), TensorKind::ForwardOutput, 3, 8), config)
                .theoretical));
    }

    void operandsMadeInForwardTakeTheDeeperDepth() {
        // A backward GEMM's weight or input operand carries the forward's error: in a late
        // layer its bound is not the shallow backward depth's.
        const ThresholdConfig config;
        const double eps = std::ldexp(1.0, -23);
        for (const int layer : {0, 6, 7}) {
            ThresholdInput operand = input(QStringLiteral("x"), TensorKind::OutputGrad, layer, 8);
            operand.madeInForward = true;
            const int depth = std::max(layer + 1, 8 + 1 - layer);
            QVERIFY(close(computeThreshold(operand, config).theoretical,
                          4 * std::pow(1.03, depth) * eps));
        }
    }

    void backwardDepthShrinksWithLayer() {
        // Megatron-LM's k * C^(L+1-l): the gradient of layer 0 went through everything.
        const ThresholdConfig config;
        const double eps = std::ldexp(1.0, -23);
        for (const auto kind :
             {TensorKind::OutputGrad, TensorKind::InputGrad, TensorKind::ParamGrad,
              TensorKind::MainGrad, TensorKind::UpdatedParam}) {
            double previous = std::numeric_limits<double>::infinity();
            for (int layer = 0; layer < 8; ++layer) {
                const auto t = computeThreshold(input(QStringLiteral("x"), kind, layer, 8), config);
                QVERIFY(t.theoretical < previous);
                QVERIFY(close(t.theoretical, 4 * std::pow(1.03, 8 + 1 - layer) * eps));
                previous = t.theoretical;
            }
        }
        // The updated parameter is as deep as its gradient.
        QVERIFY(close(
            computeThreshold(input(QStringLiteral("w"), TensorKind::UpdatedParam, 2, 8), config)
                .theoretical,
            computeThreshold(input(QStringLiteral("w"), TensorKind::ParamGrad, 2, 8), config)
                .theoretical));
    }

    void outsideLayersTakesDeepest() {
        const ThresholdConfig config;
        const double deepest = 4 * std::pow(1.03, 5) * std::ldexp(1.0, -23);
        for (const auto kind : {TensorKind::ForwardOutput, TensorKind::InputGrad}) {
            QVERIFY(close(computeThreshold(input(QStringLiteral("embedding"), kind, -1, 4), config)
                              .theoretical,
                          deepest));
        }
    }

    void paramsAreInputs() {
        const auto t =
            computeThreshold(input(QStringLiteral("layers.3.fc1.weight"), TensorKind::Param, 3, 4),
                             ThresholdConfig{});
        QVERIFY(close(t.theoretical, 4 * std::ldexp(1.0, -23)));
    }

    void epsilonPerDtype_data() {
        QTest::addColumn<DType>("dtype");
        QTest::addColumn<double>("eps");
        QTest::newRow("fp32") << DType::F32 << std::ldexp(1.0, -23);
        QTest::newRow("fp16") << DType::F16 << std::ldexp(1.0, -10);
        QTest::newRow("bf16") << DType::BF16 << std::ldexp(1.0, -7);
        QTest::newRow("fp8_e4m3 computes in bf16") << DType::FP8E4M3 << std::ldexp(1.0, -7);
        QTest::newRow("fp8_e5m2 computes in bf16") << DType::FP8E5M2 << std::ldexp(1.0, -7);
    }

    void epsilonPerDtype() {
        QFETCH(DType, dtype);
        QFETCH(double, eps);
        const auto t = computeThreshold(input(QStringLiteral("w"), TensorKind::Param, 0, 4, dtype),
                                        ThresholdConfig{});
        QVERIFY(close(t.theoretical, 4 * eps));
        QVERIFY(close(t.floor, eps));
        QVERIFY(close(t.value, 4 * eps));
    }

    void quantizedOperandsSetTheTheory_data() {
        QTest::addColumn<DType>("operands");
        QTest::addColumn<double>("eps");
        QTest::newRow("fp8 recipe: e4m3") << DType::FP8E4M3 << std::ldexp(1.0, -3);
        QTest::newRow("e5m2") << DType::FP8E5M2 << std::ldexp(1.0, -2);
        QTest::newRow("fp4 recipe: e2m1") << DType::FP4E2M1 << std::ldexp(1.0, -1);
        QTest::newRow("coarser compute dtype wins") << DType::F32 << std::ldexp(1.0, -7);
    }

    void quantizedOperandsSetTheTheory() {
        // A recipe rounding GEMM operands to fp8 or fp4 (computing in bf16): the theoretical
        // bound takes the operands' element epsilon; the floor under a perturbation threshold
        // stays the compute dtype's.
        QFETCH(DType, operands);
        QFETCH(double, eps);
        auto in =
            input(QStringLiteral("layers.1.mlp.fc2"), TensorKind::InputGrad, 1, 4, DType::BF16);
        in.operandDtype = operands;
        const auto theory = computeThreshold(in, ThresholdConfig{});
        QCOMPARE(theory.method, ThresholdMethod::Theoretical);
        QVERIFY(close(theory.theoretical, 4 * std::pow(1.03, 4 + 1 - 1) * eps));
        QVERIFY(close(theory.value, theory.theoretical));
        QVERIFY(close(theory.floor, std::ldexp(1.0, -7)));
        in.perturbationError = 1e-3;
        const auto measured = computeThreshold(in, ThresholdConfig{});
        QCOMPARE(measured.method, ThresholdMethod::Perturbation);
        QVERIFY(close(measured.value, 8e-3));
        QVERIFY(close(measured.theoretical, theory.theoretical));
        // Parameters keep the compute dtype's round-off: a step moves them by a learning
        // rate's share of a gradient, not by an operand's step.
        for (const TensorKind kind : {TensorKind::Param, TensorKind::UpdatedParam}) {
            auto parameter =
                input(QStringLiteral("layers.1.mlp.fc2.weight"), kind, 1, 4, DType::BF16);
            parameter.operandDtype = operands;
            parameter.computeDtype = DType::BF16;
            auto unquantized = parameter;
            unquantized.operandDtype.reset();
            QCOMPARE(computeThreshold(parameter, ThresholdConfig{}).theoretical,
                     computeThreshold(unquantized, ThresholdConfig{}).theoretical);
        }
    }

    void aCoarserStoredFormatThanTheReferencesSetsTheFloor() {
        // torchao's tensor parallelism gathers a linear's input in fp8 where the reference
        // holds it in bf16: the two differ by an fp8 rounding, which the perturbation (of a
        // bf16 reference) does not measure.
        auto in =
            input(QStringLiteral("layers.0.up"), TensorKind::ForwardInput, 0, 2, DType::BF16, 1e-3);
        in.dtype = DType::FP8E4M3;
        in.operandDtype = DType::FP8E4M3;  // an fp8 recipe
        const auto asStoredAlike = computeThreshold(in, ThresholdConfig{});
        QVERIFY(close(asStoredAlike.floor, std::ldexp(1.0, -7)));
        in.referenceDtype = DType::FP8E4M3;  // both runs hold it in fp8: nothing changes
        QVERIFY(close(computeThreshold(in, ThresholdConfig{}).floor, std::ldexp(1.0, -7)));
        in.referenceDtype = DType::BF16;
        const auto coarser = computeThreshold(in, ThresholdConfig{});
        QCOMPARE(coarser.method, ThresholdMethod::Perturbation);
        QVERIFY(close(coarser.floor, std::ldexp(1.0, -3)));
        QVERIFY(close(coarser.value, std::ldexp(1.0, -3)));
        in.dtype = DType::FP8E5M2;  // gradients gathered in e5m2
        QVERIFY(close(computeThreshold(in, ThresholdConfig{}).value, std::ldexp(1.0, -2)));
        // The finer side is the distributed run's: its own round-off, as before.
        in.dtype = DType::BF16;
        in.referenceDtype = DType::FP8E4M3;
        QVERIFY(close(computeThreshold(in, ThresholdConfig{}).floor, std::ldexp(1.0, -7)));
        // bf16 where an fp32 run's reference holds fp32 is a precision fault, not a rounding
        // the recipe declares: the floor stays fp32's.
        auto fp32 = input(QStringLiteral("tok_embeddings"), TensorKind::ForwardOutput, -1, 2,
                          DType::F32, 1e-7);
        fp32.dtype = DType::BF16;
        fp32.referenceDtype = DType::F32;
        QVERIFY(close(computeThreshold(fp32, ThresholdConfig{}).floor, std::ldexp(1.0, -23)));
    }

    void overrideAbsoluteThreshold() {
        ThresholdConfig config;
        config.overrides.push_back(
            {QStringLiteral("layers.*.mlp.*"), TensorKind::ParamGrad, 0.01, {}});
        const auto hit = computeThreshold(input(QStringLiteral("layers.3.mlp.fc1.weight"),
                                                TensorKind::ParamGrad, 3, 4, DType::BF16, 1e-4),
                                          config);
        QCOMPARE(hit.method, ThresholdMethod::Override);
        QCOMPARE(hit.value, 0.01);
        QCOMPARE(hit.overridePattern, QStringLiteral("layers.*.mlp.*"));
        QVERIFY(hit.perturbationThreshold.has_value());  // still shown beside
        QVERIFY(hit.theoretical > 0);

        // The kind filter: the same name as a parameter is not matched.
        const auto otherKind = computeThreshold(
            input(QStringLiteral("layers.3.mlp.fc1.weight"), TensorKind::Param, 3), config);
        QCOMPARE(otherKind.method, ThresholdMethod::Theoretical);
        // The glob covers the whole name.
        const auto otherName = computeThreshold(
            input(QStringLiteral("layers.3.attn.qkv.weight"), TensorKind::ParamGrad, 3), config);
        QCOMPARE(otherName.method, ThresholdMethod::Theoretical);
        const auto prefixOnly = computeThreshold(
            input(QStringLiteral("x.layers.3.mlp.fc1"), TensorKind::ParamGrad, 3), config);
        QCOMPARE(prefixOnly.method, ThresholdMethod::Theoretical);
    }

    void overrideFirstMatchWins() {
        ThresholdConfig config;
        config.overrides.push_back({QStringLiteral("layers.1.*"), TensorKind::InputGrad, 0.5, {}});
        config.overrides.push_back({QStringLiteral("layers.1.*"), {}, 0.02, {}});
        config.overrides.push_back({QStringLiteral("layers.*"), {}, 0.03, {}});
        const auto a = computeThreshold(
            input(QStringLiteral("layers.1.mlp"), TensorKind::ForwardOutput, 1), config);
        QCOMPARE(a.value, 0.02);  // first override skipped by its kind, second matches
        const auto b = computeThreshold(
            input(QStringLiteral("layers.1.mlp"), TensorKind::InputGrad, 1), config);
        QCOMPARE(b.value, 0.5);
        const auto c = computeThreshold(
            input(QStringLiteral("layers.2.mlp"), TensorKind::InputGrad, 2), config);
        QCOMPARE(c.value, 0.03);
        QCOMPARE(c.overridePattern, QStringLiteral("layers.*"));
    }

    void overrideSafetyFactor() {
        ThresholdConfig config;
        config.overrides.push_back({QStringLiteral("*.router.*"), {}, {}, 20.0});
        const double ePert = 1e-3;
        const auto pert = computeThreshold(input(QStringLiteral("layers.0.mlp.router.weight"),
                                                 TensorKind::ParamGrad, 0, 4, DType::BF16, ePert),
                                           config);
        QCOMPARE(pert.method, ThresholdMethod::Perturbation);
        QVERIFY(close(pert.value, 20 * ePert));
        QVERIFY(pert.overridePattern.isEmpty());

        // Without a perturbed reference the bound is loosened by the same ratio (20 / 8).
        const auto theory = computeThreshold(
            input(QStringLiteral("layers.0.mlp.router.weight"), TensorKind::ParamGrad, 0), config);
        const auto plain = computeThreshold(
            input(QStringLiteral("layers.0.mlp.fc1.weight"), TensorKind::ParamGrad, 0), config);
        QCOMPARE(theory.method, ThresholdMethod::Theoretical);
        QVERIFY(close(theory.value, plain.value * 20.0 / 8.0));
    }

    void validConfigFile() {
        const QString path = writeConfig(QStringLiteral("valid.json"), R"({
  "safety_factor": 10,
  "floor_factor": 2,
  "theory": {"k": 5, "C": 1.05},
  "overrides": [
    {"pattern": "layers.*.mlp.*", "kind": "param_grad", "threshold": 0.01},
    {"pattern": "*.router.*", "safety_factor": 20}
  ]
})");
        const auto result = readThresholdConfig(path);
        QVERIFY2(result.diagnostics.empty(),
                 qPrintable(result.diagnostics.empty() ? QString()
                                                       : result.diagnostics.front().toString()));
        QCOMPARE(result.config.safetyFactor, 10.0);
        QCOMPARE(result.config.floorFactor, 2.0);
        QCOMPARE(result.config.theoryK, 5.0);
        QCOMPARE(result.config.theoryC, 1.05);
        QCOMPARE(result.config.overrides.size(), std::size_t{2});
        const auto& first = result.config.overrides[0];
        QCOMPARE(first.pattern, QStringLiteral("layers.*.mlp.*"));
        QCOMPARE(first.kind, std::optional<TensorKind>(TensorKind::ParamGrad));
        QCOMPARE(first.threshold, std::optional<double>(0.01));
        QVERIFY(!first.safetyFactor.has_value());
        const auto& second = result.config.overrides[1];
        QVERIFY(!second.kind.has_value());
        QCOMPARE(second.safetyFactor, std::optional<double>(20.0));
    }

    void emptyConfigKeepsDefaults() {
        const auto result = readThresholdConfig(writeConfig(QStringLiteral("empty.json"), "{}"));
        QVERIFY(result.diagnostics.empty());
        const ThresholdConfig defaults;
        QCOMPARE(result.config.safetyFactor, defaults.safetyFactor);
        QCOMPARE(result.config.floorFactor, defaults.floorFactor);
        QCOMPARE(result.config.theoryK, defaults.theoryK);
        QCOMPARE(result.config.theoryC, defaults.theoryC);
        QVERIFY(result.config.overrides.empty());
    }

    void unknownKeyIsWarning() {
        const QString path =
            writeConfig(QStringLiteral("typo.json"), R"({"safty_factor": 3, "theory": {"K": 2}})");
        const auto result = readThresholdConfig(path);
        QVERIFY(!hasErrors(result.diagnostics));
        QCOMPARE(result.diagnostics.size(), std::size_t{2});
        for (const auto& d : result.diagnostics) {
            QCOMPARE(d.severity, Severity::Warning);
            QCOMPARE(d.file, path);
        }
        QVERIFY(result.diagnostics[0].message.contains(QStringLiteral("safty_factor")));
        QVERIFY(result.diagnostics[1].message.contains(QStringLiteral("theory.K")));
        QCOMPARE(result.config.safetyFactor, ThresholdConfig{}.safetyFactor);
    }

    void syntaxError() {
        const QString path =
            writeConfig(QStringLiteral("syntax.json"), "{\n  \"safety_factor\": 8,\n  oops\n}");
        const auto result = readThresholdConfig(path);
        const QString message = onlyError(result, path);
        QVERIFY2(message.contains(QStringLiteral("not valid JSON")), qPrintable(message));
        QVERIFY2(message.contains(QStringLiteral("line 3")), qPrintable(message));
    }

    void notAnObject() {
        const QString path = writeConfig(QStringLiteral("array.json"), "[1, 2]");
        const QString message = onlyError(readThresholdConfig(path), path);
        QVERIFY2(message.contains(QStringLiteral("JSON object")), qPrintable(message));
    }

    void missingFile() {
        const QString path = dir_.filePath(QStringLiteral("absent.json"));
        const QString message = onlyError(readThresholdConfig(path), path);
        QVERIFY2(message.contains(QStringLiteral("cannot read")), qPrintable(message));
    }

    void invalidValues_data() {
        QTest::addColumn<QByteArray>("json");
        QTest::addColumn<QString>("key");
        QTest::newRow("negative safety")
            << QByteArray(R"({"safety_factor": -1})") << QStringLiteral("'safety_factor'");
        QTest::newRow("zero safety")
            << QByteArray(R"({"safety_factor": 0})") << QStringLiteral("'safety_factor'");
        QTest::newRow("negative floor")
            << QByteArray(R"({"floor_factor": -0.5})") << QStringLiteral("'floor_factor'");
        QTest::newRow("string safety")
            << QByteArray(R"({"safety_factor": "8"})") << QStringLiteral("'safety_factor'");
        QTest::newRow("negative k")
            << QByteArray(R"({"theory": {"k": -4}})") << QStringLiteral("'theory.k'");
        QTest::newRow("C below 1")
            << QByteArray(R"({"theory": {"C": 0.9}})") << QStringLiteral("'theory.C'");
        QTest::newRow("theory not object")
            << QByteArray(R"({"theory": 4})") << QStringLiteral("'theory'");
        QTest::newRow("overrides not array")
            << QByteArray(R"({"overrides": {}})") << QStringLiteral("'overrides'");
        QTest::newRow("unknown kind")
            << QByteArray(R"({"overrides": [{"pattern": "a.*", "threshold": 0.1},
                                            {"pattern": "b.*", "kind": "activation", "threshold": 0.1}]})")
            << QStringLiteral("'overrides[1].kind'");
        QTest::newRow("negative threshold")
            << QByteArray(R"({"overrides": [{"pattern": "a.*", "threshold": -0.01}]})")
            << QStringLiteral("'overrides[0].threshold'");
        QTest::newRow("negative override safety")
            << QByteArray(R"({"overrides": [{"pattern": "a.*", "safety_factor": -2}]})")
            << QStringLiteral("'overrides[0].safety_factor'");
        QTest::newRow("missing pattern") << QByteArray(R"({"overrides": [{"threshold": 0.1}]})")
                                         << QStringLiteral("'overrides[0].pattern'");
        QTest::newRow("both threshold and safety")
            << QByteArray(
                   R"({"overrides": [{"pattern": "a", "threshold": 0.1, "safety_factor": 2}]})")
            << QStringLiteral("'overrides[0]'");
        QTest::newRow("neither threshold nor safety")
            << QByteArray(R"({"overrides": [{"pattern": "a"}]})")
            << QStringLiteral("'overrides[0]'");
        QTest::newRow("override not object")
            << QByteArray(R"({"overrides": [3]})") << QStringLiteral("'overrides[0]'");
    }

    void invalidValues() {
        QFETCH(QByteArray, json);
        QFETCH(QString, key);
        const QString path = writeConfig(QStringLiteral("invalid.json"), json);
        const auto result = readThresholdConfig(path);
        const QString message = onlyError(result, path);
        QVERIFY2(message.contains(key), qPrintable(message));
        // Bad values never reach the config.
        QVERIFY(result.config.safetyFactor > 0);
        QVERIFY(result.config.floorFactor >= 0);
        QVERIFY(result.config.theoryK > 0);
        QVERIFY(result.config.theoryC >= 1);
        for (const auto& item : result.config.overrides) {
            QVERIFY(item.threshold.has_value() != item.safetyFactor.has_value());
        }
    }
};

QTEST_APPLESS_MAIN(TestThreshold)
#include "test_threshold.moc"
