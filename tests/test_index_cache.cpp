// IndexCache and cacheDirectory: entries round-trip exactly (records and diagnostics), whole or
// one tensor's part, go stale when size or mtime change, survive reopening the database, are
// dropped by a database of an older schema or another engine (whose sources' hash is this
// build's), and the cache folder follows $TTRACE_CACHE_DIR / $XDG_CACHE_HOME.
#include <QCryptographicHash>
#include <QDirIterator>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <cmath>
#include <thread>

#include "TestPaths.h"
#include "store/CacheLocation.h"
#include "store/EngineSources.h"
#include "store/IndexCache.h"

using namespace ttrace;

namespace {

// `stamp`: the size and modification time the entry is stored and looked up with, which
// every record read back carries.
RankFileIndex sampleIndex(const QString& file, FileStamp stamp = {100, 5}) {
    RankFileIndex index;
    index.opened = true;
    index.fileRank = 3;
    index.formatVersion = QStringLiteral("1.0");
    TensorRecord a;
    a.rank = 3;
    a.file = file;
    a.dataset = QStringLiteral("/tensors/000000");
    a.key = {QStringLiteral("layers.0.attn"), TensorKind::ForwardOutput, 1, 2, 3};
    a.seq = 0;
    a.layer = 0;
    a.expert = -1;
    a.dtype = DType::FP8E5M2;
    a.scales.scaleInv = {0.1234567890123456789};
    a.globalShape = {2, 16, 8};
    a.localShape = {2, 8, 8};
    a.ranges.dims = {{{0, 2}}, {{0, 4}, {12, 16}}, {{0, 8}}};
    a.placements = {{QStringLiteral("tp"), {Placement::Type::Replicate, -1}},
                    {QStringLiteral("cp"), {Placement::Type::Shard, 1}},
                    {QStringLiteral("dp"), {Placement::Type::Partial, -1}}};
    a.dataOffset = (std::uint64_t{1} << 35) + 7;  // beyond 32 bits
    a.fileStamp = stamp;
    a.recomputation = RecomputationDifference{12, 256, true};
    TensorRecord b;
    b.rank = 3;
    b.file = file;
    b.dataset = QStringLiteral("/tensors/000001");
    b.key = {QStringLiteral("layers.0.attn.weight \u00e9"), TensorKind::UpdatedParam, 0, 2, -1};
    b.seq = 1ll << 40;
    b.layer = 7;
    b.expert = 5;
    b.dtype = DType::BF16;
    b.globalShape = {};
    b.localShape = {};
    b.ranges = ShardRanges::whole({});
    b.fileStamp = stamp;  // no data offset: read through HDF5
    TensorRecord c = a;   // per-row fp8 scales, one per row of the [2, 8, 8] shard
    c.dataset = QStringLiteral("/tensors/000002");
    c.seq = 2;
    c.key.index = 2;
    c.scales.block = {1, 1, 8};
    c.scales.scaleInv.clear();
    for (int row = 0; row < 16; ++row) {
        c.scales.scaleInv.push_back(std::ldexp(1.0, -row) / 3.0);
    }
    index.records = {a, b, c};
    Diagnostic warning;
    warning.severity = Severity::Warning;
    warning.file = file;
    warning.dataset = QStringLiteral("/tensors/000002");
    warning.message = QStringLiteral("seq 1 is used twice; \"quotes\" and 'single'");
    Diagnostic error;
    error.severity = Severity::Error;
    error.file = file;
    error.dataset = QStringLiteral("/tensors/000003");
    error.tensor = QStringLiteral("layers.0.x forward_output[0] it0 mb0");
    error.message = QStringLiteral("attribute 'kind' is missing");
    index.diagnostics = {warning, error};
    return index;
}

void compareRecords(const TensorRecord& a, const TensorRecord& b) {
    QCOMPARE(a.rank, b.rank);
    QCOMPARE(a.file, b.file);
    QCOMPARE(a.dataset, b.dataset);
    QCOMPARE(a.key, b.key);
    QCOMPARE(a.seq, b.seq);
    QCOMPARE(a.layer, b.layer);
    QCOMPARE(a.expert, b.expert);
    QCOMPARE(a.dtype, b.dtype);
    QCOMPARE(a.scales, b.scales);  // bit-exact
    QCOMPARE(a.globalShape, b.globalShape);
    QCOMPARE(a.localShape, b.localShape);
    QCOMPARE(a.ranges, b.ranges);
    QCOMPARE(a.placements, b.placements);
    QCOMPARE(a.coords, b.coords);
    QCOMPARE(a.dataOffset, b.dataOffset);
    QCOMPARE(a.recomputation, b.recomputation);
    QCOMPARE(a.fileStamp.has_value(), b.fileStamp.has_value());
    if (a.fileStamp && b.fileStamp) {
        QCOMPARE(a.fileStamp->size, b.fileStamp->size);
        QCOMPARE(a.fileStamp->mtimeNs, b.fileStamp->mtimeNs);
    }
}

void compareIndexes(const RankFileIndex& a, const RankFileIndex& b) {
    QCOMPARE(a.opened, b.opened);
    QCOMPARE(a.fileRank, b.fileRank);
    QCOMPARE(a.formatVersion, b.formatVersion);
    QCOMPARE(a.records.size(), b.records.size());
    for (std::size_t i = 0; i < a.records.size(); ++i) {
        compareRecords(a.records[i], b.records[i]);
        if (QTest::currentTestFailed()) {
            return;
        }
    }
    QCOMPARE(a.diagnostics.size(), b.diagnostics.size());
    for (std::size_t i = 0; i < a.diagnostics.size(); ++i) {
        QCOMPARE(a.diagnostics[i].severity, b.diagnostics[i].severity);
        QCOMPARE(a.diagnostics[i].file, b.diagnostics[i].file);
        QCOMPARE(a.diagnostics[i].dataset, b.diagnostics[i].dataset);
        QCOMPARE(a.diagnostics[i].tensor, b.diagnostics[i].tensor);
        QCOMPARE(a.diagnostics[i].message, b.diagnostics[i].message);
    }
}

// Opens (creates) the cache at `path` and stores `file`'s sample index under stamp {1, 2}:
// "" on success, else what failed.
QString storeSample(const QString& path, const QString& file) {
    QString error;
    auto cache = IndexCache::open(path, &error);
    if (!cache) {
        return error;
    }
    return cache->store(file, 1, 2, sampleIndex(file)) ? QString() : QStringLiteral("store failed");
}

}  // namespace

class TestIndexCache : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void roundTrip() {
        QTemporaryDir dir;
        QString error;
        auto cache = IndexCache::open(dir.filePath(QStringLiteral("index.sqlite")), &error);
        QVERIFY2(cache, qPrintable(error));
        const QString file = QStringLiteral("/traces/run-dist/rank00003.h5");
        const auto index = sampleIndex(file, {100, 1'700'000'000'123'456'789});
        QVERIFY(!cache->lookup(file, 100, 5));
        QVERIFY(cache->store(file, 100, 1'700'000'000'123'456'789, index));
        const auto back = cache->lookup(file, 100, 1'700'000'000'123'456'789);
        QVERIFY(back);
        compareIndexes(*back, index);
    }

    void staleEntriesAreMisses() {
        QTemporaryDir dir;
        QString error;
        auto cache = IndexCache::open(dir.filePath(QStringLiteral("index.sqlite")), &error);
        QVERIFY(cache);
        const QString file = QStringLiteral("/t/rank00000.h5");
        QVERIFY(cache->store(file, 100, 5, sampleIndex(file)));
        QVERIFY(!cache->lookup(file, 101, 5));  // size changed
        QVERIFY(!cache->lookup(file, 100, 6));  // mtime changed
        QVERIFY(!cache->lookup(QStringLiteral("/t/rank00001.h5"), 100, 5));
        QVERIFY(cache->lookup(file, 100, 5));
    }

    // One tensor's part of an entry is the part onlyTensor() keeps of the whole index.
    void lookupTensorReadsOneTensor() {
        QTemporaryDir dir;
        QString error;
        auto cache = IndexCache::open(dir.filePath(QStringLiteral("index.sqlite")), &error);
        QVERIFY2(cache, qPrintable(error));
        const QString file = QStringLiteral("/t/rank00003.h5");
        const RankFileIndex index = sampleIndex(file);
        QVERIFY(cache->store(file, 100, 5, index));
        for (const TensorRecord& record : index.records) {
            const auto part = cache->lookupTensor(file, 100, 5, record.key);
            QVERIFY(part);
            QCOMPARE(part->records.size(), std::size_t{1});
            compareIndexes(*part, onlyTensor(index, record.key));
        }
        // The tensor of the error diagnostic has no record: the file's attributes, the
        // diagnostics about the file and that one, no record.
        const TensorKey other{QStringLiteral("layers.0.x"), TensorKind::ForwardOutput, 0, 0, 0};
        const auto none = cache->lookupTensor(file, 100, 5, other);
        QVERIFY(none);
        QVERIFY(none->records.empty());
        QCOMPARE(none->diagnostics.size(), std::size_t{2});
        compareIndexes(*none, onlyTensor(index, other));
        // Another micro-batch of a stored tensor is another tensor.
        TensorKey nextMicroBatch = index.records[0].key;
        ++nextMicroBatch.microBatch;
        QVERIFY(cache->lookupTensor(file, 100, 5, nextMicroBatch)->records.empty());

        QVERIFY(!cache->lookupTensor(file, 101, 5, index.records[0].key));
        QVERIFY(!cache->lookupTensor(file, 100, 6, index.records[0].key));
        QVERIFY(!cache->lookupTensor(QStringLiteral("/t/x.h5"), 100, 5, index.records[0].key));
    }

    void isCurrentComparesTheStamp() {
        QTemporaryDir dir;
        QString error;
        auto cache = IndexCache::open(dir.filePath(QStringLiteral("index.sqlite")), &error);
        QVERIFY2(cache, qPrintable(error));
        const QString file = QStringLiteral("/t/rank00000.h5");
        QVERIFY(!cache->isCurrent(file, 100, 5));
        QVERIFY(cache->store(file, 100, 5, sampleIndex(file)));
        QVERIFY(cache->isCurrent(file, 100, 5));
        QVERIFY(!cache->isCurrent(file, 101, 5));
        QVERIFY(!cache->isCurrent(file, 100, 6));
        QVERIFY(!cache->isCurrent(QStringLiteral("/t/rank00001.h5"), 100, 5));
    }

    // A database written by an older schema (here: version 1, before the index by name) is
    // emptied and set up anew, the index included.
    void olderSchemaIsRebuilt() {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("index.sqlite"));
        const QString file = QStringLiteral("/t/rank00000.h5");
        QString error = storeSample(path, file);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        const auto indexCount = [&path]() -> qint64 {
            QString openError;
            const sqlite::Database db = sqlite::openDatabase(path, &openError);
            if (!db) {
                return -1;
            }
            sqlite::Statement count(db.get(),
                                    "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
                                    "name = 'records_by_name'");
            return count.step() ? count.integer(0) : -1;
        };
        QCOMPARE(indexCount(), 1);
        {
            const sqlite::Database db = sqlite::openDatabase(path, &error);
            QVERIFY2(db, qPrintable(error));
            QVERIFY2(sqlite::exec(db.get(),
                                  "DROP INDEX records_by_name; UPDATE meta SET value = '1' "
                                  "WHERE key = 'schema_version'",
                                  &error),
                     qPrintable(error));
        }
        QCOMPARE(indexCount(), 0);
        auto cache = IndexCache::open(path, &error);
        QVERIFY2(cache, qPrintable(error));
        QVERIFY(!cache->lookup(file, 1, 2));
        QCOMPARE(indexCount(), 1);
        QVERIFY(cache->store(file, 1, 2, sampleIndex(file)));
        QVERIFY(cache->lookup(file, 1, 2));
    }

    // The engine's hash is that of the sources in the tree now (cmake/SourcesHash.cmake's
    // recipe): a build that did not regenerate it after an edit would fail here.
    void engineHashIsTheSourcesNow() {
        const QDir core(test::sourceDir() + QStringLiteral("/core"));
        QStringList files;
        for (QDirIterator it(core.path(), {QStringLiteral("*.cpp"), QStringLiteral("*.h")},
                             QDir::Files, QDirIterator::Subdirectories);
             it.hasNext();) {
            files << core.relativeFilePath(it.next());
        }
        QVERIFY(files.size() > 50);
        std::sort(files.begin(), files.end(),
                  [](const QString& a, const QString& b) { return a.toUtf8() < b.toUtf8(); });
        QByteArray text;
        for (const auto& file : files) {
            QFile source(core.filePath(file));
            QVERIFY(source.open(QIODevice::ReadOnly));
            text += file.toUtf8() + ' ' +
                    QCryptographicHash::hash(source.readAll(), QCryptographicHash::Sha256).toHex() +
                    '\n';
        }
        QCOMPARE(engineSourcesHash(),
                 QString::fromLatin1(
                     QCryptographicHash::hash(text, QCryptographicHash::Sha256).toHex()));
    }

    // Entries indexed by another engine (same schema, other sources) are dropped: its rules
    // of what a rank file holds may differ.
    void anotherEnginesEntriesAreDropped() {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("index.sqlite"));
        const QString file = QStringLiteral("/t/rank00000.h5");
        QString error = storeSample(path, file);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        {
            const sqlite::Database db = sqlite::openDatabase(path, &error);
            QVERIFY2(db, qPrintable(error));
            // The cache is keyed on this engine: without it, the edit below would only spoil
            // the schema number, and the entry would go for that reason alone.
            sqlite::Statement key(db.get(), "SELECT value FROM meta WHERE key = 'schema_version'");
            QVERIFY(key.step());
            QVERIFY2(key.text(0).endsWith(QLatin1Char(' ') + engineSourcesHash()),
                     qPrintable(key.text(0)));
            QVERIFY2(sqlite::exec(db.get(),
                                  "UPDATE meta SET value = substr(value, 1, instr(value, ' ')) || "
                                  "'0000' WHERE key = 'schema_version'",
                                  &error),
                     qPrintable(error));
        }
        auto cache = IndexCache::open(path, &error);
        QVERIFY2(cache, qPrintable(error));
        QVERIFY(!cache->lookup(file, 1, 2));
    }

    void storeReplacesTheEntry() {
        QTemporaryDir dir;
        QString error;
        auto cache = IndexCache::open(dir.filePath(QStringLiteral("index.sqlite")), &error);
        QVERIFY(cache);
        const QString file = QStringLiteral("/t/rank00000.h5");
        QVERIFY(cache->store(file, 100, 5, sampleIndex(file)));
        RankFileIndex smaller;
        smaller.opened = true;
        smaller.records = {sampleIndex(file, {200, 6}).records[1]};
        QVERIFY(cache->store(file, 200, 6, smaller));
        QVERIFY(!cache->lookup(file, 100, 5));
        const auto back = cache->lookup(file, 200, 6);
        QVERIFY(back);
        compareIndexes(*back, smaller);
        QVERIFY(!back->fileRank);
        QVERIFY(back->diagnostics.empty());
    }

    void entriesSurviveReopening() {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("sub/folder/index.sqlite"));
        const QString file = QStringLiteral("/t/rank00000.h5");
        QString error = storeSample(path, file);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        auto second = IndexCache::open(path, &error);
        QVERIFY2(second, qPrintable(error));
        const auto back = second->lookup(file, 1, 2);
        QVERIFY(back);
        compareIndexes(*back, sampleIndex(file, {1, 2}));
        // Two connections at once, as the GUI and the CLI would have.
        auto third = IndexCache::open(path, &error);
        QVERIFY2(third, qPrintable(error));
        QVERIFY(third->store(QStringLiteral("/t/other.h5"), 1, 2, sampleIndex(file)));
        QVERIFY(second->lookup(QStringLiteral("/t/other.h5"), 1, 2));
    }

    void concurrentUse() {
        QTemporaryDir dir;
        QString error;
        auto cache = IndexCache::open(dir.filePath(QStringLiteral("index.sqlite")), &error);
        QVERIFY(cache);
        std::atomic<int> failures{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < 4; ++t) {
            threads.emplace_back([&, t] {
                for (int i = 0; i < 20; ++i) {
                    const QString file = QStringLiteral("/t/%1/%2.h5").arg(t).arg(i);
                    if (!cache->store(file, i, t, sampleIndex(file))) {
                        ++failures;
                    }
                    const auto back = cache->lookup(file, i, t);
                    if (!back || back->records.size() != 3 || back->diagnostics.size() != 2) {
                        ++failures;
                    }
                }
            });
        }
        for (auto& thread : threads) {
            thread.join();
        }
        QCOMPARE(failures.load(), 0);
    }

    void unwritableLocationIsAnError() {
        QTemporaryDir dir;
        // A regular file where the database's folder should be.
        QFile blocker(dir.filePath(QStringLiteral("blocker")));
        QVERIFY(blocker.open(QIODevice::WriteOnly));
        blocker.close();
        const QString path = dir.filePath(QStringLiteral("blocker/index.sqlite"));
        QString error;
        QVERIFY(!IndexCache::open(path, &error));
        QVERIFY2(error.contains(path), qPrintable(error));

        QFile notADatabase(dir.filePath(QStringLiteral("garbage.sqlite")));
        QVERIFY(notADatabase.open(QIODevice::WriteOnly));
        notADatabase.write(QByteArray(4096, 'x'));
        notADatabase.close();
        error.clear();
        QVERIFY(!IndexCache::open(notADatabase.fileName(), &error));
        QVERIFY2(error.contains(notADatabase.fileName()), qPrintable(error));
        // The checker's way: set aside, started anew, said once.
        QString setAside;
        QVERIFY2(IndexCache::open(notADatabase.fileName(), &error, &setAside), qPrintable(error));
        QVERIFY2(setAside.contains(QStringLiteral("is not a sound database; it was set aside as")),
                 qPrintable(setAside));
        setAside.clear();
        QVERIFY(IndexCache::open(notADatabase.fileName(), &error, &setAside));
        QVERIFY(setAside.isEmpty());
    }

    void cacheDirectoryFollowsTheEnvironment() {
        QTemporaryDir dir;
        const QByteArray savedCache = qgetenv("TTRACE_CACHE_DIR");
        const QByteArray savedXdg = qgetenv("XDG_CACHE_HOME");

        const QString explicitDir = dir.filePath(QStringLiteral("explicit"));
        QCOMPARE(cacheDirectory(explicitDir), explicitDir);
        QVERIFY(QFileInfo(explicitDir).isDir());

        qputenv("TTRACE_CACHE_DIR", QFile::encodeName(dir.filePath(QStringLiteral("env"))));
        QCOMPARE(cacheDirectory(), dir.filePath(QStringLiteral("env")));

        qunsetenv("TTRACE_CACHE_DIR");
        qputenv("XDG_CACHE_HOME", QFile::encodeName(dir.filePath(QStringLiteral("xdg"))));
        QCOMPARE(cacheDirectory(), dir.filePath(QStringLiteral("xdg/ttrace")));

        const QByteArray savedHome = qgetenv("HOME");
        qunsetenv("XDG_CACHE_HOME");
        qputenv("HOME", QFile::encodeName(dir.filePath(QStringLiteral("home"))));
        QCOMPARE(cacheDirectory(), dir.filePath(QStringLiteral("home/.cache/ttrace")));
        qputenv("HOME", savedHome);

        // A folder that cannot be created gives an empty path.
        QFile blocker(dir.filePath(QStringLiteral("file")));
        QVERIFY(blocker.open(QIODevice::WriteOnly));
        blocker.close();
        QCOMPARE(cacheDirectory(dir.filePath(QStringLiteral("file/sub"))), QString());

        // A check's cache is resolved once, with why: flag, variable, default; refused inside
        // a trace folder (nothing created), none with --no-cache.
        const QString traces = dir.filePath(QStringLiteral("traces"));
        const QString fromEnv = dir.filePath(QStringLiteral("env"));
        const QString xdg = dir.filePath(QStringLiteral("xdg"));
        qputenv("TTRACE_CACHE_DIR", QFile::encodeName(fromEnv));
        CacheLocation flag = resolveCacheLocation(explicitDir, true, {traces});
        QCOMPARE(flag.dir, explicitDir);
        QCOMPARE(flag.why(), QStringLiteral("--cache-dir"));
        CacheLocation variable = resolveCacheLocation({}, true, {traces});
        QCOMPARE(variable.dir, fromEnv);
        QCOMPARE(variable.why(), QStringLiteral("$TTRACE_CACHE_DIR"));
        qunsetenv("TTRACE_CACHE_DIR");
        qputenv("XDG_CACHE_HOME", QFile::encodeName(xdg));
        QCOMPARE(resolveCacheLocation({}, true, {}).why(),
                 QStringLiteral("the default ($XDG_CACHE_HOME/ttrace)"));
        const QString inside = traces + QStringLiteral("/run/cache");
        const CacheLocation refused = resolveCacheLocation(inside, true, {{}, traces});
        QVERIFY(!refused.usable());
        QCOMPARE(refused.insideTraceFolder, traces);
        QCOMPARE(refused.path, inside);
        QVERIFY(!QFileInfo::exists(inside));
        const CacheLocation none = resolveCacheLocation(explicitDir, false, {});
        QVERIFY(!none.wanted && !none.usable());

        qputenv("TTRACE_CACHE_DIR", savedCache);
        if (savedXdg.isEmpty()) {
            qunsetenv("XDG_CACHE_HOME");
        } else {
            qputenv("XDG_CACHE_HOME", savedXdg);
        }
    }
};

QTEST_GUILESS_MAIN(TestIndexCache)
#include "test_index_cache.moc"
