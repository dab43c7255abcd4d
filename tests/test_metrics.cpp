// The CPU backend against a plain double-precision loop, and the algebra of accumulators.
#include <QTest>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "compare/ErrorMetrics.h"
#include "compare/MetricsBackend.h"

using namespace ttrace;

namespace {

// The definition, written as plainly as possible: the oracle of the oracle.
ErrorAccumulator referenceCompute(const std::vector<float>& r, const std::vector<float>& d) {
    ErrorAccumulator acc;
    acc.count = static_cast<std::int64_t>(r.size());
    for (std::size_t i = 0; i < r.size(); ++i) {
        std::uint32_t rb = 0, db = 0;
        std::memcpy(&rb, &r[i], 4);
        std::memcpy(&db, &d[i], 4);
        if (rb != db) {
            ++acc.bitDifferences;
        }
        acc.nanRef += std::isnan(r[i]);
        acc.infRef += std::isinf(r[i]);
        acc.nanDist += std::isnan(d[i]);
        acc.infDist += std::isinf(d[i]);
        if (!std::isfinite(r[i]) || !std::isfinite(d[i])) {
            // Unmatched non-finite values are an unbounded error at that element.
            const bool matched = (std::isnan(r[i]) && std::isnan(d[i])) || rb == db;
            if (!matched) {
                const double inf = std::numeric_limits<double>::infinity();
                acc.sumSqDiff = inf;
                if (acc.maxAbsPos < 0 || acc.maxAbsError < inf) {
                    acc.maxAbsError = inf;
                    acc.maxAbsPos = static_cast<std::int64_t>(i);
                }
                if (acc.maxRelPos < 0 || acc.maxRelError < inf) {
                    acc.maxRelError = inf;
                    acc.maxRelPos = static_cast<std::int64_t>(i);
                }
            }
            continue;
        }
        const double rv = r[i], dv = d[i];
        acc.sumSqDiff += (dv - rv) * (dv - rv);
        acc.sumSqRef += rv * rv;
        acc.sumSqDist += dv * dv;
        acc.sumDot += dv * rv;
        const double absErr = std::fabs(dv - rv);
        if (acc.maxAbsPos < 0 || absErr > acc.maxAbsError) {
            acc.maxAbsError = absErr;
            acc.maxAbsPos = static_cast<std::int64_t>(i);
        }
        if (rv != 0) {
            const double rel = absErr / std::fabs(rv);
            if (acc.maxRelPos < 0 || rel > acc.maxRelError) {
                acc.maxRelError = rel;
                acc.maxRelPos = static_cast<std::int64_t>(i);
            }
        } else if (dv != rv) {
            ++acc.zeroRefMismatches;
        }
    }
    return acc;
}

bool close(double a, double b, double tol = 1e-12) {
    if (a == b) {
        return true;  // equal infinities too
    }
    return std::fabs(a - b) <= tol * std::max({std::fabs(a), std::fabs(b), 1e-300});
}

void compareAcc(const ErrorAccumulator& got, const ErrorAccumulator& want) {
    QCOMPARE(got.count, want.count);
    QVERIFY2(close(got.sumSqDiff, want.sumSqDiff), qPrintable(QString::number(got.sumSqDiff)));
    QVERIFY(close(got.sumSqRef, want.sumSqRef));
    QVERIFY(close(got.sumSqDist, want.sumSqDist));
    QVERIFY(close(got.sumDot, want.sumDot));
    QCOMPARE(got.maxAbsError, want.maxAbsError);
    QCOMPARE(got.maxAbsPos, want.maxAbsPos);
    QCOMPARE(got.maxRelError, want.maxRelError);
    QCOMPARE(got.maxRelPos, want.maxRelPos);
    QCOMPARE(got.zeroRefMismatches, want.zeroRefMismatches);
    QCOMPARE(got.nanDist, want.nanDist);
    QCOMPARE(got.infDist, want.infDist);
    QCOMPARE(got.nanRef, want.nanRef);
    QCOMPARE(got.infRef, want.infRef);
    QCOMPARE(got.bitDifferences, want.bitDifferences);
}

struct Pair {
    std::vector<float> r, d;
};

// Seeded data with every special case sprinkled in: NaN, Inf of both signs, zeros of both
// signs, subnormals, exact matches and round-off-sized differences. Without `nonFinite`, no
// NaN or Inf: the data the vectorised path takes whole.
Pair makeData(std::size_t n, unsigned seed, bool nonFinite = true) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::uniform_int_distribution<int> pick(0, 19);
    Pair p;
    p.r.resize(n);
    p.d.resize(n);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    const float sub = std::numeric_limits<float>::denorm_min();
    for (std::size_t i = 0; i < n; ++i) {
        float r = normal(rng);
        float d = r * (1.0f + 1e-3f * normal(rng));
        int kind = pick(rng);
        if (!nonFinite && (kind <= 3 || kind == 9)) {
            kind = 19;
        }
        switch (kind) {
            case 0:
                d = nan;
                break;
            case 1:
                r = nan;
                break;
            case 2:
                d = inf;
                break;
            case 3:
                r = -inf;
                break;
            case 4:
                r = 0.0f;
                d = 0.0f;
                break;
            case 5:
                r = 0.0f;
                d = 1e-3f;
                break;
            case 6:
                r = 0.0f;
                d = -0.0f;
                break;
            case 7:
                r = sub * 3;
                d = sub * 5;
                break;
            case 8:
                d = r;
                break;
            case 9:
                r = nan;
                d = nan;
                break;
            default:
                break;
        }
        p.r[i] = r;
        p.d[i] = d;
    }
    return p;
}

ErrorAccumulator shifted(ErrorAccumulator acc, std::int64_t offset) {
    if (acc.maxAbsPos >= 0) {
        acc.maxAbsPos += offset;
    }
    if (acc.maxRelPos >= 0) {
        acc.maxRelPos += offset;
    }
    return acc;
}

}  // namespace

class TestMetrics : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void cpuMatchesDefinition_data() {
        QTest::addColumn<int>("n");
        QTest::addColumn<unsigned>("seed");
        for (const int n : {0, 1, 7, 8, 9, 63, 1000, 4099}) {
            for (const unsigned seed : {1u, 2u, 3u}) {
                QTest::addRow("n%d-s%u", n, seed) << n << seed;
            }
        }
    }
    void cpuMatchesDefinition() {
        QFETCH(int, n);
        QFETCH(unsigned, seed);
        const auto p = makeData(static_cast<std::size_t>(n), seed);
        const auto backend = makeCpuBackend();
        QCOMPARE(backend->name(), std::string("CPU"));
        compareAcc(backend->compare(p.r.data(), p.d.data(), p.r.size()),
                   referenceCompute(p.r, p.d));
    }

    // Finite data goes through the vectorised lanes, which keep the positions of their maxima
    // themselves: every length around the lane width and the sub-block size, and maxima that
    // repeat in several lanes and sub-blocks (the first one counts).
    void cpuFastPathMatchesDefinition_data() {
        QTest::addColumn<int>("n");
        QTest::addColumn<unsigned>("seed");
        QTest::addColumn<bool>("repeatMaxima");
        for (const int n : {1, 7, 8, 9, 63, 4095, 4096, 4097, 10000}) {
            for (const unsigned seed : {4u, 5u}) {
                for (const bool repeat : {false, true}) {
                    QTest::addRow("n%d-s%u%s", n, seed, repeat ? "-repeated" : "")
                        << n << seed << repeat;
                }
            }
        }
    }
    void cpuFastPathMatchesDefinition() {
        QFETCH(int, n);
        QFETCH(unsigned, seed);
        QFETCH(bool, repeatMaxima);
        auto p = makeData(static_cast<std::size_t>(n), seed, false);
        if (repeatMaxima) {
            // the same largest absolute and relative error at every 37th element
            for (std::size_t i = 3; i < p.r.size(); i += 37) {
                p.r[i] = 0.5f;
                p.d[i] = 100.5f;
            }
        }
        compareAcc(makeCpuBackend()->compare(p.r.data(), p.d.data(), p.r.size()),
                   referenceCompute(p.r, p.d));
    }

    // Rows of a wider reference against packed rows of D (a shard piece compared in place):
    // the same as gathering the reference's rows first and comparing contiguous arrays. Rows
    // shorter than the lane width, of odd lengths, and longer than a sub-block; with and
    // without NaN and Inf (which send a sub-block down the careful path).
    void cpuRowsMatchGathered_data() {
        QTest::addColumn<int>("rowLength");
        QTest::addColumn<int>("rows");
        QTest::addColumn<bool>("nonFinite");
        for (const int rowLength : {1, 5, 8, 13, 1024, 5000}) {
            for (const int rows : {1, 3, 97}) {
                for (const bool nonFinite : {false, true}) {
                    QTest::addRow("%dx%d%s", rows, rowLength, nonFinite ? "-nonfinite" : "")
                        << rowLength << rows << nonFinite;
                }
            }
        }
    }
    void cpuRowsMatchGathered() {
        QFETCH(int, rowLength);
        QFETCH(int, rows);
        QFETCH(bool, nonFinite);
        const auto length = static_cast<std::size_t>(rowLength);
        const std::size_t stride = length + 3;  // the reference's rows are wider
        const auto wide = makeData(stride * static_cast<std::size_t>(rows), 9, nonFinite);
        std::vector<float> gathered, distributed;
        for (std::size_t row = 0; row < static_cast<std::size_t>(rows); ++row) {
            for (std::size_t i = 0; i < length; ++i) {
                gathered.push_back(wide.r[row * stride + 1 + i]);
                distributed.push_back(wide.d[row * stride + 1 + i]);
            }
        }
        const auto backend = makeCpuBackend();
        compareAcc(backend->compareRows(wide.r.data() + 1, stride, distributed.data(), length,
                                        static_cast<std::size_t>(rows)),
                   referenceCompute(gathered, distributed));
    }

    void cpuRowsOfNothing() {
        const std::vector<float> values(8, 1.0f);
        const auto backend = makeCpuBackend();
        QCOMPARE(backend->compareRows(values.data(), 4, values.data(), 0, 2).count, 0);
        QCOMPARE(backend->compareRows(values.data(), 4, values.data(), 4, 0).count, 0);
        QCOMPARE(backend->compareRows(values.data(), 4, values.data(), 0, 2).maxAbsPos, -1);
    }

    void identicalArraysHaveNoError() {
        const auto p = makeData(513, 7);
        const auto backend = makeCpuBackend();
        const auto acc = backend->compare(p.r.data(), p.r.data(), p.r.size());
        QCOMPARE(acc.sumSqDiff, 0.0);
        QCOMPARE(acc.maxAbsError, 0.0);
        QCOMPARE(acc.bitDifferences, 0);  // NaN against the same NaN is the same bits
        QCOMPARE(acc.zeroRefMismatches, 0);
        QCOMPARE(acc.nanDist, acc.nanRef);
    }

    void bitDifferencesSeeSignedZero() {
        const std::vector<float> r = {0.0f, 1.0f, 2.0f};
        const std::vector<float> d = {-0.0f, 1.0f, std::nextafter(2.0f, 3.0f)};
        const auto acc = makeCpuBackend()->compare(r.data(), d.data(), 3);
        QCOMPARE(acc.bitDifferences, 2);
        QCOMPARE(acc.zeroRefMismatches, 0);  // -0 == +0 numerically
        QCOMPARE(acc.maxRelPos, 2);
    }

    void maxPositionIsFirstOccurrence() {
        std::vector<float> r(40, 1.0f), d(40, 1.0f);
        d[13] = 2.0f;
        d[29] = 2.0f;
        d[5] = 0.0f;  // same |error| earlier
        const auto acc = makeCpuBackend()->compare(r.data(), d.data(), r.size());
        QCOMPARE(acc.maxAbsError, 1.0);
        QCOMPARE(acc.maxAbsPos, 5);
        QCOMPARE(acc.maxRelPos, 5);
    }

    // A NaN or Inf on one side only is an unbounded error at its element, wherever the
    // other side's non-finite values are: counts alone would let a NaN that moved pass.
    void unmatchedNonFiniteIsUnboundedError() {
        const float nan = std::numeric_limits<float>::quiet_NaN();
        const float inf = std::numeric_limits<float>::infinity();
        const std::vector<float> r = {1.0f, nan, 1.0f};
        const std::vector<float> d = {1.0f, 1.0f, nan};
        const auto acc = makeCpuBackend()->compare(r.data(), d.data(), 3);
        QVERIFY(std::isinf(acc.sumSqDiff));
        QCOMPARE(acc.maxAbsPos, 1);
        QCOMPARE(acc.maxRelPos, 1);
        QCOMPARE(acc.nanRef, 1);
        QCOMPARE(acc.nanDist, 1);

        // matching non-finite values (NaN and NaN, the same Inf) are equal
        const std::vector<float> same = {nan, inf, 2.0f};
        const std::vector<float> sameD = {nan, inf, 2.0f};
        const auto matched = makeCpuBackend()->compare(same.data(), sameD.data(), 3);
        QCOMPARE(matched.sumSqDiff, 0.0);
        QCOMPARE(matched.maxAbsError, 0.0);
        const std::vector<float> otherSign = {-inf};
        const std::vector<float> plus = {inf};
        QVERIFY(std::isinf(makeCpuBackend()->compare(otherSign.data(), plus.data(), 1).sumSqDiff));
    }

    void mergeIsAssociative() {
        const auto p = makeData(3001, 11);
        const auto backend = makeCpuBackend();
        const std::size_t cut1 = 1000, cut2 = 2222;
        const auto a = backend->compare(p.r.data(), p.d.data(), cut1);
        const auto b = shifted(backend->compare(p.r.data() + cut1, p.d.data() + cut1, cut2 - cut1),
                               static_cast<std::int64_t>(cut1));
        const auto c =
            shifted(backend->compare(p.r.data() + cut2, p.d.data() + cut2, p.r.size() - cut2),
                    static_cast<std::int64_t>(cut2));
        ErrorAccumulator left = a;
        left.merge(b);
        left.merge(c);
        ErrorAccumulator bc = b;
        bc.merge(c);
        ErrorAccumulator right = a;
        right.merge(bc);
        ErrorAccumulator reversed = c;  // order of merging does not matter either
        reversed.merge(b);
        reversed.merge(a);
        const auto whole = referenceCompute(p.r, p.d);
        compareAcc(left, whole);
        compareAcc(right, whole);
        compareAcc(reversed, whole);
    }

    void mergeWithEmpty() {
        const auto p = makeData(100, 5);
        const auto acc = makeCpuBackend()->compare(p.r.data(), p.d.data(), p.r.size());
        ErrorAccumulator empty;
        ErrorAccumulator merged = empty;
        merged.merge(acc);
        compareAcc(merged, acc);
        merged = acc;
        merged.merge(empty);
        compareAcc(merged, acc);
    }

    void finalizeBothZero() {
        ErrorAccumulator acc;
        acc.count = 4;
        acc.maxAbsPos = 0;
        const auto m = finalizeMetrics(acc, {2, 2});
        QCOMPARE(m.relativeError, 0.0);
        QCOMPARE(m.cosine, 1.0);
        QCOMPARE(m.maxAbsIndex, (std::vector<std::int64_t>{0, 0}));
        QVERIFY(m.maxRelIndex.empty());
    }

    void finalizeZeroReference() {
        const std::vector<float> r(6, 0.0f);
        const std::vector<float> d = {0, 0, 0, 0, 0.5f, 0};
        const auto acc = makeCpuBackend()->compare(r.data(), d.data(), r.size());
        const auto m = finalizeMetrics(acc, {2, 3});
        QVERIFY(std::isinf(m.relativeError));
        QCOMPARE(m.cosine, 0.0);
        QCOMPARE(m.zeroRefMismatches, 1);
        QCOMPARE(m.maxAbsIndex, (std::vector<std::int64_t>{1, 1}));
        QVERIFY(m.maxRelIndex.empty());  // no element with R != 0
        QCOMPARE(m.maxRelError, 0.0);
    }

    void finalizeEmpty() {
        const auto m = finalizeMetrics(ErrorAccumulator{}, {0, 3});
        QCOMPARE(m.count, 0);
        QCOMPARE(m.relativeError, 0.0);
        QCOMPARE(m.cosine, 1.0);
        QVERIFY(m.maxAbsIndex.empty());
        QVERIFY(!m.hasNonFinite());
    }

    void finalizeValues() {
        const std::vector<float> r = {3, 4, 0, 0};
        const std::vector<float> d = {3, 4, 0, 0};
        auto acc = makeCpuBackend()->compare(r.data(), d.data(), 4);
        auto m = finalizeMetrics(acc, {4});
        QCOMPARE(m.refNorm, 5.0);
        QCOMPARE(m.distNorm, 5.0);
        QCOMPARE(m.relativeError, 0.0);
        QCOMPARE(m.cosine, 1.0);

        const std::vector<float> opposite = {-3, -4, 0, 0};
        acc = makeCpuBackend()->compare(r.data(), opposite.data(), 4);
        m = finalizeMetrics(acc, {4});
        QCOMPARE(m.relativeError, 2.0);
        QCOMPARE(m.cosine, -1.0);
        QCOMPARE(m.maxAbsError, 8.0);
        QCOMPARE(m.maxAbsIndex, (std::vector<std::int64_t>{1}));
        QCOMPARE(m.maxRelError, 2.0);
        QCOMPARE(m.maxRelIndex, (std::vector<std::int64_t>{0}));

        const float nan = std::numeric_limits<float>::quiet_NaN();
        const std::vector<float> withNan = {3, nan, 0, 0};
        acc = makeCpuBackend()->compare(r.data(), withNan.data(), 4);
        m = finalizeMetrics(acc, {4});
        QVERIFY(m.hasNonFinite());
        QCOMPARE(m.nanDist, 1);
        QCOMPARE(m.refNorm, 3.0);  // the non-finite pair is left out of the sums
        // ...but a NaN where the reference is finite is an unbounded error, not a match
        QVERIFY(std::isinf(m.relativeError));
        QCOMPARE(m.maxAbsIndex, (std::vector<std::int64_t>{1}));
    }

    void scalarShape() {
        ErrorAccumulator acc;
        acc.count = 1;
        acc.maxAbsPos = 0;
        const auto m = finalizeMetrics(acc, {});
        QVERIFY(m.maxAbsIndex.empty());
    }
};

QTEST_GUILESS_MAIN(TestMetrics)
#include "test_metrics.moc"
