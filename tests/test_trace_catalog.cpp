// TraceCatalog against openTraceSet on every fixture, good and bad: the same problems in the
// same order, the same tensors, and each tensor's records read back from the index cache (or
// from memory) equal to the ones openTraceSet holds; with the cache filled now, read back,
// not given, or only read (a process of a distributed check), and after a rank file changed.
#include <QFile>
#include <QTemporaryDir>
#include <QTest>
#include <map>

#include "DiagnosticText.h"
#include "FolderCopy.h"
#include "Hdf5TestFiles.h"
#include "RecordText.h"
#include "TestPaths.h"
#include "store/IndexCache.h"
#include "trace/TraceCatalog.h"
#include "trace/TraceSet.h"

using namespace ttrace;
using test::diagnosticTexts;
using test::recordTexts;

namespace {

enum class CacheUse { None, Filling, Reading, ReadOnly, HalfCached };

// openTraceSet's records grouped by tensor, in its order.
std::map<TensorKey, std::vector<TensorRecord>> byTensor(const TraceSet& set) {
    std::map<TensorKey, std::vector<TensorRecord>> tensors;
    for (const auto& record : set.records) {
        tensors[record.key].push_back(record);
    }
    return tensors;
}

// Every way a catalog and openTraceSet could disagree about `folder`.
void compareWithTraceSet(const QString& folder, CacheUse use) {
    const TraceSet set = openTraceSet(folder);
    QTemporaryDir cacheDir;
    std::unique_ptr<IndexCache> cache;
    if (use != CacheUse::None) {
        QString error;
        cache = IndexCache::open(cacheDir.filePath(QStringLiteral("index.sqlite")), &error);
        QVERIFY2(cache, qPrintable(error));
    }
    OpenOptions options;
    options.cache = cache.get();
    options.fillCache = use != CacheUse::ReadOnly && use != CacheUse::HalfCached;
    if (use == CacheUse::Reading) {
        static_cast<void>(TraceCatalog::open(folder, options));
    }
    if (use == CacheUse::HalfCached) {
        static_cast<void>(indexPartIntoCache(folder, *cache, 0, 2));
    }
    const TraceCatalog catalog = TraceCatalog::open(folder, options);

    QCOMPARE(diagnosticTexts(catalog.diagnostics()), diagnosticTexts(set.diagnostics));
    QCOMPARE(catalog.usable(), set.usable());
    QCOMPARE(catalog.cancelled(), set.cancelled);
    QCOMPARE(catalog.folder(), set.folder);
    QCOMPARE(catalog.manifest().path, set.manifest.path);
    QCOMPARE(catalog.datasetCount(), static_cast<std::int64_t>(set.records.size()));
    const auto tensors = byTensor(set);
    QCOMPARE(catalog.tensors().size(), tensors.size());
    std::size_t i = 0;
    for (const auto& [key, records] : tensors) {
        const CatalogTensor& listed = catalog.tensors()[i++];
        QCOMPARE(listed.key, key);
        QCOMPARE(listed.records, static_cast<std::int64_t>(records.size()));
        std::int64_t bytes = 0;
        for (const auto& record : records) {
            bytes += record.storedBytes();
        }
        QCOMPARE(listed.storedBytes, bytes);
        QCOMPARE(listed.globalShape, records.front().globalShape);  // first by (rank, seq)
        const auto read = catalog.records(key);
        QVERIFY(read);
        QCOMPARE(recordTexts(*read), recordTexts(records));
    }
    TensorKey absent;
    absent.name = QStringLiteral("no.such.module");
    const auto none = catalog.records(absent);
    QVERIFY(none && none->empty());
}

OpenOptions withCache(IndexCache* cache) {
    OpenOptions options;
    options.cache = cache;
    return options;
}

QStringList fixtureFolders() {
    QStringList folders;
    for (const char* name : {"tp_column", "tp_row", "tp_strided", "sp", "cp_zigzag", "pp_vpp",
                             "dp_microbatch", "ep", "combined", "bug_shard", "bug_replica"}) {
        folders << test::fixture(QString::fromLatin1(name), QStringLiteral("dist"));
    }
    for (const char* name :
         {"missing_rank", "extra_rank", "rank_mismatch", "gap", "overlap", "shape_mismatch",
          "truncated", "corrupt", "newer_version", "manifest_syntax", "no_manifest",
          "dtype_storage", "missing_attr", "nan", "huge_world", "dtype_mixed"}) {
        folders << test::fixture(QStringLiteral("bad/") + QString::fromLatin1(name));
    }
    folders << test::fixture(QStringLiteral("does_not_exist"));
    return folders;
}

}  // namespace

class TestTraceCatalog : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void sameAsTraceSet_data() {
        QTest::addColumn<QString>("folder");
        QTest::addColumn<int>("use");
        const std::pair<const char*, CacheUse> uses[] = {{"no cache", CacheUse::None},
                                                         {"filling", CacheUse::Filling},
                                                         {"reading", CacheUse::Reading},
                                                         {"read-only", CacheUse::ReadOnly},
                                                         {"half cached", CacheUse::HalfCached}};
        for (const QString& folder : fixtureFolders()) {
            for (const auto& [name, use] : uses) {
                const QString label = folder.section(QLatin1Char('/'), -2);
                QTest::addRow("%s, %s", qPrintable(label), name) << folder << static_cast<int>(use);
            }
        }
    }
    void sameAsTraceSet() {
        QFETCH(QString, folder);
        QFETCH(int, use);
        compareWithTraceSet(folder, static_cast<CacheUse>(use));
    }

    // Placements on an axis the mesh lacks are reported with their file and left out, and a
    // rank file the manifest does not list is ignored with a warning: from the cache too.
    void offMeshPlacementsAndUnlistedFiles() {
        QTemporaryDir dir;
        QVERIFY(test::writeManifest(dir.path(), 2, QStringLiteral("tp")));
        for (int rank = 0; rank < 3; ++rank) {
            test::RankFileWriter w(
                dir.filePath(QStringLiteral("rank%1.h5").arg(rank, 5, 10, QLatin1Char('0'))), rank);
            QVERIFY(w.valid());
            const float values[4] = {1, 2, 3, 4};
            hid_t ds = w.dataset("a", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {4}, values);
            test::RankFileWriter::standardAttributes(ds, "layers.0.fc1.bias", "param", 0, "fp32",
                                                     {4});
            H5Dclose(ds);
            ds = w.dataset("b", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {4}, values);
            test::RankFileWriter::standardAttributes(ds, "layers.0.fc2.bias", "param", 1, "fp32",
                                                     {4});
            test::RankFileWriter::fixedString(ds, "placements", "{\"pp\": \"Replicate\"}");
            H5Dclose(ds);
        }
        for (const CacheUse use : {CacheUse::None, CacheUse::Filling, CacheUse::Reading}) {
            compareWithTraceSet(dir.path(), use);
        }
        QTemporaryDir cacheDir;
        QString error;
        auto cache = IndexCache::open(cacheDir.filePath(QStringLiteral("index.sqlite")), &error);
        QVERIFY2(cache, qPrintable(error));
        const TraceCatalog catalog = TraceCatalog::open(dir.path(), withCache(cache.get()));
        QCOMPARE(catalog.datasetCount(), std::int64_t{2});  // fc1.bias on ranks 0 and 1
        QCOMPARE(catalog.tensors().size(), std::size_t{1});
        const auto offMesh = std::count_if(
            catalog.diagnostics().begin(), catalog.diagnostics().end(), [](const Diagnostic& d) {
                return d.severity == Severity::Error && d.message.contains(QStringLiteral("'pp'"));
            });
        QCOMPARE(offMesh, 2);
    }

    // A rank file rewritten after it was cached is indexed again: its new records are read.
    void changedRankFileIsReadAgain() {
        QTemporaryDir dir;
        QVERIFY(test::copyFolder(test::fixture(QStringLiteral("combined"), QStringLiteral("dist")),
                                 dir.path()));
        QTemporaryDir cacheDir;
        QString error;
        auto cache = IndexCache::open(cacheDir.filePath(QStringLiteral("index.sqlite")), &error);
        QVERIFY2(cache, qPrintable(error));
        const TraceCatalog before = TraceCatalog::open(dir.path(), withCache(cache.get()));
        QVERIFY(before.usable());
        const QString rank5 = dir.filePath(QStringLiteral("rank00005.h5"));
        QVERIFY(QFile::remove(rank5));
        QVERIFY(QFile::copy(test::fixture(QStringLiteral("bug_shard"), QStringLiteral("dist")) +
                                QStringLiteral("/rank00005.h5"),
                            rank5));
        compareWithTraceSet(dir.path(), CacheUse::None);
        const TraceCatalog after = TraceCatalog::open(dir.path(), withCache(cache.get()));
        const TraceSet set = openTraceSet(dir.path());
        const auto tensors = byTensor(set);
        for (const auto& [key, records] : tensors) {
            const auto read = after.records(key);
            QVERIFY(read);
            QCOMPARE(recordTexts(*read), recordTexts(records));
        }
    }
};

QTEST_GUILESS_MAIN(TestTraceCatalog)
#include "test_trace_catalog.moc"
