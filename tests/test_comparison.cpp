// The comparison job on the real fixtures: exact assembly (clean layouts compare with zero
// error), partial sums, replicas, bugs, non-finite values, determinism and cancellation.
#include <QTest>
#include <atomic>
#include <cmath>
#include <memory>

#include "TestPaths.h"
#include "compare/ComparisonJob.h"
#include "trace/TraceSet.h"

using namespace ttrace;
using ttrace::test::fixture;

namespace {

QString allMessages(const Diagnostics& diagnostics) {
    QStringList lines;
    for (const auto& d : diagnostics) {
        lines << d.toString();
    }
    return lines.join(QLatin1Char('\n'));
}

// Trace sets stay alive as long as the output that was computed from them.
struct Run {
    std::unique_ptr<TraceSet> dist, ref, pert;
    ComparisonOutput output;

    const TensorResult* find(const char* name, TensorKind kind, int iteration = 0,
                             int microBatch = 0) const {
        for (const auto& r : output.results) {
            if (r.key.name == QString::fromUtf8(name) && r.key.kind == kind &&
                r.key.iteration == iteration &&
                (isParameterKind(kind) || r.key.microBatch == microBatch)) {
                return &r;
            }
        }
        return nullptr;
    }
};

Run compareFolders(const QString& distFolder, const QString& refFolder, const QString& pertFolder,
                   ComparisonOptions options = {}) {
    Run run;
    run.dist = std::make_unique<TraceSet>(openTraceSet(distFolder));
    run.ref = std::make_unique<TraceSet>(openTraceSet(refFolder));
    if (!pertFolder.isEmpty()) {
        run.pert = std::make_unique<TraceSet>(openTraceSet(pertFolder));
    }
    run.output = compareTraceSets(*run.dist, *run.ref, run.pert.get(), options);
    return run;
}

Run compareCase(const QString& caseName, ComparisonOptions options = {}) {
    return compareFolders(fixture(caseName, QStringLiteral("dist")),
                          fixture(caseName, QStringLiteral("ref")),
                          fixture(caseName, QStringLiteral("pert")), std::move(options));
}

std::size_t distTensorCount(const TraceSet& set) {
    std::vector<TensorKey> keys;
    for (const auto& r : set.records) {
        if (std::find(keys.begin(), keys.end(), r.key) == keys.end()) {
            keys.push_back(r.key);
        }
    }
    return keys.size();
}

bool near(double a, double b) {
    return a == b || std::fabs(a - b) <= 1e-12 * std::max(std::fabs(a), std::fabs(b));
}

// Everything equal; sums only to 1e-12 when `exact` is false (another block split sums in
// another order).
void compareMetrics(const ErrorMetrics& a, const ErrorMetrics& b, bool exact) {
    QCOMPARE(a.count, b.count);
    if (exact) {
        QCOMPARE(a.relativeError, b.relativeError);
        QCOMPARE(a.cosine, b.cosine);
        QCOMPARE(a.refNorm, b.refNorm);
        QCOMPARE(a.distNorm, b.distNorm);
    } else {
        QVERIFY(near(a.relativeError, b.relativeError));
        QVERIFY(near(a.cosine, b.cosine));
        QVERIFY(near(a.refNorm, b.refNorm));
        QVERIFY(near(a.distNorm, b.distNorm));
    }
    QCOMPARE(a.maxAbsError, b.maxAbsError);
    QCOMPARE(a.maxAbsIndex, b.maxAbsIndex);
    QCOMPARE(a.maxRelError, b.maxRelError);
    QCOMPARE(a.maxRelIndex, b.maxRelIndex);
    QCOMPARE(a.zeroRefMismatches, b.zeroRefMismatches);
    QCOMPARE(a.nanDist, b.nanDist);
    QCOMPARE(a.infDist, b.infDist);
    QCOMPARE(a.bitDifferences, b.bitDifferences);
}

void compareOutputs(const ComparisonOutput& a, const ComparisonOutput& b, bool exact) {
    QCOMPARE(a.results.size(), b.results.size());
    QCOMPARE(a.bytesCompared, b.bytesCompared);
    for (std::size_t i = 0; i < a.results.size(); ++i) {
        const auto& x = a.results[i];
        const auto& y = b.results[i];
        QCOMPARE(x.key, y.key);
        QCOMPARE(x.referenceSeq, y.referenceSeq);
        QCOMPARE(x.rankSeq, y.rankSeq);
        compareMetrics(x.metrics, y.metrics, exact);
        QCOMPARE(x.perturbation.has_value(), y.perturbation.has_value());
        if (x.perturbation) {
            compareMetrics(*x.perturbation, *y.perturbation, exact);
        }
        if (exact) {
            QCOMPARE(x.threshold.value, y.threshold.value);
            QCOMPARE(x.normalizedError, y.normalizedError);
        } else {
            QVERIFY(near(x.threshold.value, y.threshold.value));
            QVERIFY(near(x.normalizedError, y.normalizedError));
        }
        QCOMPARE(x.shards.size(), y.shards.size());
        for (std::size_t s = 0; s < x.shards.size(); ++s) {
            QCOMPARE(x.shards[s].ranks, y.shards[s].ranks);
            QCOMPARE(x.shards[s].replica, y.shards[s].replica);
            compareMetrics(x.shards[s].metrics, y.shards[s].metrics, exact);
        }
        QCOMPARE(x.replicaMismatches.size(), y.replicaMismatches.size());
    }
}

const char* const kCleanLayouts[] = {"tp_column", "tp_row", "tp_strided",    "sp",
                                     "cp_zigzag", "pp_vpp", "dp_microbatch", "ep"};

}  // namespace

class TestComparison : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() {
        QVERIFY2(!ttrace::test::fixturesRoot().isEmpty(), "TTRACE_FIXTURES is not set");
    }

    void cleanLayoutsAreExact_data() {
        QTest::addColumn<QString>("caseName");
        for (const char* c : kCleanLayouts) {
            QTest::newRow(c) << QString::fromUtf8(c);
        }
    }
    // Distributed shards are exact slices of the reference: any error at all would mean a
    // shard was put at the wrong place.
    void cleanLayoutsAreExact() {
        QFETCH(QString, caseName);
        ComparisonOptions options;
        options.chunkElements = 5;  // many blocks, partial rows, every range boundary
        const auto run = compareCase(caseName, options);
        QVERIFY2(run.output.diagnostics.empty(), qPrintable(allMessages(run.output.diagnostics)));
        QCOMPARE(run.output.backendName, QStringLiteral("CPU"));
        QVERIFY(!run.output.cancelled);
        QCOMPARE(run.output.results.size(), distTensorCount(*run.dist));
        std::int64_t bytes = 0;
        std::int64_t previousSeq = -1;
        for (const auto& r : run.output.results) {
            const auto name = r.key.toString().toUtf8();
            QVERIFY2(r.metrics.relativeError == 0.0, name.constData());
            QCOMPARE(r.metrics.bitDifferences, 0);
            QCOMPARE(r.metrics.maxAbsError, 0.0);
            QVERIFY(r.metrics.refNorm > 0);
            QCOMPARE(r.metrics.cosine, 1.0);
            std::int64_t elements = 1;
            for (const auto e : r.globalShape) {
                elements *= e;
            }
            QCOMPARE(r.metrics.count, elements);
            QVERIFY(r.perturbation.has_value());
            QVERIFY(r.perturbation->relativeError > 0);
            QVERIFY(r.threshold.value > 0);
            QCOMPARE(r.normalizedError, 0.0);
            QVERIFY(r.replicaMismatches.empty());
            QVERIFY(!r.shards.empty());
            for (const auto& s : r.shards) {
                QCOMPARE(s.metrics.relativeError, 0.0);
                QCOMPARE(s.metrics.bitDifferences, 0);
            }
            QVERIFY(r.diagnostics.empty());
            QVERIFY(!r.rankSeq.empty());
            QVERIFY(r.referenceSeq > previousSeq);  // ordered by the reference's execution
            previousSeq = r.referenceSeq;
            QVERIFY(r.bytesCompared > 0);
            bytes += r.bytesCompared;
        }
        QCOMPARE(run.output.bytesCompared, bytes);
    }

    void tpRowPartialSums() {
        const auto run = compareCase(QStringLiteral("tp_row"));
        const auto* out = run.find("layers.0.fc2", TensorKind::ForwardOutput);
        QVERIFY(out);
        QCOMPARE(out->shards.size(), std::size_t(1));
        QCOMPARE(out->shards[0].ranks, (std::vector<int>{0, 1}));
        QCOMPARE(out->metrics.relativeError, 0.0);
        QCOMPARE(out->metrics.bitDifferences, 0);
        QCOMPARE(out->rankSeq.size(), std::size_t(2));
        // bytes: both summands, the reference and the perturbed reference
        QCOMPARE(out->bytesCompared, 4 * 4 * 8 * 4);
    }

    void replicasAndShardsAreListed() {
        const auto run = compareCase(QStringLiteral("tp_column"));
        const auto* input = run.find("layers.0.fc1", TensorKind::ForwardInput);
        QVERIFY(input);
        QCOMPARE(input->shards.size(), std::size_t(2));
        QCOMPARE(input->shards[1].replica, 1);
        QCOMPARE(input->shards[1].ranks, std::vector<int>{1});
        const auto* output = run.find("layers.0.fc1", TensorKind::ForwardOutput);
        QCOMPARE(output->shards.size(), std::size_t(2));
        QCOMPARE(output->shards[1].ranges.dims[1], (std::vector<IndexRange>{{8, 16}}));
        QCOMPARE(output->rankSeq.at(0), run.dist->records.front().seq + 2);
    }

    void combinedIsClean() {
        const auto run = compareCase(QStringLiteral("combined"));
        QVERIFY2(!hasErrors(run.output.diagnostics),
                 qPrintable(allMessages(run.output.diagnostics)));
        QCOMPARE(run.output.results.size(), std::size_t(88));
        int nonZero = 0;
        for (const auto& r : run.output.results) {
            QVERIFY2(r.normalizedError < 1.0,
                     qPrintable(r.key.toString() + QStringLiteral(" %1").arg(r.normalizedError)));
            QVERIFY(r.replicaMismatches.empty());
            QVERIFY(r.perturbation.has_value());
            QVERIFY(!r.isFaulty());
            nonZero += r.metrics.relativeError > 0;
        }
        QVERIFY(nonZero > 0);  // round-off-sized noise is there, just below the threshold
    }

    void bugShardStandsOut() {
        const auto run = compareCase(QStringLiteral("bug_shard"));
        const auto* bug = run.find("layers.1.fc1", TensorKind::ForwardOutput, 0, 1);
        QVERIFY(bug);
        QVERIFY2(bug->normalizedError > 1.0, qPrintable(QString::number(bug->normalizedError)));
        QVERIFY(bug->isFaulty());
        const ShardResult* worst = nullptr;
        for (const auto& s : bug->shards) {
            if (!worst || s.normalizedError > worst->normalizedError) {
                worst = &s;
            }
        }
        QVERIFY(worst);
        QCOMPARE(worst->ranks, std::vector<int>{5});
        for (const auto& s : bug->shards) {
            if (&s != worst) {
                QVERIFY(s.normalizedError < 1.0);
            }
        }
        // the tensor before it is fine
        const auto* input = run.find("layers.1.fc1", TensorKind::ForwardInput, 0, 1);
        QVERIFY(input);
        QVERIFY(input->normalizedError < 1.0);
    }

    void bugReplicaMismatch() {
        const auto run = compareCase(QStringLiteral("bug_replica"));
        const auto* grad = run.find("layers.0.mlp.weight", TensorKind::ParamGrad);
        QVERIFY(grad);
        QCOMPARE(grad->replicaMismatches.size(), std::size_t(1));
        const auto& m = grad->replicaMismatches[0];
        QCOMPARE(m.ranksA, std::vector<int>{0});
        QCOMPARE(m.ranksB, std::vector<int>{1});
        QCOMPARE(m.differingElements, 1);
        QVERIFY(m.maxAbsDifference > 0);
        QVERIFY(grad->isFaulty());
        QCOMPARE(grad->shards.size(), std::size_t(2));
        QCOMPARE(grad->shards[1].metrics.maxAbsIndex, (std::vector<std::int64_t>{0, 0}));
        QVERIFY(grad->shards[1].normalizedError > 1.0);
        // Replica 0 is right; the tensor's numbers are those of its worst copy, rank 1's.
        QCOMPARE(grad->shards[0].metrics.relativeError, 0.0);
        QCOMPARE(grad->metrics.relativeError, grad->shards[1].metrics.relativeError);
        QVERIFY(grad->normalizedError > 1.0);
        QCOMPARE(grad->metrics.maxAbsIndex, (std::vector<std::int64_t>{0, 0}));
        QCOMPARE(grad->worstCopyRanks(), std::vector<int>{1});
    }

    void nonFiniteValues() {
        const auto run = compareFolders(fixture(QStringLiteral("bad/nan")),
                                        fixture(QStringLiteral("bad/ref")), {});
        const auto* out = run.find("layers.0.fc1", TensorKind::ForwardOutput);
        QVERIFY(out);
        QCOMPARE(out->metrics.nanDist, 1);
        QCOMPARE(out->metrics.infDist, 1);
        QCOMPARE(out->metrics.nanRef, 0);
        QVERIFY(!out->perturbation);
        QVERIFY(out->isFaulty());
        QCOMPARE(out->diagnostics.size(), std::size_t(1));
        const auto& d = out->diagnostics[0];
        QCOMPARE(d.severity, Severity::Warning);
        QVERIFY2(d.message.contains(QStringLiteral("1 NaN and 1 Inf on ranks 0, 1")),
                 qPrintable(d.message));
        // the other tensors are untouched
        const auto* weight = run.find("layers.0.fc1.weight", TensorKind::Param);
        QVERIFY(weight);
        QVERIFY(weight->diagnostics.empty());
        QCOMPARE(weight->metrics.relativeError, 0.0);
    }

    void tensorMissingInReference() {
        const auto run =
            compareFolders(fixture(QStringLiteral("tp_column"), QStringLiteral("dist")),
                           fixture(QStringLiteral("bad/ref_missing_tensor")), {});
        QCOMPARE(run.output.results.size(), std::size_t(5));
        QVERIFY(!run.find("layers.0.fc1.weight", TensorKind::ParamGrad));
        QCOMPARE(run.output.diagnostics.size(), std::size_t(1));
        const auto& d = run.output.diagnostics[0];
        QCOMPARE(d.severity, Severity::Warning);
        QVERIFY(d.tensor.isEmpty());  // a module's tensors, named in the message
        QCOMPARE(d.message, QStringLiteral("layers.0.fc1: 1 of its 6 tensors is not in the "
                                           "reference, not compared: weight param_grad; "
                                           "iteration 0; on ranks 0-1"));
        QCOMPARE(run.output.coverage, (Coverage{5, 0, 1}));
    }

    // A tensor computed in another dtype than the reference's is compared as it is, and said
    // once, with the dtypes and the tensor.
    void dtypeDifferingFromTheReferenceIsSaid() {
        const auto run =
            compareFolders(fixture(QStringLiteral("tp_column"), QStringLiteral("dist")),
                           fixture(QStringLiteral("bad/ref_dtype")), {});
        QCOMPARE(run.output.results.size(), std::size_t(6));
        const auto warnings = std::count_if(
            run.output.diagnostics.begin(), run.output.diagnostics.end(), [](const auto& d) {
                return d.severity == Severity::Warning &&
                       d.message.startsWith(QStringLiteral(
                           "1 tensor was computed in fp32 in the distributed run but in bf16 in "
                           "the reference (layers.0.fc1 forward_output[0] it0 mb0): a "
                           "mixed-precision setting, or a reference of another recipe?"));
            });
        QVERIFY2(warnings == 1, qPrintable(allMessages(run.output.diagnostics)));
    }

    // One unreadable rank file leaves a gap in every tensor it held a piece of: one error
    // says so, naming the file's rank and the first tensors, not one error per tensor.
    void gapsOfAnUnreadableRankFileAreOneError() {
        const auto run = compareFolders(fixture(QStringLiteral("bad/truncated")),
                                        fixture(QStringLiteral("bad/ref")), {});
        QStringList gapErrors;
        for (const auto& d : run.output.diagnostics) {
            if (d.severity == Severity::Error && d.message.contains(QStringLiteral("gap"))) {
                gapErrors << d.message;
            }
        }
        QCOMPARE(gapErrors.size(), 1);
        QVERIFY2(gapErrors.front().startsWith(QStringLiteral(
                     "4 tensors not compared: their shards leave gaps, elements no rank holds, "
                     "most likely the pieces in the rank files that could not be read (rank 1; "
                     "see their errors): ")),
                 qPrintable(gapErrors.front()));
        QVERIFY2(gapErrors.front().contains(QStringLiteral(" and 1 more (the first: shards leave "
                                                           "a gap: ")),
                 qPrintable(gapErrors.front()));
    }

    // Tensors the perturbed reference lacks fall back to the theoretical threshold, said once:
    // by name for one tensor, counted and named in part for many.
    void tensorsMissingInThePerturbedReference() {
        const QString dist = fixture(QStringLiteral("tp_column"), QStringLiteral("dist"));
        const QString ref = fixture(QStringLiteral("tp_column"), QStringLiteral("ref"));
        const auto warningsOf = [](const Run& run) {
            Diagnostics found;
            for (const auto& d : run.output.diagnostics) {
                if (d.message.contains(QStringLiteral("not in the perturbed reference"))) {
                    found.push_back(d);
                }
            }
            return found;
        };
        const auto one = warningsOf(
            compareFolders(dist, ref, fixture(QStringLiteral("bad/ref_missing_tensor"))));
        QCOMPARE(one.size(), std::size_t{1});
        QCOMPARE(one.front().tensor, QStringLiteral("layers.0.fc1.weight param_grad it0"));
        const auto all = warningsOf(compareFolders(
            dist, ref, fixture(QStringLiteral("dp_microbatch"), QStringLiteral("ref"))));
        QCOMPARE(all.size(), std::size_t{1});
        QVERIFY2(all.front().message.startsWith(
                     QStringLiteral("6 tensors are not in the perturbed reference; their "
                                    "thresholds are the theoretical ones: ")) &&
                     all.front().message.endsWith(QStringLiteral(" and 3 more")),
                 qPrintable(all.front().message));
    }

    void mappingErrorsReachTheOutput() {
        const auto run = compareFolders(fixture(QStringLiteral("bad/gap")),
                                        fixture(QStringLiteral("bad/ref")), {});
        QVERIFY(!run.find("layers.0.fc1", TensorKind::ForwardOutput));
        QVERIFY(hasErrors(run.output.diagnostics));
        QVERIFY(allMessages(run.output.diagnostics).contains(QStringLiteral("gap")));
        QCOMPARE(run.output.results.size(), std::size_t(5));
    }

    void sameResultsWhateverThreadsAndChunks_data() {
        QTest::addColumn<QString>("caseName");
        for (const char* c : {"combined", "cp_zigzag", "tp_row", "bug_replica"}) {
            QTest::newRow(c) << QString::fromUtf8(c);
        }
    }
    void sameResultsWhateverThreadsAndChunks() {
        QFETCH(QString, caseName);
        ComparisonOptions one;
        one.threads = 1;
        ComparisonOptions four;
        four.threads = 4;
        ComparisonOptions fourSmall = four;
        fourSmall.chunkElements = 7;
        ComparisonOptions oneSmall = one;
        oneSmall.chunkElements = 7;
        const auto a = compareCase(caseName, one);
        const auto b = compareCase(caseName, four);
        const auto c = compareCase(caseName, fourSmall);
        const auto d = compareCase(caseName, oneSmall);
        compareOutputs(a.output, b.output, true);  // bit for bit: blocks merge in order
        compareOutputs(c.output, d.output, true);
        // another block split sums in another order: equal up to double rounding
        compareOutputs(a.output, c.output, false);
    }

    void cancelBeforeStart() {
        std::atomic<bool> cancel{true};
        ComparisonOptions options;
        options.cancel = &cancel;
        const auto run = compareCase(QStringLiteral("combined"), options);
        QVERIFY(run.output.cancelled);
        QVERIFY(run.output.results.empty());
    }

    void cancelFromProgress() {
        std::atomic<bool> cancel{false};
        std::atomic<int> calls{0};
        ComparisonOptions options;
        options.threads = 4;
        options.chunkElements = 7;
        options.cancel = &cancel;
        options.progress = [&](double) {
            ++calls;
            cancel = true;
        };
        const auto run = compareCase(QStringLiteral("combined"), options);
        QVERIFY(run.output.cancelled);
        QVERIFY(run.output.results.empty());
        QVERIFY(calls >= 1);
    }

    void progressIsBoundedAndEnds() {
        std::vector<double> seen;
        std::mutex mutex;
        ComparisonOptions options;
        options.chunkElements = 16;
        options.progress = [&](double f) {
            const std::lock_guard lock(mutex);
            seen.push_back(f);
        };
        const auto run = compareCase(QStringLiteral("combined"), options);
        QVERIFY(!run.output.cancelled);
        QVERIFY(!seen.empty());
        QCOMPARE(seen.back(), 1.0);
        for (const auto f : seen) {
            QVERIFY(f >= 0.0 && f <= 1.0);
        }
        QVERIFY(seen.size() < 100);  // throttled, though there are thousands of blocks
    }
};

QTEST_GUILESS_MAIN(TestComparison)
#include "test_comparison.moc"
