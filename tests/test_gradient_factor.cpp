// A factor common to an iteration's gradients (a clipping coefficient whose total norm the
// distributed run summed in another order): fitted, removed within its round-off bound, and
// never hiding a gradient that went wrong on its own.
#include <QTest>
#include <cmath>
#include <random>

#include "compare/CommonGradientFactor.h"
#include "compare/MetricsBackend.h"

using namespace ttrace;

namespace {

constexpr double kFp32RoundOff = 0x1p-24;

std::vector<float> randomValues(std::size_t n, unsigned seed) {
    std::mt19937 generator(seed);
    std::normal_distribution<float> normal(0.0f, 1e-3f);
    std::vector<float> values(n);
    for (auto& v : values) {
        v = normal(generator);
    }
    return values;
}

std::vector<float> scaled(const std::vector<float>& values, double factor) {
    std::vector<float> out(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
        out[i] = static_cast<float>(values[i] * factor);
    }
    return out;
}

// D against R through the CPU backend, as a check measures them.
ErrorMetrics measure(const std::vector<float>& reference, const std::vector<float>& distributed) {
    const auto backend = makeCpuBackend();
    const auto sums = backend->compare(reference.data(), distributed.data(), reference.size());
    return finalizeMetrics(sums, {static_cast<std::int64_t>(reference.size())});
}

// A tensor of `kind` whose distributed copy is the reference times `factor`, judged against
// an fp32 gradient's threshold (a perturbed reference's 1e-7 times the safety factor).
TensorResult gradient(const QString& name, TensorKind kind, int iteration, double factor,
                      unsigned seed, std::size_t n = 4096) {
    const auto reference = randomValues(n, seed);
    TensorResult result;
    result.key.name = name;
    result.key.kind = kind;
    result.key.iteration = iteration;
    result.globalShape = {static_cast<std::int64_t>(n)};
    result.metrics = measure(reference, scaled(reference, factor));
    result.threshold.value = 1e-6;
    result.normalizedError = result.threshold.normalize(result.metrics.relativeError);
    ShardResult shard;
    shard.ranks = {0};
    shard.metrics = result.metrics;
    shard.normalizedError = result.normalizedError;
    result.shards = {shard};
    return result;
}

// Ten gradients of iteration 0 of `kind`, all the reference's times `factor`.
std::vector<TensorResult> gradients(double factor, TensorKind kind = TensorKind::ParamGrad) {
    std::vector<TensorResult> results;
    for (int i = 0; i < 10; ++i) {
        results.push_back(gradient(QStringLiteral("layers.%1.weight").arg(i), kind, 0, factor,
                                   static_cast<unsigned>(i + 1)));
    }
    return results;
}

int faultyCount(const std::vector<TensorResult>& results) {
    return static_cast<int>(std::count_if(results.begin(), results.end(),
                                          [](const TensorResult& r) { return r.isFaulty(); }));
}

}  // namespace

class TestGradientFactor : public QObject {
    Q_OBJECT

private Q_SLOTS:
    // ||D - aR|| / ||R|| from the sums alone, against the plain computation.
    void errorBeyondFactorIsTheDirectOne() {
        const auto reference = randomValues(10000, 7);
        auto distributed = scaled(reference, 1 + 3e-5);
        distributed[17] += 1e-4f;  // something of its own beside the factor
        const ErrorMetrics metrics = measure(reference, distributed);
        for (const double factor : {1.0, 1 + 3e-5, 1 - 2e-4, 0.5}) {
            double diff = 0, ref = 0;
            for (std::size_t i = 0; i < reference.size(); ++i) {
                const double e = distributed[i] - factor * reference[i];
                diff += e * e;
                ref += double(reference[i]) * reference[i];
            }
            const double direct = std::sqrt(diff / ref);
            QVERIFY2(std::abs(relativeErrorBeyondFactor(metrics, factor) - direct) <= 1e-6 * direct,
                     qPrintable(QStringLiteral("factor %1").arg(factor, 0, 'g', 8)));
        }
        QCOMPARE(relativeErrorBeyondFactor(metrics, 1.0), metrics.relativeError);
    }

    // Clipping by a norm whose round-off is 4e-5: every gradient off by that, none beyond.
    void clippingRoundOffIsRemoved() {
        auto results = gradients(1 - 4e-5);
        QCOMPARE(faultyCount(results), 10);
        const auto fits = removeCommonGradientFactors(results);
        QCOMPARE(fits.size(), std::size_t(1));
        const auto& fit = fits.front();
        QVERIFY(fit.removed());
        QCOMPARE(fit.tensors, 10);
        QCOMPARE(fit.elements, std::int64_t(40960));
        QVERIFY(std::abs(fit.factor - (1 - 4e-5)) < 1e-7);
        QCOMPARE(fit.bound, 4 * std::sqrt(40960.0) * kFp32RoundOff);
        QCOMPARE(fit.acceptedBeyond, 10);
        QCOMPARE(faultyCount(results), 0);
        for (const auto& r : results) {
            QCOMPARE(r.commonFactor, fit.factor);
            QVERIFY(r.judgedError() < r.metrics.relativeError / 100);
            QCOMPARE(r.shards.front().normalizedError, r.normalizedError);
        }
        const auto notes = describeRemovedFactors(fits, QStringLiteral("dist"));
        QCOMPARE(notes.size(), std::size_t(1));
        QCOMPARE(notes.front().severity, Severity::Info);
        QVERIFY2(notes.front().message.contains(QStringLiteral("param_grad tensors of iteration 0 "
                                                               "are 0.99996 times")),
                 qPrintable(notes.front().message));
        QVERIFY(notes.front().message.contains(QStringLiteral("10 of them are within tolerance")));
    }

    // A factor no round-off explains (the gradients divided twice) is a bug: kept, and
    // reported as fitted.
    void aFactorBeyondTheBoundStays() {
        auto results = gradients(0.5);
        const auto fits = removeCommonGradientFactors(results);
        QCOMPARE(fits.size(), std::size_t(1));
        QVERIFY(!fits.front().removed());
        QVERIFY(std::abs(fits.front().factor - 0.5) < 1e-7);
        QCOMPARE(faultyCount(results), 10);
        for (const auto& r : results) {
            QCOMPARE(r.commonFactor, 1.0);
        }
        QVERIFY(describeRemovedFactors(fits, QStringLiteral("dist")).empty());
    }

    // Just past the bound stays; just inside it goes.
    void theBoundIsFourRoundOffsOfTheNorm() {
        const double bound = 4 * std::sqrt(40960.0) * kFp32RoundOff;  // 8.4e-5
        auto inside = gradients(1 + 0.9 * bound);
        QVERIFY(removeCommonGradientFactors(inside).front().removed());
        auto outside = gradients(1 + 1.2 * bound);
        QVERIFY(!removeCommonGradientFactors(outside).front().removed());
        QCOMPARE(faultyCount(outside), 10);
    }

    // Gradients each off by their own round-off (bf16's): the median of their factors is
    // within the bound but not common to them, and is left in.
    void ownScatterIsNoCommonFactor() {
        std::vector<TensorResult> results;
        for (int k = -3; k <= 5; ++k) {
            results.push_back(gradient(QStringLiteral("layers.%1.weight").arg(k + 3),
                                       TensorKind::ParamGrad, 0, 1 + 1e-5 * k,
                                       static_cast<unsigned>(k + 10)));
        }
        const auto fit = removeCommonGradientFactors(results).front();
        QVERIFY(std::abs(fit.factor - (1 + 1e-5)) < 1e-8);
        QVERIFY(std::abs(fit.factor - 1) <= fit.bound);
        QVERIFY(std::abs(fit.scatter - 2e-5) < 1e-8);
        QVERIFY(!fit.removed());
        for (const auto& r : results) {
            QCOMPARE(r.commonFactor, 1.0);
        }
    }

    // One gradient wrong on its own (the median ignores it) stays faulty; the others carry
    // the clipping's factor only.
    void aGradientWrongOnItsOwnStaysFaulty() {
        auto results = gradients(1 - 4e-5);
        results[3] = gradient(QStringLiteral("layers.3.weight"), TensorKind::ParamGrad, 0, 1.01, 4);
        removeCommonGradientFactors(results);
        QCOMPARE(faultyCount(results), 1);
        QVERIFY(results[3].isFaulty());
        QVERIFY(results[3].normalizedError > 1000);
    }

    // Each iteration and kind is its own fit; other tensors are never touched, and fewer than
    // three gradients are not fitted.
    void fitsPerIterationAndKind() {
        auto results = gradients(1 - 4e-5);
        for (auto& r : gradients(1 + 2e-5, TensorKind::MainGrad)) {
            results.push_back(r);
        }
        results.push_back(gradient(QStringLiteral("a"), TensorKind::ParamGrad, 1, 1 - 4e-5, 50));
        results.push_back(gradient(QStringLiteral("b"), TensorKind::ParamGrad, 1, 1 - 4e-5, 51));
        results.push_back(
            gradient(QStringLiteral("c"), TensorKind::ForwardOutput, 0, 1 - 4e-5, 52));
        const auto fits = removeCommonGradientFactors(results);
        QCOMPARE(fits.size(), std::size_t(2));
        QCOMPARE(fits[0].kind, TensorKind::ParamGrad);
        QCOMPARE(fits[1].kind, TensorKind::MainGrad);
        QVERIFY(std::abs(fits[1].factor - (1 + 2e-5)) < 1e-7);
        QCOMPARE(faultyCount(results), 3);  // iteration 1's two, and the activation
        QCOMPARE(results.back().commonFactor, 1.0);
    }

    // The parameters updated from gradients that carried the factor may move by its share of
    // their step: ||p_new - p_old|| <= ||p_new|| + ||p_old||, so 2 |a - 1| here.
    void updatesGetTheFactorsShareOfTheirStep() {
        auto results = gradients(1 - 4e-5);
        const auto param = [](TensorKind kind, int iteration, double factor) {
            return gradient(QStringLiteral("layers.0.weight"), kind, iteration, factor, 99);
        };
        results.push_back(param(TensorKind::Param, 0, 1 + 1e-5));
        results.push_back(param(TensorKind::UpdatedParam, 0, 1 + 1e-5));
        results.push_back(param(TensorKind::Param, 1, 1 + 1e-5));
        results.push_back(param(TensorKind::UpdatedParam, 1, 1 + 1e-3));  // beyond any share
        const auto fits = removeCommonGradientFactors(results);
        QCOMPARE(fits.front().updatesAccepted, 2);
        const auto& first = results[10];
        QVERIFY(first.isFaulty());  // the parameters the step starts from: no allowance
        QVERIFY(!first.threshold.stepAllowance);
        for (const auto* updated : {&results[11], &results[12]}) {
            QVERIFY(!updated->isFaulty());
            QCOMPARE(updated->threshold.method, ThresholdMethod::StepAllowance);
            QVERIFY(std::abs(*updated->threshold.stepAllowance - 2 * (1 - fits.front().factor)) <
                    1e-12);
            QCOMPARE(updated->shards.front().normalizedError, updated->normalizedError);
        }
        QVERIFY(results[13].isFaulty());
        QVERIFY(describeRemovedFactors(fits, QStringLiteral("dist"))
                    .front()
                    .message.contains(QStringLiteral("2 parameters updated from them")));
    }

    // Without a removed factor the parameters keep their thresholds.
    void noFactorNoAllowance() {
        auto results = gradients(0.5);
        results.push_back(gradient(QStringLiteral("w"), TensorKind::Param, 0, 1, 99));
        results.push_back(gradient(QStringLiteral("w"), TensorKind::UpdatedParam, 0, 1 + 1e-5, 99));
        removeCommonGradientFactors(results);
        QVERIFY(!results.back().threshold.stepAllowance);
        QVERIFY(results.back().isFaulty());
    }

    // Shards read later (the results store keeps the measured errors) are judged like their
    // tensor.
    void shardsReadLaterAreJudgedLikeTheirTensor() {
        auto results = gradients(1 - 4e-5);
        std::vector<ShardResult> stored = results.front().shards;
        removeCommonGradientFactors(results);
        QVERIFY(stored.front().normalizedError > 1);
        judgeShards(stored, results.front());
        QCOMPARE(stored.front().normalizedError, results.front().normalizedError);
    }
};

QTEST_APPLESS_MAIN(TestGradientFactor)
#include "test_gradient_factor.moc"
