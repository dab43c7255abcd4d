// The pieces of the distributed checker that need no MPI: the split of tensors over processes,
// the wire form of a process's outcomes, shares assembled into the single-process output, a
// failing worker that keeps what it finished, and the journal of finished tensors that a
// killed check resumes from. tests/test_mpi_check.py runs the real thing under mpirun.
#include <QTemporaryDir>
#include <QTest>
#include <memory>
#include <mutex>
#include <numeric>
#include <stdexcept>

#include "ComparisonBytes.h"
#include "DatabaseFile.h"
#include "TestPaths.h"
#include "compare/ComparisonJob.h"
#include "compare/TaskOutcomesCodec.h"
#include "compare/TaskPartition.h"
#include "session/DistributedComparison.h"
#include "session/SingleProcessGroup.h"
#include "session/StoredComparison.h"
#include "store/OutcomeJournal.h"
#include "store/ResultsStore.h"
#include "trace/TraceSet.h"

using namespace ttrace;
using test::comparisonBytes;

namespace {

struct Traces {
    TraceSet dist, ref, pert;
    TraceCatalog catalog, refCatalog, pertCatalog;  // of `dist`, `ref` and `pert`
};

// A real run of the example trainer (bundled sample) or a fixture of many layouts.
std::unique_ptr<Traces> openTraces(const QString& folder) {
    auto traces = std::make_unique<Traces>();
    traces->dist = openTraceSet(folder + QStringLiteral("/dist"));
    traces->ref = openTraceSet(folder + QStringLiteral("/ref"));
    traces->pert = openTraceSet(folder + QStringLiteral("/pert"));
    traces->catalog = TraceCatalog::of(traces->dist);
    traces->refCatalog = TraceCatalog::of(traces->ref);
    traces->pertCatalog = TraceCatalog::of(traces->pert);
    return traces;
}

QStringList traceFolders() {
    return {test::sourceDir() + QStringLiteral("/resources/samples/row_bias_every_rank"),
            test::fixture(QStringLiteral("combined"))};
}

std::vector<std::size_t> allTasks(const ComparisonPlan& plan) {
    std::vector<std::size_t> all(plan.tasks.size());
    std::iota(all.begin(), all.end(), std::size_t{0});
    return all;
}

}  // namespace

class TestDistributed : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void partitionCoversEveryTaskOnceAndBalances() {
        const std::vector<std::int64_t> bytes{100, 1, 50, 50, 30, 20, 0, 0, 70};
        const auto shares = partitionTasks(bytes, 3);
        QCOMPARE(shares.size(), std::size_t{3});
        std::vector<int> seen(bytes.size(), 0);
        std::int64_t largest = 0;
        for (const auto& share : shares) {
            QVERIFY(std::is_sorted(share.begin(), share.end()));
            std::int64_t load = 0;
            for (const auto task : share) {
                ++seen[task];
                load += bytes[task];
            }
            largest = std::max(largest, load);
        }
        QCOMPARE(seen, std::vector<int>(bytes.size(), 1));
        // Largest first to the least loaded: 100 | 70 | 50, then 50 -> p2, 30 -> p1, 20 -> p0
        // (all at 100: the lowest part), 1 -> p1, the empty ones (costing 1) -> p2, then p1.
        QCOMPARE(shares[0], (std::vector<std::size_t>{0, 5}));
        QCOMPARE(shares[1], (std::vector<std::size_t>{1, 4, 7, 8}));
        QCOMPARE(shares[2], (std::vector<std::size_t>{2, 3, 6}));
        QCOMPARE(largest, std::int64_t{120});
        QCOMPARE(partitionTasks(bytes, 3), shares);  // deterministic

        const auto many = partitionTasks({5, 5}, 4);
        QCOMPARE(many.size(), std::size_t{4});
        QCOMPARE(many[0], std::vector<std::size_t>{0});
        QCOMPARE(many[1], std::vector<std::size_t>{1});
        QVERIFY(many[2].empty() && many[3].empty());
    }

    void sharesAssembleToTheSingleProcessOutput_data() {
        QTest::addColumn<QString>("folder");
        QTest::addColumn<int>("processes");
        for (const QString& folder : traceFolders()) {
            for (const int processes : {2, 3, 5}) {
                QTest::addRow("%s x%d", qPrintable(folder.section(QLatin1Char('/'), -1)), processes)
                    << folder << processes;
            }
        }
    }
    void sharesAssembleToTheSingleProcessOutput() {
        QFETCH(QString, folder);
        QFETCH(int, processes);
        const auto traces = openTraces(folder);
        QVERIFY(traces->dist.usable() && traces->ref.usable() && traces->pert.usable());
        ComparisonOptions options;
        options.threads = 2;
        const ComparisonOutput single =
            compareTraceSets(traces->dist, traces->ref, &traces->pert, options);
        QVERIFY(single.complete());
        QVERIFY(!single.results.empty());

        const ComparisonPlan plan =
            planComparison(traces->catalog, traces->refCatalog, &traces->pertCatalog);
        std::vector<std::int64_t> bytes;
        for (const auto& task : plan.tasks) {
            bytes.push_back(task.bytes);
        }
        std::vector<TaskOutcome> gathered;
        QString backend;
        for (const auto& share : partitionTasks(bytes, processes)) {
            const TaskOutcomes mine = compareTasks(plan, share, options);
            QVERIFY(mine.unchecked.empty() && mine.failure.isEmpty());
            QCOMPARE(mine.finished.size(), share.size());
            // Through the wire form, as an MPI process sends it to rank 0.
            const QByteArray wire = encodeTaskOutcomes(mine);
            auto received = decodeTaskOutcomes(wire);
            QVERIFY(received);
            QCOMPARE(encodeTaskOutcomes(*received), wire);
            backend = received->backendName;
            for (auto& outcome : received->finished) {
                gathered.push_back(std::move(outcome));
            }
        }
        const ComparisonOutput merged = assembleComparison(plan, std::move(gathered), {}, backend);
        QVERIFY(merged.complete());
        QCOMPARE(merged.results.size(), single.results.size());
        QCOMPARE(comparisonBytes(merged), comparisonBytes(single));
    }

    void damagedWireFormIsRefused() {
        const auto traces = openTraces(traceFolders().front());
        const ComparisonPlan plan =
            planComparison(traces->catalog, traces->refCatalog, &traces->pertCatalog);
        TaskOutcomes outcomes = compareTasks(plan, allTasks(plan), {});
        // A recomputation mismatch crosses the wire too.
        TensorResult& recomputed = *outcomes.finished.front().result;
        recomputed.recomputationMismatches = {{recomputed.shards[0].ranges, 1, 3, 64, true}};
        const QByteArray wire = encodeTaskOutcomes(outcomes);
        const auto back = decodeTaskOutcomes(wire);
        QVERIFY(back);
        QCOMPARE(encodeTaskOutcomes(*back), wire);
        const auto& mismatches = back->finished.front().result->recomputationMismatches;
        QCOMPARE(mismatches.size(), std::size_t{1});
        QCOMPARE(mismatches[0].rank, 1);
        QCOMPARE(mismatches[0].differingElements, std::int64_t{3});
        QVERIFY(mismatches[0].scalesDiffer);
        QVERIFY(!decodeTaskOutcomes(wire.left(wire.size() / 2)));
        QVERIFY(!decodeTaskOutcomes(wire + QByteArray(1, 'x')));
        QVERIFY(!decodeTaskOutcomes(QByteArray("not a ttrace payload")));
        QVERIFY(!decodeTaskOutcomes(QByteArray()));
    }

    void failingWorkerKeepsFinishedTensors() {
        const auto traces = openTraces(traceFolders().front());
        const ComparisonOutput single =
            compareTraceSets(traces->dist, traces->ref, &traces->pert, {});
        ComparisonOptions options;
        options.threads = 1;  // one worker: exactly the tensors before the throw are finished
        int finished = 0;
        options.tensorFinished = [&finished](TaskOutcome&&) {
            if (++finished == 3) {
                throw std::runtime_error("worker lost");
            }
        };
        const ComparisonOutput output =
            compareTraceSets(traces->dist, traces->ref, &traces->pert, options);
        QVERIFY(!output.complete());
        // The third tensor was finished when its hook threw: three kept, the rest unchecked.
        QCOMPARE(output.results.size(), std::size_t{3});
        QCOMPARE(output.results.size() + output.unchecked.size(), single.results.size());
        int notChecked = 0;
        for (const auto& d : output.diagnostics) {
            if (d.message.contains(QStringLiteral("not checked")) &&
                d.message.contains(QStringLiteral("worker lost"))) {
                QCOMPARE(d.severity, Severity::Error);
                QVERIFY(std::find(output.unchecked.begin(), output.unchecked.end(), d.tensor) !=
                        output.unchecked.end());
                ++notChecked;
            }
        }
        QCOMPARE(static_cast<std::size_t>(notChecked), output.unchecked.size());
        // What was kept equals the same tensors of the complete run.
        for (const auto& kept : output.results) {
            const auto same =
                std::find_if(single.results.begin(), single.results.end(),
                             [&](const TensorResult& r) { return r.key == kept.key; });
            QVERIFY(same != single.results.end());
            QCOMPARE(kept.normalizedError, same->normalizedError);
            QCOMPARE(kept.metrics.relativeError, same->metrics.relativeError);
        }
    }

    void journalKeepsIntactRecordsAndDropsDamagedOnes() {
        const auto traces = openTraces(traceFolders().front());
        const ComparisonPlan plan =
            planComparison(traces->catalog, traces->refCatalog, &traces->pertCatalog);
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("7-0.outcomes"));
        QString error;
        auto journal = OutcomeJournal::create(path, QStringLiteral("fp"), &error);
        QVERIFY2(journal, qPrintable(error));
        std::mutex mutex;
        TaskOutcomes all;
        ComparisonOptions options;
        options.tensorFinished = [&](TaskOutcome&& outcome) {
            QVERIFY(journal->append(outcome));
            const std::lock_guard lock(mutex);
            all.finished.push_back(std::move(outcome));
        };
        all.backendName = compareTasks(plan, allTasks(plan), options).backendName;
        QVERIFY(journal->error().isEmpty());
        journal.reset();
        const std::size_t count = all.finished.size();
        QVERIFY(count >= 3);
        const auto byTask = [](const TaskOutcome& a, const TaskOutcome& b) {
            return a.task < b.task;
        };
        std::sort(all.finished.begin(), all.finished.end(), byTask);
        const auto readBack = [&dir](const QString& fingerprint, std::vector<TaskOutcome>* into) {
            return forEachJournaledOutcome(dir.path(), fingerprint, [into](TaskOutcome&& outcome) {
                into->push_back(std::move(outcome));
            });
        };

        // Read back bit for bit (as the wire form shows), whatever order the threads wrote in.
        TaskOutcomes back;
        auto read = readBack(QStringLiteral("fp"), &back.finished);
        QCOMPARE(read.files, 1);
        QCOMPARE(read.damagedFiles, 0);
        std::sort(back.finished.begin(), back.finished.end(), byTask);
        back.backendName = all.backendName;
        QCOMPARE(encodeTaskOutcomes(back), encodeTaskOutcomes(all));
        // Another check's journal is never reused.
        std::vector<TaskOutcome> other;
        QCOMPARE(readBack(QStringLiteral("other"), &other).files, 0);
        QVERIFY(other.empty());

        // A record cut off by a kill is dropped, the ones before it kept.
        QFile file(path);
        QVERIFY(file.open(QIODevice::ReadWrite));
        const QByteArray whole = file.readAll();
        QVERIFY(file.resize(whole.size() - 3));
        file.close();
        std::vector<TaskOutcome> cut;
        read = readBack(QStringLiteral("fp"), &cut);
        QCOMPARE(cut.size(), count - 1);
        QCOMPARE(read.damagedFiles, 1);

        // A damaged byte fails its record's checksum: it and everything after it are dropped.
        QByteArray damaged = whole;
        const qsizetype firstPayload = whole.indexOf(QByteArrayView("fp")) + 2 + 8 + 20;
        damaged[firstPayload] = static_cast<char>(damaged[firstPayload] ^ 0x40);
        QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Truncate));
        file.write(damaged);
        file.close();
        std::vector<TaskOutcome> none;
        read = readBack(QStringLiteral("fp"), &none);
        QCOMPARE(none.size(), std::size_t{0});
        QCOMPARE(read.damagedFiles, 1);
    }

    // A check that died after some tensors resumes from its journal (with a torn last record)
    // and gives exactly the output of an uninterrupted run.
    void resumedCheckEqualsUninterruptedOne() {
        const auto traces = openTraces(traceFolders().back());
        const ComparisonPlan plan =
            planComparison(traces->catalog, traces->refCatalog, &traces->pertCatalog);
        const ComparisonOutput single =
            compareTraceSets(traces->dist, traces->ref, &traces->pert, {});
        const TaskOutcomes all = compareTasks(plan, allTasks(plan), {});
        QVERIFY(all.finished.size() >= 4);

        QTemporaryDir cache;
        OutcomePersistence persistence;
        persistence.fingerprint = QStringLiteral("fp");
        persistence.folder = outcomeJournalFolder(cache.path(), persistence.fingerprint);
        const QString path = persistence.folder + QStringLiteral("/1-0.outcomes");
        QString error;
        auto journal = OutcomeJournal::create(path, persistence.fingerprint, &error);
        QVERIFY2(journal, qPrintable(error));
        const std::size_t kept = all.finished.size() / 2;
        for (std::size_t i = 0; i <= kept; ++i) {
            journal->append(all.finished[i]);
        }
        journal.reset();
        QFile file(path);
        QVERIFY(file.resize(file.size() - 5));  // the last record torn

        std::size_t reused = 0, total = 0;
        persistence.resuming = [&](std::size_t r, std::size_t t) {
            reused = r;
            total = t;
        };
        SingleProcessGroup alone;
        std::vector<TaskOutcome> outcomes;
        std::mutex mutex;
        const ComparisonEnd end =
            compareAcrossProcesses(&plan, {}, {}, persistence, alone, [&](TaskOutcome&& outcome) {
                const std::lock_guard lock(mutex);
                outcomes.push_back(std::move(outcome));
            });
        QCOMPARE(reused, kept);
        QCOMPARE(total, plan.tasks.size());
        QCOMPARE(outcomes.size(), plan.tasks.size());  // each task once
        const ComparisonOutput resumed =
            assembleComparison(plan, std::move(outcomes), end.unchecked, end.backendName);
        QVERIFY(resumed.complete());
        QCOMPARE(comparisonBytes(resumed), comparisonBytes(single));
    }

    // Rank 0 writes results into the results store as they finish and reads them back: the
    // same output as a comparison held in memory. When the store refuses a write partway (a
    // full disk), the results it was given come back from what it committed and what it rolled
    // back, and from the journal: nothing is lost, with a journal or without (the same full
    // disk refuses it).
    void storedComparisonEqualsInMemoryOne_data() {
        QTest::addColumn<bool>("storeFails");
        QTest::addColumn<bool>("journal");
        QTest::newRow("stored") << false << true;
        QTest::newRow("store fails partway") << true << true;
        QTest::newRow("store fails partway, no journal") << true << false;
    }
    void storedComparisonEqualsInMemoryOne() {
        QFETCH(bool, storeFails);
        QFETCH(bool, journal);
        const auto traces = openTraces(traceFolders().back());
        const ComparisonPlan plan =
            planComparison(traces->catalog, traces->refCatalog, &traces->pertCatalog);
        const ComparisonOutput single =
            compareTraceSets(traces->dist, traces->ref, &traces->pert, {});
        QVERIFY(single.results.size() >= 10);

        QTemporaryDir cache;
        QString error;
        const QString storePath = cache.filePath(QStringLiteral("results.sqlite"));
        auto store = ResultsStore::open(storePath, &error);
        QVERIFY2(store, qPrintable(error));
        if (storeFails) {
            QVERIFY(test::execOnFile(storePath,
                                     "CREATE TRIGGER refuse BEFORE INSERT ON shards WHEN "
                                     "NEW.tensor_idx = 5 BEGIN SELECT RAISE(ABORT, 'disk is "
                                     "full'); END;"));
        }
        OutcomePersistence persistence;
        persistence.fingerprint = QStringLiteral("fp");
        if (journal) {
            persistence.folder = outcomeJournalFolder(cache.path(), persistence.fingerprint);
        }
        ResultsDestination destination;
        destination.store = store.get();
        destination.fingerprint = persistence.fingerprint;
        destination.loading = DetailLoading::WithResults;
        ComparisonOptions options;
        options.threads = 2;
        SingleProcessGroup alone;
        const ComparedRun run = compareIntoStore(plan, options, persistence, alone, destination);
        QVERIFY(!run.cancelled);
        QVERIFY(run.output.complete());
        QCOMPARE(comparisonBytes(run.output), comparisonBytes(single));
        QCOMPARE(run.warnings.size(), storeFails ? std::size_t{1} : std::size_t{0});
        QCOMPARE(run.stored, !storeFails);
        if (storeFails) {
            QVERIFY(run.warnings.front().message.contains(QStringLiteral("disk is full")));
            QVERIFY(!store->load(persistence.fingerprint));  // never reused
        } else {
            const auto stored = store->load(persistence.fingerprint);
            QVERIFY(stored);
            QCOMPARE(comparisonBytes(*stored), comparisonBytes(single));
        }
    }

    void incompleteOrCancelledRunIsNeverReused() {
        QTemporaryDir dir;
        QString error;
        auto store = ResultsStore::open(dir.filePath(QStringLiteral("results.sqlite")), &error);
        QVERIFY2(store, qPrintable(error));
        ComparisonOutput output;
        output.backendName = QStringLiteral("CPU");
        output.unchecked.push_back(QStringLiteral("layers.0.fc forward_output[0] it0 mb0"));
        QVERIFY2(store->save(QStringLiteral("fp"), QStringLiteral("run"), output, {}, &error),
                 qPrintable(error));
        QVERIFY(!store->load(QStringLiteral("fp")));
        output.unchecked.clear();
        output.cancelled = true;
        QVERIFY2(store->save(QStringLiteral("fp"), QStringLiteral("run"), output, {}, &error),
                 qPrintable(error));
        QVERIFY(!store->load(QStringLiteral("fp")));
        output.cancelled = false;
        QVERIFY2(store->save(QStringLiteral("fp"), QStringLiteral("run"), output, {}, &error),
                 qPrintable(error));
        QVERIFY(store->load(QStringLiteral("fp")));
    }
};

QTEST_GUILESS_MAIN(TestDistributed)
#include "test_distributed.moc"
