// HDF5 in worker processes (IsolatedHdf5.h): the worker indexes and reads exactly what this
// process would; its messages survive any truncation or damage; and a file that hangs it or
// makes it eat memory costs a diagnostic naming the file and the step, never the caller.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QRandomGenerator>
#include <QScopeGuard>
#include <QTemporaryDir>
#include <QTest>
#include <atomic>
#include <thread>

#include "Hdf5TestFiles.h"
#include "TestPaths.h"
#include "trace/Hdf5Reader.h"
#include "trace/Hdf5WorkerProtocol.h"
#include "trace/IsolatedHdf5.h"
#include "trace/Manifest.h"
#include "trace/TraceSet.h"

using namespace ttrace;

namespace {

Hdf5Isolation isolation(int stallSeconds = 20, std::int64_t memoryBytes = std::int64_t{4} << 30) {
    Hdf5Isolation i;
    i.workerPath = test::hdf5Worker();
    i.limits.stallSeconds = stallSeconds;
    i.limits.memoryBytes = memoryBytes;
    return i;
}

// Every rank file of the fixtures that a check reads.
QStringList fixtureRankFiles() {
    QStringList files;
    for (const char* name : {"combined", "cp_zigzag", "ep", "tp_column"}) {
        for (const char* role : {"dist", "ref"}) {
            const QDir folder(test::fixture(QString::fromLatin1(name), QString::fromLatin1(role)));
            for (const auto& file : folder.entryList({QStringLiteral("rank*.h5")}, QDir::Files)) {
                files << folder.filePath(file);
            }
        }
    }
    return files;
}

// Whether process `pid` has exited, every thread of it, and waits to be reaped: its
// descriptors, its end of the worker's socket among them, are closed then. (Its first thread
// shows as a zombie while the others still exit.)
bool exitedUnreaped(const QString& pid) {
    QFile status(QStringLiteral("/proc/%1/status").arg(pid));
    if (!status.open(QIODevice::ReadOnly)) {
        return false;
    }
    const QByteArray text = status.readAll();
    return text.contains("State:\tZ") && QDir(QStringLiteral("/proc/%1/task").arg(pid))
                                                 .entryList(QDir::Dirs | QDir::NoDotAndDotDot)
                                                 .size() <= 1;
}

// The HDF5 workers this process started that still run (zombies not counted).
QStringList runningWorkers() {
    QStringList pids;
    for (const auto& pid : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs)) {
        QFile stat(QStringLiteral("/proc/%1/stat").arg(pid));
        if (!stat.open(QIODevice::ReadOnly)) {
            continue;
        }
        const QList<QByteArray> fields = stat.readAll().split(' ');
        if (fields.size() > 3 && fields[1] == "(ttrace-hdf5-wor)" && fields[2] != "Z" &&
            fields[3].toLongLong() == ::getpid()) {
            pids << pid;
        }
    }
    return pids;
}

}  // namespace

class TestIsolatedHdf5 : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() {
        QVERIFY2(QFileInfo(test::hdf5Worker()).isExecutable(),
                 "TTRACE_HDF5_WORKER must name the ttrace-hdf5-worker of this build");
        QVERIFY(fixtureRankFiles().size() >= 10);
    }
    void cleanup() { isolateHdf5(std::nullopt); }

    // The worker's index of a file is this process's, byte for byte once encoded: every
    // record, attribute, offset and diagnostic.
    void workerIndexesAsThisProcess() {
        isolateHdf5(isolation());
        for (const auto& path : fixtureRankFiles()) {
            const RankFileIndex here = indexRankFile(path);
            const RankFileIndex there = indexRankFileIsolated(path, nullptr);
            QVERIFY2(here.opened && !here.records.empty(), qPrintable(path));
            QCOMPARE(encodeIndexReply(there), encodeIndexReply(here));
            QCOMPARE(there.records.front().file, path);
        }
    }

    // The rank file's `recomputations` marks the records it names, here and through the
    // worker alike; a malformed attribute, or an entry naming no tensor of the file, is a
    // warning naming the file, and the tensors are indexed as usual.
    void recomputationsMarkTheirRecords() {
        QTemporaryDir dir;
        const auto write = [&](const QString& name, const QByteArray& recomputations) {
            const QString path = dir.filePath(name);
            test::RankFileWriter writer(path, 0);
            const float values[4] = {1, 2, 3, 4};
            for (const auto& [dataset, kind, seq] :
                 {std::tuple{"000000", "forward_input", 0}, {"000001", "forward_output", 1}}) {
                const hid_t d =
                    writer.dataset(dataset, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {4}, values);
                test::RankFileWriter::standardAttributes(d, "layers.0.drop", kind, seq, "fp32",
                                                         {4});
                H5Dclose(d);
            }
            test::RankFileWriter::variableString(writer.file(), "recomputations", recomputations);
            return path;
        };
        const QString good = write(
            QStringLiteral("good.h5"),
            R"({"compared": 2, "differing": [{"name": "layers.0.drop", "kind": "forward_output",
                "index": 0, "iteration": 0, "micro_batch": 0, "elements_differing": 3,
                "elements": 4, "scales_differ": false}]})");
        isolateHdf5(isolation());
        for (const RankFileIndex& index :
             {indexRankFile(good), indexRankFileIsolated(good, nullptr)}) {
            QCOMPARE(index.records.size(), std::size_t{2});
            QVERIFY(index.diagnostics.empty());
            QVERIFY(!index.records[0].recomputation);
            QCOMPARE(index.records[1].recomputation, (RecomputationDifference{3, 4, false}));
        }
        const std::pair<const char*, const char*> bad[] = {
            {"{\"compared\": 2", "file attribute 'recomputations' is not valid JSON"},
            {R"({"compared": 2, "differing": [{"name": "layers.0.drop", "kind": "param_grad"}]})",
             "'differing' entry 0 must name a forward tensor"},
            {R"({"compared": 2, "differing": [{"name": "layers.0.drop", "kind":
                "forward_output", "index": 0, "iteration": 0, "micro_batch": 0,
                "elements_differing": 5, "elements": 4, "scales_differ": false}]})",
             "must give 'elements_differing' of 'elements' as counts"},
            {R"({"compared": 1, "differing": [{"name": "layers.9.drop", "kind":
                "forward_output", "index": 0, "iteration": 0, "micro_batch": 0,
                "elements_differing": 1, "elements": 4, "scales_differ": true}]})",
             "the recomputation of layers.9.drop forward_output[0] it0 mb0 differs from its "
             "first forward in 1 of 4 elements, and in its quantization scales, but the file "
             "holds no such tensor"},
        };
        for (const auto& [attribute, expected] : bad) {
            const QString path = write(QStringLiteral("bad.h5"), attribute);
            const RankFileIndex index = indexRankFileIsolated(path, nullptr);
            QCOMPARE(index.records.size(), std::size_t{2});
            QVERIFY(!index.records[1].recomputation);
            QCOMPARE(index.diagnostics.size(), std::size_t{1});
            QCOMPARE(index.diagnostics[0].severity, Severity::Warning);
            QCOMPARE(index.diagnostics[0].file, path);
            QVERIFY2(index.diagnostics[0].message.contains(QString::fromUtf8(expected)),
                     qPrintable(index.diagnostics[0].message));
        }
    }

    // A reply decodes to what was encoded; any prefix of it, and a damaged copy, decode to
    // nothing or to something, never to a crash or a huge allocation.
    void messagesSurviveTruncationAndDamage() {
        const QString path = fixtureRankFiles().front();
        const QByteArray reply = encodeIndexReply(indexRankFile(path));
        const auto decoded = decodeIndexReply(reply, path);
        QVERIFY(decoded);
        QCOMPARE(encodeIndexReply(*decoded), reply);
        for (qsizetype n = 0; n < reply.size(); n += 7) {
            QVERIFY2(!decodeIndexReply(reply.left(n), path), qPrintable(QString::number(n)));
        }
        QRandomGenerator random(17);
        for (int i = 0; i < 2000; ++i) {
            QByteArray damaged = reply;
            for (int flips = 0; flips < 4; ++flips) {
                const auto at = random.bounded(static_cast<int>(damaged.size()));
                damaged[at] = static_cast<char>(damaged[at] ^ (1 << random.bounded(8)));
            }
            static_cast<void>(decodeIndexReply(damaged, path));
        }

        ReadRequest read;
        read.file = path;
        read.dataset = QStringLiteral("/tensors/000001");
        read.dtype = DType::BF16;
        read.localShape = {4, 8};
        read.start = {1, 0};
        read.count = {2, 8};
        const QByteArray request = encodeRequest(read);
        const auto back = decodeRequest(request);
        QVERIFY(back && std::holds_alternative<ReadRequest>(*back));
        QCOMPARE(encodeRequest(*back), request);
        for (qsizetype n = 0; n < request.size(); ++n) {
            QVERIFY(!decodeRequest(request.left(n)));
        }
        QVERIFY(!decodeRequest(request + QByteArray("x")));
    }

    // Workers are reused between files and replaced when one is lost; several threads each
    // get their own.
    void threadsIndexTogether() {
        isolateHdf5(isolation());
        const QStringList files = fixtureRankFiles();
        std::vector<QByteArray> here;
        for (const auto& path : files) {
            here.push_back(encodeIndexReply(indexRankFile(path)));
        }
        std::atomic<int> mismatches{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < 3; ++t) {
            threads.emplace_back([&] {
                for (qsizetype i = 0; i < files.size(); ++i) {
                    if (encodeIndexReply(indexRankFileIsolated(files[i], nullptr)) !=
                        here[static_cast<std::size_t>(i)]) {
                        ++mismatches;
                    }
                }
            });
        }
        for (auto& thread : threads) {
            thread.join();
        }
        QCOMPARE(mismatches.load(), 0);
    }

    // An idle worker killed from outside (the out-of-memory killer, say) is not the next
    // file's fault: that file is indexed by a new worker, without an error.
    void idleWorkerKilledFromOutside() {
        isolateHdf5(isolation());
        const QString path = fixtureRankFiles().front();
        const QByteArray expected = encodeIndexReply(indexRankFile(path));
        QCOMPARE(encodeIndexReply(indexRankFileIsolated(path, nullptr)), expected);
        const QStringList workers = runningWorkers();
        QVERIFY(!workers.isEmpty());
        for (const auto& pid : workers) {
            QCOMPARE(::kill(pid.toInt(), SIGKILL), 0);
            QTRY_VERIFY(exitedUnreaped(pid));
        }
        const RankFileIndex again = indexRankFileIsolated(path, nullptr);
        QVERIFY2(again.opened, again.diagnostics.empty()
                                   ? "not opened"
                                   : qPrintable(again.diagnostics.front().toString()));
        QCOMPARE(encodeIndexReply(again), expected);
    }

    // A worker whose file turned out damaged is not asked again: libhdf5 may have damaged its
    // own memory on that file's error paths, and would crash on the next, sound one.
    void workerThatFoundDamageIsNotReused() {
        QTemporaryDir dir;
        const QString damaged = dir.filePath(QStringLiteral("rank00000.h5"));
        {
            test::RankFileWriter writer(damaged, 0);
            const float values[4] = {1, 2, 3, 4};
            const hid_t d = writer.dataset("000000", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {4}, values);
            test::RankFileWriter::standardAttributes(d, "layers.0.drop", "forward_output", 0, "b",
                                                     {4});
            H5Dclose(d);
        }
        isolateHdf5(isolation());
        const QString good = fixtureRankFiles().front();
        QVERIFY(indexRankFileIsolated(good, nullptr).diagnostics.empty());
        QCOMPARE(runningWorkers().size(), 1);
        const RankFileIndex index = indexRankFileIsolated(damaged, nullptr);
        QVERIFY(index.opened && !index.diagnostics.empty());
        QCOMPARE(index.diagnostics.front().severity, Severity::Error);
        QCOMPARE(runningWorkers().size(), 0);
        QCOMPARE(encodeIndexReply(indexRankFileIsolated(good, nullptr)),
                 encodeIndexReply(indexRankFile(good)));
        QCOMPARE(runningWorkers().size(), 1);
    }

    // A crash in a worker that answered earlier requests may be their doing: the file is
    // asked of a fresh worker, and only what that one finds is said. Here the first worker
    // is killed with SIGSEGV while it waits on a FIFO; the fresh one then reads bytes that are
    // no HDF5 file, and that is the diagnosis, not the crash.
    void crashAfterEarlierRequestsIsTriedAgain() {
        QTemporaryDir dir;
        const QString fifo = dir.filePath(QStringLiteral("rank00000.h5"));
        QCOMPARE(::mkfifo(QFile::encodeName(fifo).constData(), 0600), 0);
        isolateHdf5(isolation(60));
        QVERIFY(indexRankFileIsolated(fixtureRankFiles().front(), nullptr).diagnostics.empty());
        const QStringList first = runningWorkers();
        QCOMPARE(first.size(), 1);
        std::atomic<bool> segfaulted{false};
        std::atomic<bool> fed{false};
        std::thread saboteur([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            segfaulted = ::kill(first.front().toInt(), SIGSEGV) == 0;
            for (int i = 0; i < 100; ++i) {
                const QStringList now = runningWorkers();
                if (!now.isEmpty() && !now.contains(first.front())) {
                    break;
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
            }
            // Without a reader (no worker asked again) the FIFO cannot open: never blocks.
            // Opened, the reader is unblocked; the bytes are for good measure, and a reader
            // that has already given up (a FIFO holds nothing yet) must not make the write
            // kill this process: SIGPIPE is blocked in this thread, and taken if raised.
            sigset_t pipe;
            sigemptyset(&pipe);
            sigaddset(&pipe, SIGPIPE);
            pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
            const QByteArray name = QFile::encodeName(fifo);
            for (int i = 0; i < 100 && !fed; ++i) {
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
                const int fd = ::open(name.constData(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
                if (fd >= 0) {
                    fed = true;
                    [[maybe_unused]] const ssize_t written = ::write(fd, "not an HDF5 file", 16);
                    ::close(fd);
                }
            }
            const timespec none{};
            ::sigtimedwait(&pipe, nullptr, &none);
        });
        const RankFileIndex index = indexRankFileIsolated(fifo, nullptr);
        saboteur.join();
        QVERIFY(segfaulted && fed);
        QCOMPARE(index.diagnostics.size(), std::size_t{1});
        QVERIFY2(!index.diagnostics.front().message.contains(QStringLiteral("crashed")),
                 qPrintable(index.diagnostics.front().toString()));
        QVERIFY2(index.diagnostics.front().message.startsWith(
                     QStringLiteral("is not a readable HDF5 file")),
                 qPrintable(index.diagnostics.front().toString()));
    }

    // A file that never answers (a FIFO: opening it waits for a writer forever, as a dead
    // network file system does) is stopped after the stall limit, named with the step.
    void stalledWorkerIsStopped() {
        QTemporaryDir dir;
        const QString fifo = dir.filePath(QStringLiteral("rank00000.h5"));
        QCOMPARE(::mkfifo(QFile::encodeName(fifo).constData(), 0600), 0);
        isolateHdf5(isolation(1));
        QElapsedTimer timer;
        timer.start();
        const RankFileIndex index = indexRankFileIsolated(fifo, nullptr);
        QVERIFY(timer.elapsed() < 5000);
        QVERIFY(!index.opened && !index.cancelled);
        QCOMPARE(index.diagnostics.size(), std::size_t{1});
        const Diagnostic& d = index.diagnostics.front();
        QCOMPARE(d.file, fifo);
        QCOMPARE(d.message,
                 QStringLiteral("cannot be read (a corrupt file, or a file system that does not "
                                "answer): the HDF5 library stopped responding for 1 s while "
                                "opening the file; none of its tensors is read"));
        // The next file gets a new worker.
        const QString good = fixtureRankFiles().front();
        QCOMPARE(encodeIndexReply(indexRankFileIsolated(good, nullptr)),
                 encodeIndexReply(indexRankFile(good)));
    }

    // Cancel stops a worker stuck inside HDF5 at once, with no diagnostic.
    void cancelStopsAStuckWorker() {
        QTemporaryDir dir;
        const QString fifo = dir.filePath(QStringLiteral("rank00000.h5"));
        QCOMPARE(::mkfifo(QFile::encodeName(fifo).constData(), 0600), 0);
        isolateHdf5(isolation(60));
        std::atomic<bool> cancel{false};
        std::thread canceller([&cancel] {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            cancel.store(true);
        });
        QElapsedTimer timer;
        timer.start();
        const RankFileIndex index = indexRankFileIsolated(fifo, &cancel);
        canceller.join();
        QVERIFY2(timer.elapsed() < 1300, qPrintable(QString::number(timer.elapsed())));
        QVERIFY(index.cancelled);
        QVERIFY(index.diagnostics.empty());
    }

    // A read that takes more memory than the worker may use stops the worker, and says so;
    // later reads of that file fail at once rather than try again.
    void workerOverItsMemoryIsStopped() {
        QTemporaryDir dir;
        QVERIFY(test::writeManifest(dir.path(), 1, QString(), QStringLiteral("reference")));
        constexpr hsize_t rows = 4096, cols = 16384;  // 256 MiB of fp32, compressed to little
        {
            test::RankFileWriter w(dir.filePath(QStringLiteral("rank00000.h5")), 0);
            const hid_t chunked = H5Pcreate(H5P_DATASET_CREATE);
            const hsize_t chunk[2] = {256, cols};
            H5Pset_chunk(chunked, 2, chunk);
            H5Pset_deflate(chunked, 1);
            const std::vector<float> zeros(rows * cols, 0.0f);
            const hid_t ds = w.dataset("big", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {rows, cols},
                                       zeros.data(), chunked);
            test::RankFileWriter::standardAttributes(ds, "big", "forward_output", 0, "fp32",
                                                     {int(rows), int(cols)});
            H5Dclose(ds);
            H5Pclose(chunked);
        }
        isolateHdf5(isolation(20, std::int64_t{64} << 20));
        const TraceSet set = openTraceSet(dir.path());
        QVERIFY(set.usable());
        const TensorRecord& record = set.records.front();
        QVERIFY(!record.dataOffset);
        Hdf5Reader reader;
        std::vector<float> out(rows * cols);
        const std::vector<std::int64_t> start{0, 0};
        const std::vector<std::int64_t> count{rows, cols};
        const auto error = reader.read(record, start, count, out.data());
        QVERIFY(error);
        QCOMPARE(error->file, record.file);
        QCOMPARE(error->dataset, QStringLiteral("/tensors/big"));
        // Where it was is said when the worker had marked a step by then: under the sanitizers
        // a worker can pass 64 MiB before its first one.
        const QString overLimit = QStringLiteral(
            "cannot read box [0:4096, 0:16384]: the file is corrupt: the HDF5 "
            "library used more than 64 MiB of memory");
        QVERIFY2(error->message == overLimit ||
                     error->message.startsWith(overLimit + QStringLiteral(" while ")),
                 qPrintable(error->message));
        const auto again = reader.read(record, start, count, out.data());
        QVERIFY(again);
        QVERIFY2(again->message.contains(QStringLiteral("not read: an earlier read of this file "
                                                        "failed: the HDF5 library used more than "
                                                        "64 MiB of memory")),
                 qPrintable(again->message));
        // Turned on again (as a new session would), the pool has forgotten it: a small box reads.
        isolateHdf5(isolation());
        std::vector<float> few(8);
        QVERIFY(!reader.read(record, std::vector<std::int64_t>{5, 5},
                             std::vector<std::int64_t>{1, 8}, few.data()));
    }
};

QTEST_GUILESS_MAIN(TestIsolatedHdf5)
#include "test_isolated_hdf5.moc"
