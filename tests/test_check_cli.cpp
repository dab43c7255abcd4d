// End-to-end tests of the headless checker: the real ttrace-check binary on real trace
// folders, as a CI job would run it.
#include <QDateTime>
#include <QDirIterator>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QProcessEnvironment>
#include <QTemporaryDir>
#include <QtTest>

#include "BundledSamples.h"
#include "ComparableReport.h"
#include "FolderCopy.h"
#include "TestPaths.h"

using namespace ttrace::test;

namespace {

struct Run {
    int exitCode = -1;
    QString out;
    QString err;
};

Run runCheck(const QStringList& args, const QString& cacheDir,
             const QProcessEnvironment& environment = QProcessEnvironment::systemEnvironment()) {
    QProcess process;
    process.setProcessEnvironment(environment);
    process.setProgram(qEnvironmentVariable("TTRACE_CHECK"));
    process.setArguments(QStringList{QStringLiteral("--cache-dir"), cacheDir} + args);
    process.start();
    Run run;
    if (!process.waitForFinished(300000)) {
        process.kill();
        return run;
    }
    run.exitCode = process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -2;
    run.out = QString::fromUtf8(process.readAllStandardOutput());
    run.err = QString::fromUtf8(process.readAllStandardError());
    return run;
}

QStringList caseArgs(const QString& name) {
    return {fixture(name, QStringLiteral("dist")), fixture(name, QStringLiteral("ref")),
            QStringLiteral("--perturbed"), fixture(name, QStringLiteral("pert"))};
}

// Name, size and modification time of every file below `folder`.
QStringList snapshot(const QString& folder) {
    QStringList entries;
    QDirIterator it(folder, QDir::Files | QDir::Dirs | QDir::NoDotAndDotDot | QDir::Hidden,
                    QDirIterator::Subdirectories);
    while (it.hasNext()) {
        const QFileInfo info(it.next());
        entries << info.filePath() + QLatin1Char(' ') + QString::number(info.size()) +
                       QLatin1Char(' ') + QString::number(info.lastModified().toMSecsSinceEpoch());
    }
    entries.sort();
    return entries;
}

}  // namespace

class TestCheckCli : public QObject {
    Q_OBJECT

private:
    QTemporaryDir cache_;

private Q_SLOTS:
    void initTestCase() {
        QVERIFY2(QFileInfo(qEnvironmentVariable("TTRACE_CHECK")).isExecutable(),
                 "TTRACE_CHECK must point at the built ttrace-check");
        QVERIFY2(QFileInfo::exists(fixture(QStringLiteral("combined"), QStringLiteral("dist"))),
                 "fixtures missing: run the make_fixtures test first");
        QVERIFY(cache_.isValid());
    }

    void cleanRunHasNoBug() {
        const Run run = runCheck(caseArgs(QStringLiteral("combined")), cache_.path());
        QCOMPARE(run.exitCode, 0);
        QVERIFY2(run.out.startsWith(QStringLiteral("ttrace-check: no bug: 88 of 88 reference "
                                                   "tensors compared, all within tolerance\n")),
                 qPrintable(run.out));
    }

    // Two checks of the same traces sharing a cache: the second waits for the first (which
    // holds its run's lock a while, test hook) and shows its stored results; neither report
    // loses anything, and both say the same.
    void concurrentChecksShareTheCache() {
        QTemporaryDir work;
        const QString cache = work.filePath(QStringLiteral("cache"));
        const QStringList args = caseArgs(QStringLiteral("bug_shard"));
        QProcess first;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("TTRACE_TEST_HOLD_RUN_LOCK_MS"), QStringLiteral("3000"));
        first.setProcessEnvironment(env);
        first.setProgram(qEnvironmentVariable("TTRACE_CHECK"));
        first.setArguments(QStringList{QStringLiteral("--cache-dir"), cache,
                                       QStringLiteral("--json"),
                                       work.filePath(QStringLiteral("first.json"))} +
                           args);
        first.start();
        // The second starts once the first holds the lock.
        QTRY_VERIFY_WITH_TIMEOUT(
            !QDir(cache + QStringLiteral("/locks")).entryList({QStringLiteral("*.lock")}).isEmpty(),
            60000);
        const Run second = runCheck(
            QStringList{QStringLiteral("--json"), work.filePath(QStringLiteral("second.json"))} +
                args,
            cache);
        QVERIFY(first.waitForFinished(300000));
        QCOMPARE(first.exitCode(), 1);
        QCOMPARE(second.exitCode, 1);
        QVERIFY2(second.err.contains(QStringLiteral("waited ")) &&
                     second.err.contains(QStringLiteral("for another check of the same traces")),
                 qPrintable(second.err));
        const auto tensors = [&](const char* name) {
            return ttrace::test::comparableReport(work.filePath(QString::fromLatin1(name)))
                .value(QStringLiteral("tensors"))
                .toArray();
        };
        QVERIFY(!tensors("first.json").isEmpty());
        QCOMPARE(tensors("first.json"), tensors("second.json"));
        for (const auto& tensor : tensors("first.json")) {
            QVERIFY(tensor.toObject().value(QStringLiteral("rank_seq")).toArray().size() > 0);
        }
    }

    // Damaged cache databases are set aside and rebuilt once, with one warning each, not
    // warned about on every later run.
    void damagedCacheIsRebuiltOnce() {
        QTemporaryDir cache;
        for (const char* name : {"results.sqlite", "index.sqlite"}) {
            QFile junk(cache.filePath(QString::fromLatin1(name)));
            QVERIFY(junk.open(QIODevice::WriteOnly));
            junk.write(QByteArray(8192, 'x'));
        }
        const Run first = runCheck(caseArgs(QStringLiteral("combined")), cache.path());
        QCOMPARE(first.exitCode, 0);
        QCOMPARE(first.err.count(QStringLiteral("is not a sound database; it was set aside")), 2);
        const Run second = runCheck(caseArgs(QStringLiteral("combined")), cache.path());
        QCOMPARE(second.exitCode, 0);
        QVERIFY2(!second.err.contains(QStringLiteral("sound database")), qPrintable(second.err));
        QVERIFY2(second.out.contains(QStringLiteral("results read from the cache")),
                 qPrintable(second.out));
    }

    // A pipeline stage that captured nothing: no tensor of it is faulty, but the check says
    // what it did not see, with its own exit code, and never a plain "no bug"; the second
    // time from the results store, the same.
    void missingStageIsNeverANoBug() {
        for (const char* time : {"first", "stored"}) {
            const Run run = runCheck({fixture(QStringLiteral("bad/stage_missing")),
                                      fixture(QStringLiteral("combined"), QStringLiteral("ref")),
                                      QStringLiteral("--perturbed"),
                                      fixture(QStringLiteral("combined"), QStringLiteral("pert"))},
                                     cache_.path());
            QVERIFY2(run.exitCode == 4, time);
            QVERIFY2(run.out.startsWith(QStringLiteral(
                         "ttrace-check: no bug in what was compared: 44 of 88 reference tensors "
                         "compared; 44 not captured\n")),
                     qPrintable(run.out));
            QVERIFY2(run.err.contains(
                         QStringLiteral(
                             "warning: %1: layer 1: none of its 44 reference tensors is in the "
                             "distributed run: a layer that never ran (a pipeline stage?) or that "
                             "the capture left out\n")
                             .arg(fixture(QStringLiteral("bad/stage_missing")))),
                     qPrintable(run.err));
            QVERIFY2(!run.out.contains(QStringLiteral("no bug:")), qPrintable(run.out));
        }
    }

    void buggyShardIsLocalized() {
        const Run run = runCheck(caseArgs(QStringLiteral("bug_shard")), cache_.path());
        QCOMPARE(run.exitCode, 1);
        QVERIFY2(run.out.contains(
                     QStringLiteral("first faulty tensor: layers.1.fc1 forward_output[0] it0 mb1")),
                 qPrintable(run.out));
        QVERIFY2(run.out.contains(QStringLiteral("root-cause module:   layers.1.fc1 ")),
                 qPrintable(run.out));
        QVERIFY2(run.out.contains(QStringLiteral("faulty shard:        rank 5,")),
                 qPrintable(run.out));
    }

    void divergingReplicasAreABug() {
        const Run run = runCheck(caseArgs(QStringLiteral("bug_replica")), cache_.path());
        QCOMPARE(run.exitCode, 1);
        QVERIFY2(run.out.contains(QStringLiteral("layers.0.mlp.weight param_grad")),
                 qPrintable(run.out));
    }

    void reportsAreWrittenInEveryFormat() {
        QTemporaryDir out;
        const QString json = out.filePath(QStringLiteral("r.json"));
        const QString md = out.filePath(QStringLiteral("r.md"));
        const QString html = out.filePath(QStringLiteral("r.html"));
        const Run run =
            runCheck(caseArgs(QStringLiteral("bug_shard")) +
                         QStringList{QStringLiteral("--json"), json, QStringLiteral("--md"), md,
                                     QStringLiteral("--html"), html},
                     cache_.path());
        QCOMPARE(run.exitCode, 1);
        QFile jsonFile(json);
        QVERIFY(jsonFile.open(QIODevice::ReadOnly));
        QJsonParseError error;
        const auto doc = QJsonDocument::fromJson(jsonFile.readAll(), &error);
        QCOMPARE(error.error, QJsonParseError::NoError);
        QVERIFY(doc.isObject());
        QVERIFY(doc.toJson().contains("layers.1.fc1"));
        QFile mdFile(md);
        QVERIFY(mdFile.open(QIODevice::ReadOnly));
        QVERIFY(mdFile.readAll().contains("layers.1.fc1"));
        QFile htmlFile(html);
        QVERIFY(htmlFile.open(QIODevice::ReadOnly));
        const QByteArray page = htmlFile.readAll();
        QVERIFY(page.contains("<svg"));
        QVERIFY(page.contains("layers.1.fc1"));
    }

    void secondCheckReusesStoredResults() {
        QTemporaryDir cache;
        const Run first = runCheck(caseArgs(QStringLiteral("bug_shard")), cache.path());
        const Run second = runCheck(caseArgs(QStringLiteral("bug_shard")), cache.path());
        QCOMPARE(first.exitCode, 1);
        QCOMPARE(second.exitCode, 1);
        QVERIFY(!first.out.contains(QStringLiteral("results read from the cache")));
        QVERIFY2(second.out.contains(QStringLiteral("results read from the cache")),
                 qPrintable(second.out));
        // Same verdict and localization, whichever way the results were obtained.
        const auto firstLines = first.out.split(QLatin1Char('\n')).mid(0, 4);
        const auto secondLines = second.out.split(QLatin1Char('\n')).mid(0, 4);
        QCOMPARE(secondLines, firstLines);
    }

    // A warning derived from every result (a tensor computed in another dtype than the
    // reference's) is said whether the results went through the store as they came, were
    // read back from it by a second check, or were never stored.
    void runWarningsSurviveTheResultsStore() {
        QTemporaryDir cache;
        const QStringList args{fixture(QStringLiteral("tp_column"), QStringLiteral("dist")),
                               fixture(QStringLiteral("bad/ref_dtype"))};
        const QString warning = QStringLiteral(
            "1 tensor was computed in fp32 in the distributed run but in bf16 in the reference "
            "(layers.0.fc1 forward_output[0] it0 mb0)");
        const Run stored = runCheck(args, cache.path());
        const Run readBack = runCheck(args, cache.path());
        const Run unstored =
            runCheck(args + QStringList{QStringLiteral("--no-cache")}, cache.path());
        QVERIFY2(readBack.out.contains(QStringLiteral("results read from the cache")),
                 qPrintable(readBack.out));
        for (const Run* run : {&stored, &readBack, &unstored}) {
            QVERIFY2(run->err.contains(warning), qPrintable(run->err));
        }
    }

    // A stored run of unchanged traces is shown from the results store alone: the traces are
    // not indexed again (the index cache, deleted, stays absent) and the report is the same,
    // diagnostics found while indexing included. An unlisted rank file is part of the run:
    // touching it makes the next check open and compare again.
    void storedRunIsShownWithoutIndexing() {
        QTemporaryDir traces;
        const QString dist = traces.filePath(QStringLiteral("dist"));
        QVERIFY(copyFolder(fixture(QStringLiteral("bug_shard"), QStringLiteral("dist")), dist));
        const QString unlisted = QDir(dist).filePath(QStringLiteral("rank00099.h5"));
        QVERIFY(QFile::copy(QDir(dist).filePath(QStringLiteral("rank00000.h5")), unlisted));
        const QStringList args{dist, fixture(QStringLiteral("bug_shard"), QStringLiteral("ref")),
                               QStringLiteral("--perturbed"),
                               fixture(QStringLiteral("bug_shard"), QStringLiteral("pert")),
                               QStringLiteral("--json")};
        QTemporaryDir cache;
        const QString index = QDir(cache.path()).filePath(QStringLiteral("index.sqlite"));
        const QString firstJson = traces.filePath(QStringLiteral("first.json"));
        const Run first = runCheck(args + QStringList{firstJson}, cache.path());
        QCOMPARE(first.exitCode, 1);
        QVERIFY2(first.err.contains(QStringLiteral("rank00099.h5: is not listed")),
                 qPrintable(first.err));
        QVERIFY(QFile::exists(index));
        for (const char* suffix : {"", "-wal", "-shm"}) {
            QFile::remove(index + QLatin1String(suffix));
        }

        const QString secondJson = traces.filePath(QStringLiteral("second.json"));
        const Run second = runCheck(args + QStringList{secondJson}, cache.path());
        QCOMPARE(second.exitCode, 1);
        QVERIFY2(second.out.contains(QStringLiteral("results read from the cache")),
                 qPrintable(second.out));
        QVERIFY2(!QFile::exists(index), "the stored run was shown after indexing the traces");
        QCOMPARE(second.err, first.err);
        const QJsonObject firstReport = comparableReport(firstJson);
        QVERIFY(firstReport.contains(QStringLiteral("runs")));
        QVERIFY(comparableReport(secondJson) == firstReport);

        QFile touched(unlisted);
        QVERIFY(touched.open(QIODevice::ReadWrite));
        QVERIFY(touched.setFileTime(QDateTime::currentDateTimeUtc().addSecs(60),
                                    QFileDevice::FileModificationTime));
        touched.close();
        const Run third = runCheck(args + QStringList{secondJson}, cache.path());
        QCOMPARE(third.exitCode, 1);
        QVERIFY2(!third.out.contains(QStringLiteral("results read from the cache")),
                 qPrintable(third.out));
        QVERIFY(QFile::exists(index));
    }

    void traceFoldersAreNeverWritten() {
        const QString root = fixture(QStringLiteral("bug_shard"));
        const QStringList before = snapshot(root);
        QTemporaryDir cache;
        QCOMPARE(runCheck(caseArgs(QStringLiteral("bug_shard")), cache.path()).exitCode, 1);
        QCOMPARE(snapshot(root), before);
    }

    void badInputIsReported_data() {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("mentions");
        QTest::newRow("missing rank") << "missing_rank"
                                      << "rank00001.h5";
        QTest::newRow("truncated file") << "truncated"
                                        << "rank00001.h5";
        QTest::newRow("corrupt file") << "corrupt"
                                      << "rank00001.h5";
        QTest::newRow("newer format") << "newer_version"
                                      << "2.0";
        QTest::newRow("manifest syntax") << "manifest_syntax"
                                         << "manifest.json";
        QTest::newRow("no manifest") << "no_manifest"
                                     << "manifest.json";
        QTest::newRow("gap") << "gap"
                             << "layers.0.fc1";
        QTest::newRow("overlap") << "overlap"
                                 << "layers.0.fc1.weight";
        QTest::newRow("absurd world size") << "huge_world"
                                           << "world_size";
    }

    void badInputIsReported() {
        QFETCH(QString, name);
        QFETCH(QString, mentions);
        const Run run =
            runCheck({fixture(QStringLiteral("bad/") + name), fixture(QStringLiteral("bad/ref"))},
                     cache_.path());
        QCOMPARE(run.exitCode, 2);
        QVERIFY2(run.err.contains(QStringLiteral("error: ")), qPrintable(run.err));
        QVERIFY2(run.err.contains(mentions), qPrintable(run.err));
    }

    // A rank file holding a tensor twice (a forward recomputed under activation checkpointing
    // and captured again), in the distributed run or the reference: one error naming the file,
    // both datasets, the rank and the tensor; never taken for a replica. The reference's tensor
    // counts as not comparable, not as a tensor the reference lacks.
    void tensorTwiceOnOneRankIsBadInput_data() {
        QTest::addColumn<QString>("dist");
        QTest::addColumn<QString>("ref");
        QTest::newRow("distributed")
            << fixture(QStringLiteral("bad/duplicate")) << fixture(QStringLiteral("bad/ref"));
        QTest::newRow("reference") << fixture(QStringLiteral("tp_column"), QStringLiteral("dist"))
                                   << fixture(QStringLiteral("bad/ref_duplicate"));
    }
    void tensorTwiceOnOneRankIsBadInput() {
        QFETCH(QString, dist);
        QFETCH(QString, ref);
        const Run run = runCheck({dist, ref}, cache_.path());
        QCOMPARE(run.exitCode, 2);
        const QString twice = (QTest::currentDataTag() == QByteArray("reference") ? ref : dist) +
                              QStringLiteral(
                                  "/rank00000.h5:/tensors/000006: tensor layers.0.fc1 "
                                  "forward_output[0] it0 mb0: rank 0 holds this tensor twice "
                                  "(datasets /tensors/000002 and /tensors/000006): each rank "
                                  "writes a tensor once; was a forward recomputed under "
                                  "activation checkpointing captured again?\n");
        QVERIFY2(run.err.contains(QStringLiteral("error: ") + twice), qPrintable(run.err));
        QCOMPARE(run.err.count(QStringLiteral("error: ")), 1);
        QVERIFY2(run.out.startsWith(QStringLiteral("ttrace-check: no bug in what was compared: 5 "
                                                   "of 6 reference tensors compared; 1 not "
                                                   "comparable\n")),
                 qPrintable(run.out));
    }

    // Rank files that crash, abort or hang libhdf5 (tests/data/hdf5_crashers.json): the checker
    // survives each, says what HDF5 was doing in which file and dataset, and checks the rest.
    void filesThatCrashHdf5AreDiagnosed_data() {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("rankFile");
        QTest::addColumn<QStringList>("says");
        QTest::addColumn<int>("compared");
        // A segmentation fault in a release build (opening dataset /tensors/000165, say); under
        // AddressSanitizer the damage is often caught earlier, in libhdf5's memcpy, and the
        // worker aborts: the signal and the step vary.
        const QString crashed = QStringLiteral("is corrupt: the HDF5 library crashed (signal ");
        QTest::newRow("segfault reading an attribute")
            << "segv_ranges"
            << "rank00002.h5"
            << QStringList{crashed, QStringLiteral(") while reading the attributes of dataset "
                                                   "/tensors/000100; none of its tensors is read")}
            << 244;
        QTest::newRow("segfault opening a dataset")
            << "segv_dataset_open"
            << "rank00003.h5" << QStringList{crashed, QStringLiteral(") while ")} << 244;
        // Heap corruption is found where the next allocation or free trips on it, which
        // depends on the process's memory layout: only the crash is certain.
        QTest::newRow("heap corrupted") << "heap_corrupted"
                                        << "rank00003.h5" << QStringList{crashed} << 244;
        QTest::newRow("abort closing the file") << "abrt_close"
                                                << "rank00000.h5" << QStringList{crashed} << 240;
        // Damaged attributes that damage libhdf5's memory: an abort closing an attribute in
        // some builds, attribute errors only in others (the heap's layout decides). Either
        // way the worker is not used again, so no later, sound file is blamed; how much of
        // rank00000 is read varies (-1).
        QTest::newRow("attributes that damage libhdf5's memory")
            << "abrt_attribute_close"
            << "rank00000.h5" << QStringList{} << -1;
        QTest::newRow("hang in the global heap")
            << "hang_global_heap"
            << "rank00001.h5"
            << QStringList{QStringLiteral(
                   "cannot be read (a corrupt file, or a file system that does not answer): the "
                   "HDF5 library stopped responding for 2 s while reading the attributes of "
                   "dataset /tensors/000094")}
            << 240;
        // Once an empty file to the indexer, which ignored the failed listing.
        QTest::newRow("a damaged list of datasets")
            << "listing_damaged"
            << "rank00003.h5"
            << QStringList{QStringLiteral("its list of the datasets in /tensors is damaged after 0 "
                                          "of them: the datasets past the damage are not "
                                          "read\n  libhdf5: ")}
            << 244;
        // Once an abort of the indexer itself; now an attribute error like any other.
        QTest::newRow("a shape of 2^62 integers")
            << "huge_shape"
            << "rank00001.h5"
            << QStringList{QStringLiteral(
                   "/tensors/000028: tensor layers.0.mlp.fc1 forward_output[0] it0 mb0: attribute "
                   "'global_shape' holds 4611686018427387907 integers, more than any shape (at "
                   "most 4096 are read)")}
            << 355;
    }

    void filesThatCrashHdf5AreDiagnosed() {
        QFETCH(QString, name);
        QFETCH(QString, rankFile);
        QFETCH(QStringList, says);
        QFETCH(int, compared);
        QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
        environment.insert(QStringLiteral("TTRACE_HDF5_STALL_SECONDS"), QStringLiteral("2"));
        const QString dist = fixture(QStringLiteral("bad/hdf5_") + name);
        const QString ref = sourceDir() + QStringLiteral("/resources/samples/clean/ref");
        QTemporaryDir cache;
        const Run run = runCheck({dist, ref}, cache.path(), environment);
        QCOMPARE(run.exitCode, 2);
        const QString line = QStringLiteral("error: ") + dist + QLatin1Char('/') + rankFile;
        QVERIFY2(run.err.contains(line), qPrintable(run.err));
        for (const auto& words : says) {
            QVERIFY2(run.err.contains(words), qPrintable(run.err));
        }
        // No other rank file is said to be damaged (its pieces may still leave gaps).
        const QRegularExpression blamed(QStringLiteral("^error: .*/(rank\\d+\\.h5): "),
                                        QRegularExpression::MultilineOption);
        for (auto it = blamed.globalMatch(run.err); it.hasNext();) {
            QCOMPARE(it.next().captured(1), rankFile);
        }
        const QRegularExpression verdict(QStringLiteral(
            "no bug in what was compared: (\\d+) of 356 reference tensors compared"));
        const auto found = verdict.match(run.out);
        QVERIFY2(found.hasMatch(), qPrintable(run.out));
        if (compared >= 0) {
            QCOMPARE(found.captured(1).toInt(), compared);
        } else {  // at least what is left without that rank file
            QVERIFY2(found.captured(1).toInt() >= 240, qPrintable(run.out));
        }
    }

    // A limit of the HDF5 workers that is no number is said, and the default used.
    void badWorkerLimitsAreSaid() {
        QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
        environment.insert(QStringLiteral("TTRACE_HDF5_MEMORY_MB"), QStringLiteral("1e99"));
        QTemporaryDir cache;
        const Run run = runCheck(caseArgs(QStringLiteral("tp_column")), cache.path(), environment);
        QCOMPARE(run.exitCode, 0);
        QVERIFY2(run.err.contains(QStringLiteral(
                     "ttrace-check: warning: TTRACE_HDF5_MEMORY_MB is '1e99', not a whole number "
                     "from 64 to 1073741824: 4096 is used")),
                 qPrintable(run.err));
    }

    // SIGTERM (and Ctrl-C) stops a check at once, also while its HDF5 worker is stuck in a
    // rank file that makes libhdf5 loop forever (20 s before the stall limit would).
    void terminateStopsAWorkerStuckInHdf5() {
        QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
        environment.remove(QStringLiteral("TTRACE_HDF5_STALL_SECONDS"));
        QTemporaryDir cache;
        QProcess process;
        process.setProcessEnvironment(environment);
        process.start(qEnvironmentVariable("TTRACE_CHECK"),
                      {QStringLiteral("--cache-dir"), cache.path(),
                       fixture(QStringLiteral("bad/hdf5_hang_global_heap")),
                       sourceDir() + QStringLiteral("/resources/samples/clean/ref")});
        QVERIFY(process.waitForStarted());
        QTest::qWait(1500);  // indexing is stuck in rank00001.h5 by now
        QCOMPARE(process.state(), QProcess::Running);
        QElapsedTimer stopping;
        stopping.start();
        process.terminate();
        QVERIFY(process.waitForFinished(10000));
        QVERIFY2(stopping.elapsed() < 1000, qPrintable(QString::number(stopping.elapsed())));
        QCOMPARE(process.exitStatus(), QProcess::NormalExit);
        QCOMPARE(process.exitCode(), 130);
    }

    void nonFiniteValuesAreABug() {
        const Run run =
            runCheck({fixture(QStringLiteral("bad/nan")), fixture(QStringLiteral("bad/ref"))},
                     cache_.path());
        QCOMPARE(run.exitCode, 1);
        QVERIFY2(run.out.contains(QStringLiteral("layers.0.fc1 forward_output")),
                 qPrintable(run.out));
    }

    // Equal NaN counts at different places are not equal tensors.
    void movedNanIsABug() {
        const Run run = runCheck(
            {fixture(QStringLiteral("bad/nan_moved")), fixture(QStringLiteral("bad/ref_nan"))},
            cache_.path());
        QCOMPARE(run.exitCode, 1);
        QVERIFY2(run.out.contains(
                     QStringLiteral("first faulty tensor: layers.0.fc1 forward_output[0] it0 mb0")),
                 qPrintable(run.out));
    }

    // Neither the cache nor a report may land inside a trace folder.
    void nothingIsWrittenIntoTraceFolders() {
        const QString dist = fixture(QStringLiteral("combined"), QStringLiteral("dist"));
        const QString ref = fixture(QStringLiteral("combined"), QStringLiteral("ref"));
        const QStringList before = snapshot(fixture(QStringLiteral("combined")));
        const Run cacheInside = runCheck({dist, ref}, dist + QStringLiteral("/cache"));
        QCOMPARE(cacheInside.exitCode, 2);
        QVERIFY2(cacheInside.err.contains(
                     QStringLiteral("error: %1/cache: the cache directory (from --cache-dir) is "
                                    "inside the trace folder %1; trace folders are never "
                                    "written to")
                         .arg(dist)),
                 qPrintable(cacheInside.err));
        const Run reportInside =
            runCheck({dist, ref, QStringLiteral("--json"), ref + QStringLiteral("/report.json")},
                     cache_.path());
        QCOMPARE(reportInside.exitCode, 2);
        QVERIFY2(reportInside.err.contains(QStringLiteral("never written to")),
                 qPrintable(reportInside.err));
        QCOMPARE(snapshot(fixture(QStringLiteral("combined"))), before);
    }

    void badConfigIsBadInput() {
        QTemporaryDir dir;
        const QString config = dir.filePath(QStringLiteral("thresholds.json"));
        QFile file(config);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write("{\"safety_factor\": -3}");
        file.close();
        const Run run = runCheck(
            caseArgs(QStringLiteral("combined")) + QStringList{QStringLiteral("--config"), config},
            cache_.path());
        QCOMPARE(run.exitCode, 2);
        QVERIFY2(run.err.contains(config) && run.err.contains(QStringLiteral("safety_factor")),
                 qPrintable(run.err));
    }

    void unwritableReportIsBadInput() {
        const Run run = runCheck(
            caseArgs(QStringLiteral("combined")) +
                QStringList{QStringLiteral("--md"), QStringLiteral("/nonexistent-dir/r.md")},
            cache_.path());
        QCOMPARE(run.exitCode, 2);
        QVERIFY2(run.err.contains(QStringLiteral("/nonexistent-dir/r.md")), qPrintable(run.err));
    }

    // Reports are written even when the traces cannot be compared: the diagnostics are the
    // result.
    void reportsCarryTheDiagnosticsOfBadInput() {
        QTemporaryDir out;
        const QString json = out.filePath(QStringLiteral("r.json"));
        const Run run =
            runCheck({fixture(QStringLiteral("bad/newer_version")),
                      fixture(QStringLiteral("bad/ref")), QStringLiteral("--json"), json},
                     cache_.path());
        QCOMPARE(run.exitCode, 2);
        QFile file(json);
        QVERIFY(file.open(QIODevice::ReadOnly));
        QVERIFY(file.readAll().contains("newer than this ttrace supports"));
    }

    void quietAndNoCache() {
        QTemporaryDir cache;
        const QStringList args =
            caseArgs(QStringLiteral("combined")) +
            QStringList{QStringLiteral("--quiet"), QStringLiteral("--no-cache")};
        const Run first = runCheck(args, cache.path());
        QCOMPARE(first.exitCode, 0);
        QVERIFY2(first.out.isEmpty(), qPrintable(first.out));
        const Run second = runCheck(caseArgs(QStringLiteral("combined")), cache.path());
        QCOMPARE(second.exitCode, 0);
        QVERIFY2(!second.out.contains(QStringLiteral("results read from the cache")),
                 qPrintable(second.out));  // --no-cache stored nothing
    }

    void swappedRolesAreRefused() {
        const Run run = runCheck({fixture(QStringLiteral("combined"), QStringLiteral("ref")),
                                  fixture(QStringLiteral("combined"), QStringLiteral("dist"))},
                                 cache_.path());
        QCOMPARE(run.exitCode, 2);
        QVERIFY2(run.err.contains(QStringLiteral("role")), qPrintable(run.err));
    }

    // The bundled samples are real runs of examples/gpt (gloo); samples.json says, from the
    // bug corpus, what the checker must find in each.
    void realRunsOfTheExampleTrainer_data() {
        QTest::addColumn<BundledSample>("sample");
        const std::vector<BundledSample> samples = bundledSamples();
        QVERIFY2(samples.size() > 1, "resources/samples/samples.json lists no samples");
        for (const BundledSample& sample : samples) {
            QTest::newRow(qPrintable(sample.name)) << sample;
        }
    }

    void realRunsOfTheExampleTrainer() {
        QFETCH(BundledSample, sample);
        const QString root = sample.folder();
        QTemporaryDir out;
        const QString json = out.filePath(QStringLiteral("report.json"));
        const QString markdown = out.filePath(QStringLiteral("report.md"));
        const Run run = runCheck({root + QStringLiteral("/dist"), root + QStringLiteral("/ref"),
                                  QStringLiteral("--perturbed"), root + QStringLiteral("/pert"),
                                  QStringLiteral("--json"), json, QStringLiteral("--md"), markdown},
                                 cache_.path());
        QVERIFY2(run.exitCode == sample.exitCode, qPrintable(run.out + run.err));
        if (sample.bug.isEmpty()) {
            QVERIFY2(run.out.contains(QStringLiteral("no bug")), qPrintable(run.out));
            return;
        }
        // What a user reads on the terminal...
        const QStringList lines{
            QStringLiteral("first faulty tensor: ") + sample.firstFaulty + QStringLiteral("  "),
            QStringLiteral("root-cause module:   ") + sample.rootCause + QStringLiteral(" (")};
        for (const QString& text : lines) {
            QVERIFY2(run.out.contains(text), qPrintable(text + QStringLiteral("\n") + run.out));
        }
        // ...in the Markdown report: a parameter kind has no micro-batch ("... it0", no "mb").
        QFile md(markdown);
        QVERIFY(md.open(QIODevice::ReadOnly));
        const QString mdText = QString::fromUtf8(md.readAll());
        const qsizetype row = mdText.indexOf(QStringLiteral("| Iteration / micro-batch | "));
        QVERIFY2(row >= 0, qPrintable(mdText));
        const QString iterationRow = mdText.mid(row, mdText.indexOf(QLatin1Char('\n'), row) - row);
        const qsizetype mb = sample.firstFaulty.indexOf(QStringLiteral(" mb"));
        const QString expected = mb < 0 ? QStringLiteral(" / none")
                                        : QStringLiteral(" / ") + sample.firstFaulty.mid(mb + 3);
        QVERIFY2(iterationRow.contains(expected), qPrintable(iterationRow));
        // ...and what a tool reads in the JSON report: the faulty shard on the bug's ranks.
        QFile file(json);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QJsonObject localization =
            QJsonDocument::fromJson(file.readAll())[QStringLiteral("localization")].toObject();
        QCOMPARE(localization[QStringLiteral("first_faulty")][QStringLiteral("tensor")].toString(),
                 sample.firstFaulty);
        QCOMPARE(localization[QStringLiteral("root_cause")][QStringLiteral("module")].toString(),
                 sample.rootCause);
        if (sample.faultyRanks) {
            const QJsonObject shard = localization[QStringLiteral("faulty_shard")].toObject();
            QVERIFY2(shard[QStringLiteral("stands_out")].toBool(),
                     qPrintable(shard[QStringLiteral("reason")].toString()));
            const QJsonArray ranks = shard[QStringLiteral("ranks")].toArray();
            QVERIFY(!ranks.isEmpty());
            for (const QJsonValue& rank : ranks) {
                QVERIFY2(std::count(sample.faultyRanks->begin(), sample.faultyRanks->end(),
                                    rank.toInt()) == 1,
                         qPrintable(QStringLiteral("faulty shard on rank %1").arg(rank.toInt())));
            }
        }
    }

    void usageErrors() {
        QCOMPARE(runCheck({}, cache_.path()).exitCode, 2);
        QCOMPARE(runCheck({QStringLiteral("--threads"), QStringLiteral("0"),
                           fixture(QStringLiteral("combined"), QStringLiteral("dist")),
                           fixture(QStringLiteral("combined"), QStringLiteral("ref"))},
                          cache_.path())
                     .exitCode,
                 2);
        const Run help = runCheck({QStringLiteral("--help")}, cache_.path());
        QCOMPARE(help.exitCode, 0);
        QVERIFY(help.out.contains(QStringLiteral("--perturbed")));
    }
};

QTEST_GUILESS_MAIN(TestCheckCli)
#include "test_check_cli.moc"
