#include <sqlite3.h>

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QSysInfo>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>
#include <atomic>
#include <bit>
#include <chrono>
#include <thread>

#include "DatabaseFile.h"
#include "ReportTestData.h"
#include "store/ResultsSchema.h"
#include "store/ResultsStore.h"
#include "store/RunLock.h"

using namespace ttrace;

namespace {

bool sameBits(double a, double b) {
    return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

bool sameBits(const std::optional<double>& a, const std::optional<double>& b) {
    return a.has_value() == b.has_value() && (!a || sameBits(*a, *b));
}

// Field-by-field differences, doubles compared bit for bit; empty when equal.
class Differ {
public:
    QStringList diffs;

    template <typename T>
    void same(const QString& where, const T& a, const T& b) {
        if (!(a == b)) {
            diffs << where;
        }
    }
    void real(const QString& where, double a, double b) {
        if (!sameBits(a, b)) {
            diffs << QStringLiteral("%1: %2 vs %3").arg(where).arg(a).arg(b);
        }
    }
    void real(const QString& where, const std::optional<double>& a,
              const std::optional<double>& b) {
        if (!sameBits(a, b)) {
            diffs << where;
        }
    }
    void metrics(const QString& w, const ErrorMetrics& a, const ErrorMetrics& b) {
        same(w + QStringLiteral(".count"), a.count, b.count);
        real(w + QStringLiteral(".relativeError"), a.relativeError, b.relativeError);
        real(w + QStringLiteral(".maxAbsError"), a.maxAbsError, b.maxAbsError);
        same(w + QStringLiteral(".maxAbsIndex"), a.maxAbsIndex, b.maxAbsIndex);
        real(w + QStringLiteral(".maxRelError"), a.maxRelError, b.maxRelError);
        same(w + QStringLiteral(".maxRelIndex"), a.maxRelIndex, b.maxRelIndex);
        real(w + QStringLiteral(".cosine"), a.cosine, b.cosine);
        real(w + QStringLiteral(".refNorm"), a.refNorm, b.refNorm);
        real(w + QStringLiteral(".distNorm"), a.distNorm, b.distNorm);
        same(w + QStringLiteral(".zeroRefMismatches"), a.zeroRefMismatches, b.zeroRefMismatches);
        same(w + QStringLiteral(".nanDist"), a.nanDist, b.nanDist);
        same(w + QStringLiteral(".infDist"), a.infDist, b.infDist);
        same(w + QStringLiteral(".nanRef"), a.nanRef, b.nanRef);
        same(w + QStringLiteral(".infRef"), a.infRef, b.infRef);
        same(w + QStringLiteral(".bitDifferences"), a.bitDifferences, b.bitDifferences);
    }
    void diagnostics(const QString& w, const Diagnostics& a, const Diagnostics& b) {
        if (a.size() != b.size()) {
            diffs << w + QStringLiteral(" count");
            return;
        }
        for (std::size_t i = 0; i < a.size(); ++i) {
            const QString at = w + QStringLiteral("[%1]").arg(i);
            same(at + QStringLiteral(".severity"), a[i].severity, b[i].severity);
            same(at + QStringLiteral(".file"), a[i].file, b[i].file);
            same(at + QStringLiteral(".dataset"), a[i].dataset, b[i].dataset);
            same(at + QStringLiteral(".tensor"), a[i].tensor, b[i].tensor);
            same(at + QStringLiteral(".message"), a[i].message, b[i].message);
            same(at + QStringLiteral(".code"), a[i].code, b[i].code);
        }
    }
    void result(const QString& w, const TensorResult& a, const TensorResult& b) {
        same(w + QStringLiteral(".key"), a.key, b.key);
        same(w + QStringLiteral(".layer"), a.layer, b.layer);
        same(w + QStringLiteral(".expert"), a.expert, b.expert);
        same(w + QStringLiteral(".dtype"), a.dtype, b.dtype);
        same(w + QStringLiteral(".globalShape"), a.globalShape, b.globalShape);
        same(w + QStringLiteral(".bytesCompared"), a.bytesCompared, b.bytesCompared);
        metrics(w + QStringLiteral(".metrics"), a.metrics, b.metrics);
        same(w + QStringLiteral(".perturbation present"), a.perturbation.has_value(),
             b.perturbation.has_value());
        if (a.perturbation && b.perturbation) {
            metrics(w + QStringLiteral(".perturbation"), *a.perturbation, *b.perturbation);
        }
        real(w + QStringLiteral(".threshold.value"), a.threshold.value, b.threshold.value);
        same(w + QStringLiteral(".threshold.method"), a.threshold.method, b.threshold.method);
        real(w + QStringLiteral(".threshold.theoretical"), a.threshold.theoretical,
             b.threshold.theoretical);
        real(w + QStringLiteral(".threshold.perturbationError"), a.threshold.perturbationError,
             b.threshold.perturbationError);
        real(w + QStringLiteral(".threshold.perturbationThreshold"),
             a.threshold.perturbationThreshold, b.threshold.perturbationThreshold);
        real(w + QStringLiteral(".threshold.floor"), a.threshold.floor, b.threshold.floor);
        same(w + QStringLiteral(".threshold.overridePattern"), a.threshold.overridePattern,
             b.threshold.overridePattern);
        real(w + QStringLiteral(".normalizedError"), a.normalizedError, b.normalizedError);
        same(w + QStringLiteral(".referenceSeq"), a.referenceSeq, b.referenceSeq);
        same(w + QStringLiteral(".rankSeq"), a.rankSeq, b.rankSeq);
        if (a.shards.size() != b.shards.size()) {
            diffs << w + QStringLiteral(".shards count");
        } else {
            for (std::size_t s = 0; s < a.shards.size(); ++s) {
                const QString at = w + QStringLiteral(".shards[%1]").arg(s);
                same(at + QStringLiteral(".ranges"), a.shards[s].ranges, b.shards[s].ranges);
                same(at + QStringLiteral(".ranks"), a.shards[s].ranks, b.shards[s].ranks);
                same(at + QStringLiteral(".replica"), a.shards[s].replica, b.shards[s].replica);
                metrics(at + QStringLiteral(".metrics"), a.shards[s].metrics, b.shards[s].metrics);
                real(at + QStringLiteral(".normalizedError"), a.shards[s].normalizedError,
                     b.shards[s].normalizedError);
            }
        }
        if (a.replicaMismatches.size() != b.replicaMismatches.size()) {
            diffs << w + QStringLiteral(".replicaMismatches count");
        } else {
            for (std::size_t m = 0; m < a.replicaMismatches.size(); ++m) {
                const auto& x = a.replicaMismatches[m];
                const auto& y = b.replicaMismatches[m];
                const QString at = w + QStringLiteral(".replicaMismatches[%1]").arg(m);
                same(at + QStringLiteral(".ranges"), x.ranges, y.ranges);
                same(at + QStringLiteral(".ranksA"), x.ranksA, y.ranksA);
                same(at + QStringLiteral(".ranksB"), x.ranksB, y.ranksB);
                same(at + QStringLiteral(".differingElements"), x.differingElements,
                     y.differingElements);
                real(at + QStringLiteral(".maxAbsDifference"), x.maxAbsDifference,
                     y.maxAbsDifference);
            }
        }
        if (a.recomputationMismatches.size() != b.recomputationMismatches.size()) {
            diffs << w + QStringLiteral(".recomputationMismatches count");
        } else {
            for (std::size_t m = 0; m < a.recomputationMismatches.size(); ++m) {
                const auto& x = a.recomputationMismatches[m];
                const auto& y = b.recomputationMismatches[m];
                const QString at = w + QStringLiteral(".recomputationMismatches[%1]").arg(m);
                same(at + QStringLiteral(".ranges"), x.ranges, y.ranges);
                same(at + QStringLiteral(".rank"), x.rank, y.rank);
                same(at + QStringLiteral(".differingElements"), x.differingElements,
                     y.differingElements);
                same(at + QStringLiteral(".elements"), x.elements, y.elements);
                same(at + QStringLiteral(".scalesDiffer"), x.scalesDiffer, y.scalesDiffer);
            }
        }
        diagnostics(w + QStringLiteral(".diagnostics"), a.diagnostics, b.diagnostics);
    }
    void output(const ComparisonOutput& a, const ComparisonOutput& b) {
        same(QStringLiteral("backendName"), a.backendName, b.backendName);
        same(QStringLiteral("bytesCompared"), a.bytesCompared, b.bytesCompared);
        same(QStringLiteral("cancelled"), a.cancelled, b.cancelled);
        same(QStringLiteral("coverage.referenceTensors"), a.coverage.referenceTensors,
             b.coverage.referenceTensors);
        same(QStringLiteral("coverage.notCaptured"), a.coverage.notCaptured,
             b.coverage.notCaptured);
        same(QStringLiteral("coverage.notInReference"), a.coverage.notInReference,
             b.coverage.notInReference);
        diagnostics(QStringLiteral("diagnostics"), a.diagnostics, b.diagnostics);
        if (a.results.size() != b.results.size()) {
            diffs << QStringLiteral("results count %1 vs %2")
                         .arg(a.results.size())
                         .arg(b.results.size());
            return;
        }
        for (std::size_t i = 0; i < a.results.size(); ++i) {
            result(QStringLiteral("results[%1]").arg(i), a.results[i], b.results[i]);
        }
    }
};

QStringList differences(const ComparisonOutput& a, const ComparisonOutput& b) {
    Differ differ;
    differ.output(a, b);
    return differ.diffs;
}

// Runs a one-value query on the database file directly, bypassing the store.
QString queryText(const QString& path, const char* sql) {
    sqlite3* db = nullptr;
    QString value;
    if (sqlite3_open_v2(path.toUtf8().constData(), &db, SQLITE_OPEN_READONLY, nullptr) ==
        SQLITE_OK) {
        sqlite3_stmt* stmt = nullptr;
        if (sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr) == SQLITE_OK &&
            sqlite3_step(stmt) == SQLITE_ROW) {
            value = QString::fromUtf8(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)));
        }
        sqlite3_finalize(stmt);
    }
    sqlite3_close(db);
    return value;
}

void writeFile(const QString& path, const QByteArray& contents) {
    QFile file(path);
    QVERIFY2(file.open(QIODevice::WriteOnly), qPrintable(path));
    QCOMPARE(file.write(contents), contents.size());
}

TraceOpening sampleOpening() {
    TraceOpening opening;
    opening.distributedDatasets = 4096;
    opening.referenceDatasets = 128;
    opening.perturbedDatasets = 129;
    opening.diagnostics.push_back(
        {Severity::Warning, QStringLiteral("/traces/dist/rank9.h5"), QString(), QString(),
         QStringLiteral("is not listed in manifest.json and is ignored"), QString(), QString()});
    opening.diagnostics.push_back(
        {Severity::Error, QStringLiteral("/traces/dist/rank3.h5"), QStringLiteral("/tensors/7"),
         QStringLiteral("layers.0.mlp.fc1 forward_output"),
         QStringLiteral("attribute 'placements' is not valid JSON"),
         QStringLiteral("truncated file: eof = 100, stored_eof = 200"), QString()});
    return opening;
}

// Every field of an opening, one per line, for comparing two of them.
QString openingText(const TraceOpening& opening) {
    QStringList lines{QString::number(opening.distributedDatasets),
                      QString::number(opening.referenceDatasets),
                      opening.perturbedDatasets ? QString::number(*opening.perturbedDatasets)
                                                : QStringLiteral("none")};
    for (const Diagnostic& d : opening.diagnostics) {
        lines << severityName(d.severity) + QLatin1Char('|') + d.file + QLatin1Char('|') +
                     d.dataset + QLatin1Char('|') + d.tensor + QLatin1Char('|') + d.message +
                     QLatin1Char('|') + d.code;
    }
    return lines.join(QLatin1Char('\n'));
}

// The report tests' comparison with a bug, and a forward recomputed differently on two ranks,
// one of them in its fp8 scale too.
ComparisonOutput bugComparison() {
    ComparisonOutput output = test::makeComparison(true);
    TensorResult& recomputed = output.results[1];
    recomputed.recomputationMismatches = {{recomputed.shards[0].ranges, 1, 3, 64, false},
                                          {recomputed.shards[0].ranges, 2, 64, 64, true}};
    // A trusted run's own findings carry a code, on a result and on the run.
    Diagnostic scales;
    scales.severity = Severity::Warning;
    scales.file = QStringLiteral("/traces/ref/rank00001.h5");
    scales.message = QStringLiteral("the reference's fp8 scales disagree with themselves");
    scales.code = QStringLiteral("fp8_scales_differ");
    recomputed.diagnostics.push_back(scales);
    Diagnostic copies = scales;
    copies.severity = Severity::Error;
    copies.message = QStringLiteral("the reference disagrees with itself");
    copies.code = QStringLiteral("copies_differ");
    output.diagnostics.push_back(copies);
    return output;
}

}  // namespace

class TestResultsStore : public QObject {
    Q_OBJECT

private:
    QTemporaryDir dir_;
    QString dbPath() const { return dir_.filePath(QStringLiteral("results.sqlite")); }
    // The RunWriter tests' own store, so that the counts of rows in dbPath() stay theirs.
    QString writerDbPath() const { return dir_.filePath(QStringLiteral("written.sqlite")); }

    // The writer's store refuses the shards of the result at position 7, as a full disk would
    // refuse a write (dropped again with "DROP TRIGGER refuse").
    bool refuseShardsAtPosition7() const {
        return test::execOnFile(writerDbPath(),
                                "CREATE TRIGGER refuse BEFORE INSERT ON shards WHEN "
                                "NEW.tensor_idx = 7 BEGIN SELECT RAISE(ABORT, 'disk is full'); "
                                "END;");
    }

    // Saves `output` as run "fp-old" in a new store at `path`, then runs `sql` on the database
    // (turning it back into an older schema).
    void saveThenEdit(const QString& path, const ComparisonOutput& output, const char* sql) {
        QString error;
        {
            auto store = ResultsStore::open(path, &error);
            QVERIFY2(store, qPrintable(error));
            QVERIFY2(store->save(QStringLiteral("fp-old"), QString(), output, {}, &error),
                     qPrintable(error));
        }
        sqlite3* db = nullptr;
        QCOMPARE(sqlite3_open(path.toUtf8().constData(), &db), SQLITE_OK);
        QCOMPARE(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK);
        sqlite3_close(db);
    }

    // `output` saved, then the store turned back into an older schema by `downgrade`: opening
    // it migrates to the latest and keeps the run, loaded into `loaded` with every diagnostic.
    void migrationKeepsRun(const QString& file, const ComparisonOutput& output,
                           const char* downgrade, std::optional<ComparisonOutput>& loaded) {
        const QString path = dir_.filePath(file);
        saveThenEdit(path, output, downgrade);
        if (QTest::currentTestFailed()) {
            return;
        }
        QString error;
        auto store = ResultsStore::open(path, &error);
        QVERIFY2(store, qPrintable(error));
        loaded = store->load(QStringLiteral("fp-old"));
        QVERIFY(loaded);
        QCOMPARE(queryText(path, "SELECT MAX(version) FROM schema_migrations"),
                 QString::number(results_schema::latestVersion()));
        QCOMPARE(loaded->diagnostics.size(), output.diagnostics.size());
    }

    // A run saved, then the store turned back into an older schema by `downgrade`: opening
    // it migrates to the latest and drops the run, and the migrated store saves and loads runs
    // as a new one does.
    void migrationDropsRuns(const QString& file, const char* downgrade) {
        const QString path = dir_.filePath(file);
        QString error;
        const ComparisonOutput output = bugComparison();
        saveThenEdit(path, output, downgrade);
        if (QTest::currentTestFailed()) {
            return;
        }
        QCOMPARE(queryText(path, "SELECT COUNT(*) FROM runs"), QStringLiteral("1"));

        auto store = ResultsStore::open(path, &error);
        QVERIFY2(store, qPrintable(error));
        QVERIFY(!store->load(QStringLiteral("fp-old")));
        QCOMPARE(queryText(path, "SELECT COUNT(*) FROM runs"), QStringLiteral("0"));
        QCOMPARE(queryText(path, "SELECT MAX(version) FROM schema_migrations"),
                 QString::number(results_schema::latestVersion()));
        QVERIFY2(store->save(QStringLiteral("fp-new"), QString(), output, {}, &error),
                 qPrintable(error));
        const auto loaded = store->load(QStringLiteral("fp-new"));
        QVERIFY(loaded);
        QVERIFY(differences(output, *loaded).isEmpty());
    }

private Q_SLOTS:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void roundTrip() {
        QString error;
        auto store = ResultsStore::open(dbPath(), &error);
        QVERIFY2(store, qPrintable(error));
        // Complete: cancelled or incomplete runs are stored but never loaded again
        // (test_distributed's incompleteOrCancelledRunIsNeverReused).
        const ComparisonOutput output = bugComparison();
        QVERIFY(output.results.size() > 10);
        QVERIFY2(store->save(QStringLiteral("fp-bug"), QStringLiteral("bug run"), output,
                             sampleOpening(), &error),
                 qPrintable(error));
        const auto loaded = store->load(QStringLiteral("fp-bug"));
        QVERIFY(loaded);
        const QStringList diffs = differences(output, *loaded);
        QVERIFY2(diffs.isEmpty(), qPrintable(diffs.join(QStringLiteral("\n"))));
        const auto opening = store->loadOpening(QStringLiteral("fp-bug"));
        QVERIFY(opening);
        QCOMPARE(openingText(*opening), openingText(sampleOpening()));
        // The test data exercises what matters: NaN, Inf, -0, absent optionals, a scalar.
        bool sawNan = false;
        bool sawInf = false;
        for (const auto& r : loaded->results) {
            sawNan = sawNan || std::isnan(r.normalizedError);
            sawInf = sawInf || std::isinf(r.metrics.maxAbsError);
        }
        QVERIFY(sawNan && sawInf);
        QVERIFY(std::any_of(loaded->results.begin(), loaded->results.end(),
                            [](const TensorResult& r) { return !r.perturbation; }));
        QVERIFY(std::any_of(loaded->results.begin(), loaded->results.end(),
                            [](const TensorResult& r) { return !r.replicaMismatches.empty(); }));
    }

    // Loaded without shards and rank sequence numbers, then each tensor's read from the
    // details: the same results as a whole load.
    void detailsOnDemand() {
        QString error;
        auto store = ResultsStore::open(dbPath(), &error);
        QVERIFY2(store, qPrintable(error));
        auto summary = store->load(QStringLiteral("fp-bug"), DetailLoading::OnDemand);
        QVERIFY(summary);
        const auto source = store->details(QStringLiteral("fp-bug"));
        QVERIFY(source);
        store.reset();  // the source reads on a connection of its own
        const ComparisonOutput expected = bugComparison();
        QCOMPARE(summary->results.size(), expected.results.size());
        std::size_t shards = 0;
        std::size_t rankSeqs = 0;
        for (std::size_t i = 0; i < summary->results.size(); ++i) {
            QVERIFY(summary->results[i].shards.empty());
            QVERIFY(summary->results[i].rankSeq.empty());
            summary->results[i].shards = source->shardsOf(i);
            summary->results[i].rankSeq = source->rankSeqOf(i);
            shards += summary->results[i].shards.size();
            rankSeqs += summary->results[i].rankSeq.size();
        }
        QVERIFY(shards > 0 && rankSeqs > 0);
        const QStringList diffs = differences(expected, *summary);
        QVERIFY2(diffs.isEmpty(), qPrintable(diffs.join(QStringLiteral("\n"))));
        QVERIFY(source->shardsOf(summary->results.size()).empty());
        QVERIFY(source->rankSeqOf(summary->results.size()).empty());
    }

    void reopenKeepsResults() {
        QString error;
        auto store = ResultsStore::open(dbPath(), &error);
        QVERIFY2(store, qPrintable(error));
        const auto loaded = store->load(QStringLiteral("fp-bug"));
        QVERIFY(loaded);
        const ComparisonOutput expected = bugComparison();
        const QStringList diffs = differences(expected, *loaded);
        QVERIFY2(diffs.isEmpty(), qPrintable(diffs.join(QStringLiteral("\n"))));
    }

    // A check writes each result as it finishes, at its place in the reference's order, in
    // any order and with gaps (tensors without a result): loaded, the results come in the
    // order of their places, and their details are read by result index.
    void writerStoresResultsAtTheirPlaces() {
        QString error;
        auto store = ResultsStore::open(writerDbPath(), &error);
        QVERIFY2(store, qPrintable(error));
        ComparisonOutput expected = bugComparison();
        // 5 reference tensors not captured, 2 not comparable, 3 not in the reference.
        expected.coverage = {static_cast<std::int64_t>(expected.results.size()) + 7, 5, 3};
        auto writer = store->beginRun(QStringLiteral("fp-writer"), QStringLiteral("written"),
                                      sampleOpening(), &error);
        QVERIFY2(writer, qPrintable(error));
        // Result i at place 3i + 1, added last to first.
        for (std::size_t i = expected.results.size(); i-- > 0;) {
            QVERIFY(writer->add(static_cast<std::int64_t>(3 * i + 1), expected.results[i]));
        }
        // Not complete yet: never reused, but readable as what the check has so far.
        QVERIFY(!store->load(QStringLiteral("fp-writer")));
        QVERIFY(writer->finish(expected));
        QVERIFY(writer->error().isEmpty());
        writer.reset();
        const auto loaded = store->load(QStringLiteral("fp-writer"));
        QVERIFY(loaded);
        QStringList diffs = differences(expected, *loaded);
        QVERIFY2(diffs.isEmpty(), qPrintable(diffs.join(QStringLiteral("\n"))));

        auto summary = store->load(QStringLiteral("fp-writer"), DetailLoading::OnDemand);
        const auto source = store->details(QStringLiteral("fp-writer"));
        QVERIFY(summary && source);
        for (std::size_t i = 0; i < summary->results.size(); ++i) {
            summary->results[i].shards = source->shardsOf(i);
            summary->results[i].rankSeq = source->rankSeqOf(i);
        }
        diffs = differences(expected, *summary);
        QVERIFY2(diffs.isEmpty(), qPrintable(diffs.join(QStringLiteral("\n"))));
    }

    // A run finished incomplete (a process failed) is never reused, but the check that wrote
    // it reads it back to report what it did compare.
    void incompleteRunIsReadOnlyWhenAskedFor() {
        QString error;
        auto store = ResultsStore::open(writerDbPath(), &error);
        QVERIFY2(store, qPrintable(error));
        const ComparisonOutput expected = test::makeComparison(false);
        auto writer = store->beginRun(QStringLiteral("fp-partial"), QString(), {}, &error);
        QVERIFY2(writer, qPrintable(error));
        QVERIFY(writer->add(0, expected.results[0]));
        QVERIFY(writer->add(2, expected.results[2]));
        ComparisonOutput unfinished;  // a process failed: tensors left unchecked
        unfinished.backendName = expected.backendName;
        unfinished.unchecked = {QStringLiteral("layers.0.fc1 forward_output[0] it0 mb0")};
        QVERIFY(writer->finish(unfinished));
        QVERIFY(!store->load(QStringLiteral("fp-partial")));
        QVERIFY(!store->details(QStringLiteral("fp-partial")));
        const auto partial = store->load(QStringLiteral("fp-partial"), DetailLoading::WithResults,
                                         StoredRuns::IncompleteToo);
        QVERIFY(partial);
        QCOMPARE(partial->results.size(), std::size_t{2});
        QCOMPARE(partial->results[1].key, expected.results[2].key);
        QCOMPARE(partial->bytesCompared,
                 expected.results[0].bytesCompared + expected.results[2].bytesCompared);
        const auto details =
            store->details(QStringLiteral("fp-partial"), StoredRuns::IncompleteToo);
        QVERIFY(details);
        QCOMPARE(details->shardsOf(1).size(), expected.results[2].shards.size());
    }

    // A write the database refuses (here a trigger, as a full disk would) stops the writer
    // with a message naming the store; the run is never reused.
    void refusedWriteNamesTheStore() {
        QString error;
        auto store = ResultsStore::open(writerDbPath(), &error);
        QVERIFY2(store, qPrintable(error));
        const ComparisonOutput expected = bugComparison();
        QVERIFY(refuseShardsAtPosition7());
        auto writer = store->beginRun(QStringLiteral("fp-refused"), QString(), {}, &error);
        QVERIFY2(writer, qPrintable(error));
        QVERIFY(writer->add(0, expected.results[0]));
        QVERIFY(!writer->add(7, expected.results[1]));
        QVERIFY(writer->error().contains(writerDbPath()));
        QVERIFY(writer->error().contains(QStringLiteral("disk is full")));
        QVERIFY(!writer->add(8, expected.results[2]));  // stopped
        QVERIFY(!writer->finish(expected));
        // What the refused batch had taken is handed back, not lost: the check reports it from
        // memory. The result being added when the write failed stays with its caller.
        const auto unstored = writer->takeUnstored();
        QCOMPARE(unstored.size(), std::size_t{1});
        QCOMPARE(unstored.front().first, std::int64_t{0});
        QCOMPARE(unstored.front().second.key, expected.results[0].key);
        QVERIFY(writer->takeUnstored().empty());
        writer.reset();
        QVERIFY(!store->load(QStringLiteral("fp-refused")));
        QVERIFY(test::execOnFile(writerDbPath(), "DROP TRIGGER refuse;"));
    }

    // Batches committed before a refused write stay in the store, readable as an incomplete
    // run; only the refused batch is handed back.
    void committedBatchesSurviveARefusedWrite() {
        QString error;
        auto store = ResultsStore::open(writerDbPath(), &error);
        QVERIFY2(store, qPrintable(error));
        const ComparisonOutput expected = bugComparison();
        QVERIFY(refuseShardsAtPosition7());
        auto writer = store->beginRun(QStringLiteral("fp-committed"), QString(), {}, &error);
        QVERIFY2(writer, qPrintable(error));
        QVERIFY(writer->add(0, expected.results[0]));
        QThread::msleep(600);                          // older than a batch: committed with
        QVERIFY(writer->add(1, expected.results[1]));  // this one
        QVERIFY(writer->add(2, expected.results[2]));
        QVERIFY(!writer->add(7, expected.results[3]));
        const auto unstored = writer->takeUnstored();
        QCOMPARE(unstored.size(), std::size_t{1});
        QCOMPARE(unstored.front().first, std::int64_t{2});
        writer.reset();
        const auto committed = store->load(QStringLiteral("fp-committed"),
                                           DetailLoading::WithResults, StoredRuns::IncompleteToo);
        QVERIFY(committed);
        QCOMPARE(committed->results.size(), std::size_t{2});
        QCOMPARE(committed->results[0].key, expected.results[0].key);
        QCOMPARE(committed->results[1].key, expected.results[1].key);
        QCOMPARE(committed->results[1].shards.size(), expected.results[1].shards.size());
        QVERIFY(test::execOnFile(writerDbPath(), "DROP TRIGGER refuse;"));
    }

    void saveReplacesRun() {
        QString error;
        auto store = ResultsStore::open(dbPath(), &error);
        QVERIFY2(store, qPrintable(error));
        const ComparisonOutput other = test::makeComparison(false);
        QVERIFY2(store->save(QStringLiteral("fp-other"), QString(), other, {}, &error),
                 qPrintable(error));

        ComparisonOutput smaller = test::makeComparison(false);
        smaller.results.resize(3);
        smaller.bytesCompared = 0;  // what the results kept compared, as a comparison counts it
        for (const auto& r : smaller.results) {
            smaller.bytesCompared += r.bytesCompared;
        }
        smaller.diagnostics.clear();
        smaller.backendName = QStringLiteral("cuda");
        QVERIFY2(
            store->save(QStringLiteral("fp-bug"), QStringLiteral("again"), smaller, {}, &error),
            qPrintable(error));
        const auto loaded = store->load(QStringLiteral("fp-bug"));
        QVERIFY(loaded);
        const QStringList diffs = differences(smaller, *loaded);
        QVERIFY2(diffs.isEmpty(), qPrintable(diffs.join(QStringLiteral("\n"))));

        // The replaced run's rows are gone, the other run is untouched.
        QCOMPARE(queryText(dbPath(), "SELECT COUNT(*) FROM runs"), QStringLiteral("2"));
        QCOMPARE(queryText(dbPath(), "SELECT COUNT(*) FROM tensors"),
                 QString::number(3 + other.results.size()));
        const auto otherLoaded = store->load(QStringLiteral("fp-other"));
        QVERIFY(otherLoaded);
        QVERIFY(differences(other, *otherLoaded).isEmpty());
    }

    void unknownFingerprint() {
        QString error;
        auto store = ResultsStore::open(dbPath(), &error);
        QVERIFY2(store, qPrintable(error));
        QVERIFY(!store->load(QStringLiteral("no-such-run")));
        QVERIFY(!store->details(QStringLiteral("no-such-run")));
        QVERIFY(!store->loadOpening(QStringLiteral("no-such-run")));
        QVERIFY(!store->saveOpening(QStringLiteral("no-such-run"), sampleOpening(), &error));
        QVERIFY2(error.contains(QStringLiteral("no-such-run")), qPrintable(error));
    }

    // A run is shown from the store alone only with what opening its traces found; without a
    // perturbed reference none is stored, and saveOpening replaces the opening of a run.
    void openingWithoutPerturbedAndReplaced() {
        QString error;
        auto store = ResultsStore::open(dbPath(), &error);
        QVERIFY2(store, qPrintable(error));
        TraceOpening plain;
        plain.distributedDatasets = 7;
        plain.referenceDatasets = 3;
        QVERIFY2(store->save(QStringLiteral("fp-plain"), QString(), test::makeComparison(false),
                             plain, &error),
                 qPrintable(error));
        auto loaded = store->loadOpening(QStringLiteral("fp-plain"));
        QVERIFY(loaded);
        QCOMPARE(openingText(*loaded), openingText(plain));
        QVERIFY(!loaded->perturbedDatasets);

        QVERIFY2(store->saveOpening(QStringLiteral("fp-plain"), sampleOpening(), &error),
                 qPrintable(error));
        loaded = store->loadOpening(QStringLiteral("fp-plain"));
        QVERIFY(loaded);
        QCOMPARE(openingText(*loaded), openingText(sampleOpening()));
    }

    void emptyOutput() {
        QString error;
        auto store = ResultsStore::open(dbPath(), &error);
        QVERIFY2(store, qPrintable(error));
        const ComparisonOutput empty;
        QVERIFY2(store->save(QStringLiteral("fp-empty"), QString(), empty, {}, &error),
                 qPrintable(error));
        const auto loaded = store->load(QStringLiteral("fp-empty"));
        QVERIFY(loaded);
        QVERIFY(loaded->results.empty());
        QVERIFY(loaded->diagnostics.empty());
    }

    void walModeAndSchemaVersion() {
        QString error;
        auto store = ResultsStore::open(dbPath(), &error);
        QVERIFY2(store, qPrintable(error));
        QCOMPARE(queryText(dbPath(), "PRAGMA journal_mode"), QStringLiteral("wal"));
        QCOMPARE(queryText(dbPath(), "SELECT MAX(version) FROM schema_migrations"),
                 QStringLiteral("10"));
    }

    // Runs saved by a version-1 store were compared without the fp8 scale check: migrating to
    // version 2 drops them, so that they are compared again instead of reused without it.
    void migrationToVersion2DropsOlderRuns() {
        const QString path = dir_.filePath(QStringLiteral("v1.sqlite"));
        QString error;
        {
            auto store = ResultsStore::open(path, &error);
            QVERIFY2(store, qPrintable(error));
            QVERIFY2(store->save(QStringLiteral("fp-old"), QString(), bugComparison(), {}, &error),
                     qPrintable(error));
        }
        sqlite3* db = nullptr;
        QCOMPARE(sqlite3_open(path.toUtf8().constData(), &db), SQLITE_OK);
        QCOMPARE(sqlite3_exec(db,
                              "DROP TABLE recomputation_mismatches; "
                              "DROP TABLE opening_diagnostics; DROP TABLE run_traces; "
                              "DROP TABLE fp8_scale_mismatches; DROP TABLE fp8_scales; "
                              "ALTER TABLE runs DROP COLUMN reference_tensors; "
                              "ALTER TABLE runs DROP COLUMN not_captured; "
                              "ALTER TABLE runs DROP COLUMN not_in_reference; "
                              "ALTER TABLE diagnostics DROP COLUMN details; "
                              "ALTER TABLE diagnostics DROP COLUMN code; "
                              "DELETE FROM schema_migrations WHERE version >= 2",
                              nullptr, nullptr, nullptr),
                 SQLITE_OK);
        sqlite3_close(db);
        QCOMPARE(queryText(path, "SELECT COUNT(*) FROM runs"), QStringLiteral("1"));

        auto store = ResultsStore::open(path, &error);
        QVERIFY2(store, qPrintable(error));
        QVERIFY(!store->load(QStringLiteral("fp-old")));
        QCOMPARE(queryText(path, "SELECT COUNT(*) FROM runs"), QStringLiteral("0"));
        QCOMPARE(queryText(path, "SELECT COUNT(*) FROM tensors"), QStringLiteral("0"));
        QCOMPARE(queryText(path, "SELECT MAX(version) FROM schema_migrations"),
                 QString::number(results_schema::latestVersion()));
        QCOMPARE(queryText(path, "SELECT COUNT(*) FROM fp8_scales"), QStringLiteral("0"));
    }

    // Runs saved by a version-3 store had their fp8 scales checked per tensor only and no
    // coverage: migrating to version 4 (per-row and per-block scales) drops them, to be
    // compared again (test_fp8_scales covers the new fields).
    void migrationToVersion4DropsRunsCheckedPerTensor() {
        migrationDropsRuns(QStringLiteral("v3.sqlite"),
                           "ALTER TABLE runs DROP COLUMN reference_tensors; "
                           "ALTER TABLE runs DROP COLUMN not_captured; "
                           "ALTER TABLE runs DROP COLUMN not_in_reference; "
                           "ALTER TABLE fp8_scales DROP COLUMN reference_block; "
                           "ALTER TABLE fp8_scales DROP COLUMN blocks_not_compared; "
                           "ALTER TABLE fp8_scale_mismatches DROP COLUMN block; "
                           "ALTER TABLE fp8_scale_mismatches DROP COLUMN reference_scale_inv; "
                           "ALTER TABLE fp8_scale_mismatches DROP COLUMN blocks_beyond; "
                           "ALTER TABLE fp8_scale_mismatches DROP COLUMN across_reference_blocks; "
                           "DROP TABLE recomputation_mismatches; "
                           "ALTER TABLE diagnostics DROP COLUMN details; "
                           "ALTER TABLE opening_diagnostics DROP COLUMN details; "
                           "ALTER TABLE diagnostics DROP COLUMN code; "
                           "ALTER TABLE opening_diagnostics DROP COLUMN code; "
                           "ALTER TABLE fp8_scales DROP COLUMN data_parallel_blocks; "
                           "ALTER TABLE fp8_scales DROP COLUMN reference_format; "
                           "ALTER TABLE fp8_scales DROP COLUMN reference_tensor_scale; "
                           "DELETE FROM schema_migrations WHERE version >= 4");
    }

    // Runs saved by a version-4 store did not read the rank files' recomputations: migrating
    // to version 5 drops them, to be compared again.
    void migrationToVersion5DropsRunsWithoutRecomputations() {
        migrationDropsRuns(QStringLiteral("v4.sqlite"),
                           "DROP TABLE recomputation_mismatches; "
                           "ALTER TABLE fp8_scale_mismatches DROP COLUMN across_reference_blocks; "
                           "ALTER TABLE diagnostics DROP COLUMN details; "
                           "ALTER TABLE opening_diagnostics DROP COLUMN details; "
                           "ALTER TABLE diagnostics DROP COLUMN code; "
                           "ALTER TABLE opening_diagnostics DROP COLUMN code; "
                           "ALTER TABLE fp8_scales DROP COLUMN data_parallel_blocks; "
                           "ALTER TABLE fp8_scales DROP COLUMN reference_format; "
                           "ALTER TABLE fp8_scales DROP COLUMN reference_tensor_scale; "
                           "DELETE FROM schema_migrations WHERE version >= 5");
    }

    // Version 6 only gives diagnostics libhdf5's own words: the runs a version-5 store saved
    // are kept, their diagnostics without details.
    void migrationToVersion6KeepsRuns() {
        ComparisonOutput output = bugComparison();
        Diagnostic d;
        d.severity = Severity::Error;
        d.file = QStringLiteral("rank00001.h5");
        d.message = QStringLiteral("its list of the datasets in /tensors is damaged");
        output.diagnostics.push_back(d);
        std::optional<ComparisonOutput> loaded;
        migrationKeepsRun(QStringLiteral("v5.sqlite"), output,
                          "ALTER TABLE fp8_scale_mismatches DROP COLUMN across_reference_blocks; "
                          "ALTER TABLE diagnostics DROP COLUMN details; "
                          "ALTER TABLE opening_diagnostics DROP COLUMN details; "
                          "ALTER TABLE diagnostics DROP COLUMN code; "
                          "ALTER TABLE opening_diagnostics DROP COLUMN code; "
                          "ALTER TABLE fp8_scales DROP COLUMN data_parallel_blocks; "
                          "ALTER TABLE fp8_scales DROP COLUMN reference_format; "
                          "ALTER TABLE fp8_scales DROP COLUMN reference_tensor_scale; "
                          "DELETE FROM schema_migrations WHERE version >= 6",
                          loaded);
        if (QTest::currentTestFailed()) {
            return;
        }
        QCOMPARE(loaded->diagnostics.back().message, d.message);
        QVERIFY(loaded->diagnostics.back().details.isEmpty());
    }

    // Version 7 only gives diagnostics a code: the runs a version-6 store saved are kept, their
    // diagnostics without one.
    void migrationToVersion7KeepsRuns() {
        const ComparisonOutput output = bugComparison();
        std::optional<ComparisonOutput> loaded;
        migrationKeepsRun(QStringLiteral("v6.sqlite"), output,
                          "ALTER TABLE fp8_scale_mismatches DROP COLUMN across_reference_blocks; "
                          "ALTER TABLE diagnostics DROP COLUMN code; "
                          "ALTER TABLE opening_diagnostics DROP COLUMN code; "
                          "ALTER TABLE fp8_scales DROP COLUMN data_parallel_blocks; "
                          "ALTER TABLE fp8_scales DROP COLUMN reference_format; "
                          "ALTER TABLE fp8_scales DROP COLUMN reference_tensor_scale; "
                          "DELETE FROM schema_migrations WHERE version >= 7",
                          loaded);
        if (QTest::currentTestFailed()) {
            return;
        }
        QCOMPARE(loaded->diagnostics.back().message, output.diagnostics.back().message);
        QVERIFY(!output.diagnostics.back().code.isEmpty());
        QVERIFY(loaded->diagnostics.back().code.isEmpty());
    }

    // Version 8 only marks fp8 copies laid out across the reference's blocks: the runs a
    // version-7 store saved are kept, their scale mismatches without the mark.
    void migrationToVersion8KeepsRuns() {
        ComparisonOutput output = bugComparison();
        std::optional<ComparisonOutput> loaded;
        migrationKeepsRun(QStringLiteral("v7.sqlite"), output,
                          "ALTER TABLE fp8_scale_mismatches DROP COLUMN across_reference_blocks; "
                          "ALTER TABLE fp8_scales DROP COLUMN data_parallel_blocks; "
                          "ALTER TABLE fp8_scales DROP COLUMN reference_format; "
                          "ALTER TABLE fp8_scales DROP COLUMN reference_tensor_scale; "
                          "DELETE FROM schema_migrations WHERE version >= 8",
                          loaded);
    }

    // Version 9 only counts fp8 blocks that data-parallel ranks scaled by their own samples:
    // the runs a version-8 store saved are kept, with none counted.
    void migrationToVersion9KeepsRuns() {
        ComparisonOutput output = bugComparison();
        std::optional<ComparisonOutput> loaded;
        migrationKeepsRun(QStringLiteral("v8.sqlite"), output,
                          "ALTER TABLE fp8_scales DROP COLUMN data_parallel_blocks; "
                          "ALTER TABLE fp8_scales DROP COLUMN reference_format; "
                          "ALTER TABLE fp8_scales DROP COLUMN reference_tensor_scale; "
                          "DELETE FROM schema_migrations WHERE version >= 9",
                          loaded);
    }

    // Version 10 only says what the reference's scales are (MXFP8's E8M0, NVFP4's tensor
    // scale): the runs a version-9 store saved are kept, their scales said to be float64.
    void migrationToVersion10KeepsRuns() {
        ComparisonOutput output = bugComparison();
        std::optional<ComparisonOutput> loaded;
        migrationKeepsRun(QStringLiteral("v9.sqlite"), output,
                          "ALTER TABLE fp8_scales DROP COLUMN reference_format; "
                          "ALTER TABLE fp8_scales DROP COLUMN reference_tensor_scale; "
                          "DELETE FROM schema_migrations WHERE version = 10",
                          loaded);
    }

    // A second check of the same run waits for the first, says who holds the lock once, and
    // stops waiting when cancelled; another run's lock is not held up.
    void runLockIsWaitedForAndCancellable() {
        QString error;
        auto held = RunLock::acquire(dir_.path(), QStringLiteral("fp-a"), nullptr, {}, &error);
        QVERIFY2(held, qPrintable(error));
        QVERIFY(RunLock::acquire(dir_.path(), QStringLiteral("fp-b"), nullptr, {}, &error));

        std::atomic<bool> cancel{false};
        QStringList holders;
        std::thread canceller([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(400));
            cancel.store(true);
        });
        const auto waited = RunLock::acquire(
            dir_.path(), QStringLiteral("fp-a"), &cancel,
            [&](const QString& holder) { holders << holder; }, &error);
        canceller.join();
        QVERIFY(!waited);
        QVERIFY(error.isEmpty());
        QCOMPARE(holders, QStringList{QStringLiteral("pid %1 on %2")
                                          .arg(QCoreApplication::applicationPid())
                                          .arg(QSysInfo::machineHostName())});

        held.reset();
        QVERIFY(RunLock::acquire(dir_.path(), QStringLiteral("fp-a"), nullptr, {}, &error));
    }

    void newerSchemaIsRefused() {
        const QString path = dir_.filePath(QStringLiteral("newer.sqlite"));
        QString error;
        QVERIFY2(ResultsStore::open(path, &error), qPrintable(error));
        sqlite3* db = nullptr;
        QCOMPARE(sqlite3_open(path.toUtf8().constData(), &db), SQLITE_OK);
        QCOMPARE(
            sqlite3_exec(db, "INSERT INTO schema_migrations (version, applied) VALUES (99, 'x')",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
        sqlite3_close(db);
        QVERIFY(!ResultsStore::open(path, &error));
        QVERIFY2(error.contains(path) && error.contains(QStringLiteral("99")), qPrintable(error));
    }

    void notADatabase() {
        const QString path = dir_.filePath(QStringLiteral("not-a-db.sqlite"));
        writeFile(path, QByteArray("this is a manifest, not a database\n").repeated(200));
        QString error;
        QVERIFY(!ResultsStore::open(path, &error));
        QVERIFY2(error.contains(path), qPrintable(error));
        QVERIFY2(error.contains(QStringLiteral("not a database")), qPrintable(error));
    }

    // The checker's way: a damaged store is set aside once, with a notice, and a new one
    // started; the next open has nothing to say.
    void damagedStoreIsSetAsideOnce() {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("results.sqlite"));
        const QByteArray junk = QByteArray("this is a manifest, not a database\n").repeated(200);
        writeFile(path, junk);
        QString error, setAside;
        auto store = ResultsStore::open(path, &error, &setAside);
        QVERIFY2(store, qPrintable(error));
        QVERIFY2(setAside.startsWith(path +
                                     QStringLiteral(" is not a sound database; it was set "
                                                    "aside as ") +
                                     path + QStringLiteral(".damaged-")),
                 qPrintable(setAside));
        const QStringList aside =
            QDir(dir.path()).entryList({QStringLiteral("results.sqlite.damaged-*")});
        QCOMPARE(aside.size(), 1);
        QFile kept(dir.filePath(aside.front()));
        QVERIFY(kept.open(QIODevice::ReadOnly));
        QCOMPARE(kept.readAll(), junk);  // kept as it was, for a look
        QVERIFY(
            store->save(QStringLiteral("fp"), QString(), test::makeComparison(false), {}, &error));
        store.reset();
        setAside.clear();
        QVERIFY(ResultsStore::open(path, &error, &setAside));
        QVERIFY(setAside.isEmpty());
    }

    void unopenablePath() {
        const QString path = dir_.filePath(QStringLiteral("no/such/dir/results.sqlite"));
        QString error;
        QVERIFY(!ResultsStore::open(path, &error));
        QVERIFY2(error.contains(path), qPrintable(error));
    }

    void fingerprint() {
        // A small trace set of plain files: the fingerprint only looks at file identities.
        const auto makeSet = [&](const QString& name, int ranks) {
            TraceSet set;
            set.folder = dir_.filePath(name);
            QDir().mkpath(set.folder);
            set.manifest.path = set.folder + QStringLiteral("/manifest.json");
            writeFile(set.manifest.path, QByteArray("{\"format\": \"ttrace\"}"));
            for (int rank = 0; rank < ranks; ++rank) {
                const QString file = QStringLiteral("rank%1.h5").arg(rank, 5, 10, QLatin1Char('0'));
                set.manifest.ranks.push_back({rank, file, {}});
                writeFile(set.folder + QLatin1Char('/') + file, QByteArray(100 + rank, 'x'));
            }
            return set;
        };
        const TraceSet dist = makeSet(QStringLiteral("fp/dist"), 2);
        const TraceSet ref = makeSet(QStringLiteral("fp/ref"), 1);
        const TraceSet pert = makeSet(QStringLiteral("fp/pert"), 1);
        const ThresholdConfig config;
        constexpr std::int64_t kChunk = 1 << 20;

        const QString base = runFingerprint(dist, ref, &pert, config, kChunk);
        // The block size groups the double sums differently: another cache entry.
        QVERIFY(runFingerprint(dist, ref, &pert, config, 4096) != base);
        QCOMPARE(base.size(), 64);  // SHA-256, hex
        QCOMPARE(runFingerprint(dist, ref, &pert, config, kChunk), base);
        QVERIFY(runFingerprint(dist, ref, nullptr, config, kChunk) != base);
        QVERIFY(runFingerprint(ref, dist, &pert, config, kChunk) != base);

        ThresholdConfig changed = config;
        changed.safetyFactor = 16;
        QVERIFY(runFingerprint(dist, ref, &pert, changed, kChunk) != base);
        changed = config;
        changed.overrides.push_back({QStringLiteral("layers.*"), std::nullopt, 0.1, std::nullopt});
        const QString withOverride = runFingerprint(dist, ref, &pert, changed, kChunk);
        QVERIFY(withOverride != base);
        changed.overrides.back().kind = TensorKind::ParamGrad;
        QVERIFY(runFingerprint(dist, ref, &pert, changed, kChunk) != withOverride);

        // Touching a rank file (same size, same contents) changes the fingerprint.
        QFile rank(dist.folder + QStringLiteral("/rank00001.h5"));
        QVERIFY(rank.open(QIODevice::ReadWrite));
        const QDateTime mtime = rank.fileTime(QFileDevice::FileModificationTime);
        QVERIFY(rank.setFileTime(mtime.addSecs(10), QFileDevice::FileModificationTime));
        rank.close();
        const QString touched = runFingerprint(dist, ref, &pert, config, kChunk);
        QVERIFY(touched != base);

        // So does a change of size, and of the manifest.
        writeFile(dist.folder + QStringLiteral("/rank00001.h5"), QByteArray(5, 'y'));
        QVERIFY(runFingerprint(dist, ref, &pert, config, kChunk) != touched);
        const QString beforeManifest = runFingerprint(dist, ref, &pert, config, kChunk);
        QFile manifest(ref.manifest.path);
        QVERIFY(manifest.open(QIODevice::ReadWrite));
        QVERIFY(manifest.setFileTime(mtime.addSecs(-100), QFileDevice::FileModificationTime));
        manifest.close();
        QVERIFY(runFingerprint(dist, ref, &pert, config, kChunk) != beforeManifest);
    }
};

QTEST_GUILESS_MAIN(TestResultsStore)
#include "test_results_store.moc"
