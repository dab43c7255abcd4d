// openTraceSet on the real fixture trace sets: good sets index every dataset with its
// attributes; every bad input becomes a diagnostic naming the file, dataset and problem; the
// folder is never written; a cached re-open returns the same index without reading HDF5;
// openTraceSetTensor gives one tensor's part of it, cached or not.
#include <sys/stat.h>

#include <QDirIterator>
#include <QElapsedTimer>
#include <QFile>
#include <QScopeGuard>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <iterator>
#include <map>
#include <set>

#include "FolderCopy.h"
#include "Hdf5TestFiles.h"
#include "RecordText.h"
#include "TestPaths.h"
#include "store/IndexCache.h"
#include "trace/FileStamp.h"
#include "trace/Hdf5Reader.h"
#include "trace/IsolatedHdf5.h"
#include "trace/RankFileIndex.h"
#include "trace/TraceSet.h"

using namespace ttrace;
using test::recordTexts;

namespace {

QString fixture(const char* caseName, const char* role = nullptr) {
    return test::fixture(QString::fromLatin1(caseName),
                         role ? QString::fromLatin1(role) : QString());
}

QString dump(const Diagnostics& diagnostics) {
    QString text;
    for (const auto& d : diagnostics) {
        text += d.toString() + QLatin1Char('\n');
    }
    return text;
}

QStringList diagnosticTexts(const Diagnostics& diagnostics) {
    QStringList texts;
    for (const auto& d : diagnostics) {
        texts << d.toString() + QStringLiteral(" | tensor=") + d.tensor;
    }
    return texts;
}

// The first diagnostic of `severity` whose file ends with `fileSuffix` and whose text holds
// every one of `parts`.
const Diagnostic* find(const Diagnostics& diagnostics, Severity severity, const QString& fileSuffix,
                       const QStringList& parts) {
    for (const auto& d : diagnostics) {
        if (d.severity != severity || !d.file.endsWith(fileSuffix)) {
            continue;
        }
        const QString text = d.toString();
        if (std::all_of(parts.begin(), parts.end(),
                        [&text](const QString& p) { return text.contains(p); })) {
            return &d;
        }
    }
    return nullptr;
}

const TensorRecord* findRecord(const TraceSet& set, int rank, const QString& name, TensorKind kind,
                               int microBatch = -2) {
    for (const auto& r : set.records) {
        if (r.rank == rank && r.key.name == name && r.key.kind == kind &&
            (microBatch == -2 || r.key.microBatch == microBatch)) {
            return &r;
        }
    }
    return nullptr;
}

std::vector<IndexRange> ranges(std::initializer_list<std::pair<std::int64_t, std::int64_t>> list) {
    std::vector<IndexRange> out;
    for (const auto& [start, stop] : list) {
        out.push_back({start, stop});
    }
    return out;
}

// path -> (size, mtime in ns) of every file under `root`.
std::map<QString, std::pair<qint64, qint64>> snapshot(const QString& root) {
    std::map<QString, std::pair<qint64, qint64>> files;
    QDirIterator it(root, QDir::Files | QDir::Hidden | QDir::System, QDirIterator::Subdirectories);
    while (it.hasNext()) {
        const QString path = it.next();
        const auto time = std::filesystem::last_write_time(path.toStdString());
        files[path] = {it.fileInfo().size(),
                       static_cast<qint64>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                               time.time_since_epoch())
                                               .count())};
    }
    return files;
}

// A copy of a fixture trace folder with an index cache of its own, for tests that change rank
// files and watch what the cache serves.
struct CachedCopy {
    QTemporaryDir traceDir;
    QTemporaryDir cacheDir;
    std::unique_ptr<IndexCache> cache;
    OpenOptions options;  // reading and filling `cache`
    QString error;

    bool make(const QString& folder) {
        if (!test::copyFolder(folder, traceDir.path())) {
            error = QStringLiteral("cannot copy ") + folder;
            return false;
        }
        cache = IndexCache::open(cacheDir.filePath(QStringLiteral("index.sqlite")), &error);
        options.cache = cache.get();
        return cache != nullptr;
    }
};

// Overwrites `file` with garbage of the same size and gives it back its modification time:
// only an open that reads the index cache, not HDF5, still sees its tensors.
bool overwriteKeepingStamp(const QString& file) {
    const std::filesystem::path path = file.toStdString();
    const auto mtime = std::filesystem::last_write_time(path);
    {
        QFile f(file);
        if (!f.open(QIODevice::ReadWrite) ||
            f.write(QByteArray(static_cast<qsizetype>(f.size()), 'x')) != f.size()) {
            return false;
        }
    }
    std::filesystem::last_write_time(path, mtime);
    return true;
}

// The records of `key` in `set`, in their order.
std::vector<TensorRecord> recordsOf(const TraceSet& set, const TensorKey& key) {
    std::vector<TensorRecord> records;
    std::copy_if(set.records.begin(), set.records.end(), std::back_inserter(records),
                 [&key](const TensorRecord& r) { return r.key == key; });
    return records;
}

Diagnostics diagnosticsAbout(const Diagnostics& diagnostics, const TensorKey& key) {
    Diagnostics kept;
    std::copy_if(diagnostics.begin(), diagnostics.end(), std::back_inserter(kept),
                 [&key](const Diagnostic& d) { return concernsTensor(d, key); });
    return kept;
}

// Every key of the set's records, once each, in the order of the records.
std::vector<TensorKey> keysOf(const TraceSet& set) {
    std::vector<TensorKey> keys;
    for (const auto& r : set.records) {
        if (std::find(keys.begin(), keys.end(), r.key) == keys.end()) {
            keys.push_back(r.key);
        }
    }
    return keys;
}

const char* const kGoodCases[] = {"tp_column",     "tp_row",    "tp_strided", "sp",
                                  "cp_zigzag",     "pp_vpp",    "ep",         "combined",
                                  "dp_microbatch", "bug_shard", "bug_replica"};

}  // namespace

class TestTraceSet : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() {
        QVERIFY2(QFileInfo(fixture("tp_column", "dist")).isDir(),
                 "fixtures missing: run make_fixtures.py (CTest fixture 'traces')");
    }

    void goodSetsOpenCleanly_data() {
        QTest::addColumn<QString>("folder");
        for (const char* name : kGoodCases) {
            for (const char* role : {"dist", "ref", "pert"}) {
                QTest::newRow(qPrintable(
                    QStringLiteral("%1/%2").arg(QLatin1String(name), QLatin1String(role))))
                    << fixture(name, role);
            }
        }
    }
    void goodSetsOpenCleanly() {
        QFETCH(QString, folder);
        const TraceSet set = openTraceSet(folder);
        QVERIFY2(set.diagnostics.empty(), qPrintable(dump(set.diagnostics)));
        QVERIFY(set.usable());
        QCOMPARE(set.folder, QDir(folder).absolutePath());
        QVERIFY(!set.records.empty());
        for (std::size_t i = 0; i < set.records.size(); ++i) {
            const auto& r = set.records[i];
            if (i > 0) {
                const auto& p = set.records[i - 1];
                QVERIFY2(p.rank < r.rank || (p.rank == r.rank && p.seq < r.seq),
                         "records are ordered by (rank, seq)");
            }
            QVERIFY(QFileInfo(r.file).isAbsolute());
            QVERIFY(QFileInfo::exists(r.file));
            QVERIFY(r.dataset.startsWith(QStringLiteral("/tensors/")));
            QCOMPARE(r.ranges.localShape(), r.localShape);
            QCOMPARE(r.ranges.dims.size(), r.globalShape.size());
            QCOMPARE(r.coords, set.manifest.ranks[static_cast<std::size_t>(r.rank)].coords);
            if (set.manifest.role != RunRole::Distributed) {
                QCOMPARE(r.rank, 0);
                QVERIFY(r.placements.empty());
                QCOMPARE(r.ranges, ShardRanges::whole(r.globalShape));
            }
        }
    }

    void tpColumnRecords() {
        const TraceSet set = openTraceSet(fixture("tp_column", "dist"));
        QVERIFY2(set.diagnostics.empty(), qPrintable(dump(set.diagnostics)));
        QCOMPARE(set.records.size(), std::size_t{12});
        const std::pair<const char*, TensorKind> order[] = {
            {"layers.0.fc1", TensorKind::ForwardInput},
            {"layers.0.fc1.weight", TensorKind::Param},
            {"layers.0.fc1", TensorKind::ForwardOutput},
            {"layers.0.fc1", TensorKind::OutputGrad},
            {"layers.0.fc1", TensorKind::InputGrad},
            {"layers.0.fc1.weight", TensorKind::ParamGrad}};
        for (int rank = 0; rank < 2; ++rank) {
            for (std::size_t i = 0; i < 6; ++i) {
                const auto& r = set.records[static_cast<std::size_t>(rank) * 6 + i];
                QCOMPARE(r.rank, rank);
                QCOMPARE(r.seq, static_cast<std::int64_t>(i));
                QCOMPARE(r.key.name, QString::fromLatin1(order[i].first));
                QCOMPARE(r.key.kind, order[i].second);
                QCOMPARE(r.layer, 0);
                QCOMPARE(r.expert, -1);
                QCOMPARE(r.dtype, DType::F32);
                QCOMPARE(r.coords, std::vector<int>{rank});
                QCOMPARE(r.file,
                         QDir(fixture("tp_column", "dist"))
                             .absoluteFilePath(
                                 QStringLiteral("rank%1.h5").arg(rank, 5, 10, QLatin1Char('0'))));
            }
        }
        const auto* weight =
            findRecord(set, 1, QStringLiteral("layers.0.fc1.weight"), TensorKind::Param);
        QVERIFY(weight);
        QCOMPARE(weight->dataset, QStringLiteral("/tensors/000001"));
        QCOMPARE(weight->key.microBatch, -1);
        QCOMPARE(weight->globalShape, (std::vector<std::int64_t>{16, 8}));
        QCOMPARE(weight->localShape, (std::vector<std::int64_t>{8, 8}));
        QCOMPARE(weight->ranges.dims[0], ranges({{8, 16}}));
        QCOMPARE(weight->ranges.dims[1], ranges({{0, 8}}));
        QCOMPARE(weight->placements.size(), std::size_t{1});
        QCOMPARE(weight->placements[0].axis, QStringLiteral("tp"));
        QCOMPARE(weight->placements[0].placement, (Placement{Placement::Type::Shard, 0}));

        const auto* output =
            findRecord(set, 0, QStringLiteral("layers.0.fc1"), TensorKind::ForwardOutput);
        QVERIFY(output);
        QCOMPARE(output->key.microBatch, 0);
        QCOMPARE(output->globalShape, (std::vector<std::int64_t>{4, 16}));
        QCOMPARE(output->ranges.dims[1], ranges({{0, 8}}));
        QCOMPARE(output->placements[0].placement, (Placement{Placement::Type::Shard, 1}));

        const auto* input =
            findRecord(set, 1, QStringLiteral("layers.0.fc1"), TensorKind::ForwardInput);
        QVERIFY(input);
        QCOMPARE(input->ranges, ShardRanges::whole({4, 8}));
        QCOMPARE(input->placements[0].placement, (Placement{Placement::Type::Replicate, -1}));
    }

    void cpZigzagRanges() {
        const TraceSet set = openTraceSet(fixture("cp_zigzag", "dist"));
        QVERIFY2(set.diagnostics.empty(), qPrintable(dump(set.diagnostics)));
        for (const auto kind : {TensorKind::ForwardOutput, TensorKind::InputGrad}) {
            const auto* r0 = findRecord(set, 0, QStringLiteral("layers.0.attn"), kind);
            const auto* r1 = findRecord(set, 1, QStringLiteral("layers.0.attn"), kind);
            QVERIFY(r0 && r1);
            QCOMPARE(r0->globalShape, (std::vector<std::int64_t>{2, 16, 8}));
            QCOMPARE(r0->localShape, (std::vector<std::int64_t>{2, 8, 8}));
            QCOMPARE(r0->ranges.dims[1], ranges({{0, 4}, {12, 16}}));
            QCOMPARE(r1->ranges.dims[1], ranges({{4, 8}, {8, 12}}));
            QCOMPARE(r0->placements[0].axis, QStringLiteral("cp"));
        }
    }

    void tpStridedRanges() {
        const TraceSet set = openTraceSet(fixture("tp_strided", "dist"));
        QVERIFY2(set.diagnostics.empty(), qPrintable(dump(set.diagnostics)));
        for (int r = 0; r < 2; ++r) {
            const auto* w =
                findRecord(set, r, QStringLiteral("layers.0.qkv.weight"), TensorKind::Param);
            QVERIFY(w);
            QCOMPARE(
                w->ranges.dims[0],
                ranges({{4 * r, 4 * r + 4}, {8 + 4 * r, 12 + 4 * r}, {16 + 4 * r, 20 + 4 * r}}));
            QCOMPARE(w->localShape, (std::vector<std::int64_t>{12, 8}));
        }
    }

    void combinedBf16AndCoordinates() {
        const TraceSet set = openTraceSet(fixture("combined", "dist"));
        QVERIFY2(set.diagnostics.empty(), qPrintable(dump(set.diagnostics)));
        std::set<int> ranksSeen;
        for (const auto& r : set.records) {
            ranksSeen.insert(r.rank);
            QCOMPARE(r.dtype, DType::BF16);
            QCOMPARE(r.coords.size(), std::size_t{3});
            QCOMPARE(r.coords[0] * 4 + r.coords[1] * 2 + r.coords[2], r.rank);
            QCOMPARE(r.layer, r.coords[0]);  // stage p owns layer p
        }
        QCOMPARE(ranksSeen.size(), std::size_t{8});
        const auto* out =
            findRecord(set, 5, QStringLiteral("layers.1.fc1"), TensorKind::ForwardOutput, 1);
        QVERIFY(out);
        QCOMPARE(out->placements.size(), std::size_t{2});
        QCOMPARE(out->storedBytes(), qint64{4 * 32 * 2});
    }

    void expertAndPipelineNumbers() {
        const TraceSet ep = openTraceSet(fixture("ep", "dist"));
        QVERIFY2(ep.diagnostics.empty(), qPrintable(dump(ep.diagnostics)));
        for (int e = 0; e < 4; ++e) {
            const auto* r =
                findRecord(ep, e / 2, QStringLiteral("layers.0.mlp.experts.%1.fc1").arg(e),
                           TensorKind::ForwardOutput);
            QVERIFY(r);
            QCOMPARE(r->expert, e);
        }
        const TraceSet pp = openTraceSet(fixture("pp_vpp", "dist"));
        QVERIFY2(pp.diagnostics.empty(), qPrintable(dump(pp.diagnostics)));
        for (int l = 0; l < 4; ++l) {
            const auto* r = findRecord(pp, l % 2, QStringLiteral("layers.%1.mlp").arg(l),
                                       TensorKind::ForwardOutput);
            QVERIFY(r);
            QCOMPARE(r->layer, l);
        }
    }

    void missingRankFile() {
        const TraceSet set = openTraceSet(fixture("bad/missing_rank"));
        QVERIFY2(find(set.diagnostics, Severity::Error, QStringLiteral("rank00001.h5"),
                      {QStringLiteral("rank 1"), QStringLiteral("rank00001.h5"),
                       QStringLiteral("missing")}),
                 qPrintable(dump(set.diagnostics)));
        QVERIFY(set.usable());  // rank 0 is still indexed
        QCOMPARE(set.records.size(), std::size_t{6});
    }

    void extraRankInManifest() {
        const TraceSet set = openTraceSet(fixture("bad/extra_rank"));
        QVERIFY2(find(set.diagnostics, Severity::Error, QStringLiteral("manifest.json"),
                      {QStringLiteral("rank 2"), QStringLiteral("world_size 2")}),
                 qPrintable(dump(set.diagnostics)));
        // rank00002.h5 exists but the manifest's entry for it is invalid: it is not indexed.
        QVERIFY2(find(set.diagnostics, Severity::Warning, QStringLiteral("rank00002.h5"),
                      {QStringLiteral("not listed")}),
                 qPrintable(dump(set.diagnostics)));
        for (const auto& r : set.records) {
            QVERIFY(r.rank < 2);
        }
    }

    void rankAttributeMismatch() {
        const TraceSet set = openTraceSet(fixture("bad/rank_mismatch"));
        const auto* d = find(set.diagnostics, Severity::Error, QStringLiteral("rank00001.h5"),
                             {QStringLiteral("'rank' is 0"), QStringLiteral("rank 1")});
        QVERIFY2(d, qPrintable(dump(set.diagnostics)));
        for (const auto& r : set.records) {
            QCOMPARE(r.rank, 0);  // the mismatched file's tensors are not trusted
        }
    }

    void gapAndOverlapAreIndexedAsWritten() {
        // Tiling is checked by the canonical mapping; the index must carry the ranges as written.
        const TraceSet gap = openTraceSet(fixture("bad/gap"));
        QVERIFY2(!hasErrors(gap.diagnostics), qPrintable(dump(gap.diagnostics)));
        const auto* g =
            findRecord(gap, 1, QStringLiteral("layers.0.fc1"), TensorKind::ForwardOutput);
        QVERIFY(g);
        QCOMPARE(g->ranges.dims[1], ranges({{9, 16}}));
        const TraceSet overlap = openTraceSet(fixture("bad/overlap"));
        QVERIFY2(!hasErrors(overlap.diagnostics), qPrintable(dump(overlap.diagnostics)));
        const auto* o =
            findRecord(overlap, 1, QStringLiteral("layers.0.fc1.weight"), TensorKind::Param);
        QVERIFY(o);
        QCOMPARE(o->ranges.dims[0], ranges({{6, 14}}));
    }

    void shapeMismatch() {
        const TraceSet set = openTraceSet(fixture("bad/shape_mismatch"));
        const auto* d = find(set.diagnostics, Severity::Error, QStringLiteral("rank00001.h5"),
                             {QStringLiteral("local shape [4, 6]"), QStringLiteral("[0:4][8:16]")});
        QVERIFY2(d, qPrintable(dump(set.diagnostics)));
        QVERIFY(d->dataset.startsWith(QStringLiteral("/tensors/")));
        QVERIFY(d->tensor.contains(QStringLiteral("layers.0.fc1 forward_output")));
        QVERIFY(!findRecord(set, 1, QStringLiteral("layers.0.fc1"), TensorKind::ForwardOutput));
        QCOMPARE(set.records.size(), std::size_t{11});
    }

    void truncatedAndCorruptFiles_data() {
        QTest::addColumn<QString>("folder");
        QTest::addColumn<QString>("reason");  // HDF5's own words
        QTest::newRow("truncated") << fixture("bad/truncated") << QStringLiteral("truncated file");
        QTest::newRow("corrupt") << fixture("bad/corrupt") << QStringLiteral("signature not found");
    }
    void truncatedAndCorruptFiles() {
        QFETCH(QString, folder);
        QFETCH(QString, reason);
        const TraceSet set = openTraceSet(folder);
        // The message says what is wrong in the trace's terms; libhdf5's words are the
        // details, not the message.
        const auto d = find(set.diagnostics, Severity::Error, QStringLiteral("/rank00001.h5"),
                            {QStringLiteral("is not a readable HDF5 file")});
        QVERIFY2(d, qPrintable(dump(set.diagnostics)));
        QVERIFY2(!d->message.contains(reason), qPrintable(d->message));
        QVERIFY2(d->details.contains(reason), qPrintable(d->details));
        QVERIFY(set.usable());
        QCOMPARE(set.records.size(), std::size_t{6});  // rank 0 is still indexed
    }

    void unusableManifests_data() {
        QTest::addColumn<QString>("folder");
        QTest::addColumn<QString>("expected");
        QTest::newRow("newer_version") << fixture("bad/newer_version")
                                       << QStringLiteral(
                                              "trace format 2.0 is newer than this "
                                              "ttrace supports (1.x)");
        QTest::newRow("manifest_syntax")
            << fixture("bad/manifest_syntax") << QStringLiteral("not valid JSON");
        QTest::newRow("no_manifest")
            << fixture("bad/no_manifest") << QStringLiteral("manifest.json is missing");
    }
    void unusableManifests() {
        QFETCH(QString, folder);
        QFETCH(QString, expected);
        const TraceSet set = openTraceSet(folder);
        QVERIFY(!set.usable());
        QVERIFY(set.records.empty());
        QVERIFY2(
            find(set.diagnostics, Severity::Error, QStringLiteral("manifest.json"), {expected}),
            qPrintable(dump(set.diagnostics)));
    }

    void notAFolder() {
        const TraceSet set = openTraceSet(fixture("does_not_exist"));
        QVERIFY(!set.usable());
        QVERIFY2(find(set.diagnostics, Severity::Error, QStringLiteral("does_not_exist"),
                      {QStringLiteral("does not exist")}),
                 qPrintable(dump(set.diagnostics)));
        const TraceSet file = openTraceSet(fixture("tp_column/dist/rank00000.h5"));
        QVERIFY2(find(file.diagnostics, Severity::Error, QStringLiteral("rank00000.h5"),
                      {QStringLiteral("is not a folder")}),
                 qPrintable(dump(file.diagnostics)));
    }

    // What stands where a rank file should be is named for what it is, not "missing"; a FIFO
    // is never opened (HDF5 would wait on it forever).
    void notARankFile_data() {
        QTest::addColumn<QString>("kind");
        QTest::addColumn<QString>("expected");
        QTest::newRow("directory") << "directory"
                                   << "is a directory, not a rank file";
        QTest::newRow("fifo") << "fifo"
                              << "is a FIFO (named pipe), not a rank file";
        QTest::newRow("symlink loop") << "loop"
                                      << "is a loop of symbolic links";
        QTest::newRow("dangling symlink") << "dangling"
                                          << "which does not exist";
        QTest::newRow("missing") << "missing"
                                 << "is missing";
    }

    void notARankFile() {
        QFETCH(QString, kind);
        QFETCH(QString, expected);
        QTemporaryDir dir;
        const QString folder = dir.filePath(QStringLiteral("dist"));
        QVERIFY(QDir().mkpath(folder) && test::copyFolder(fixture("tp_column/dist"), folder));
        const QString rank1 = folder + QStringLiteral("/rank00001.h5");
        QVERIFY(QFile::remove(rank1));
        const QByteArray path = QFile::encodeName(rank1);
        if (kind == QStringLiteral("directory")) {
            QVERIFY(QDir().mkdir(rank1));
        } else if (kind == QStringLiteral("fifo")) {
            QCOMPARE(::mkfifo(path.constData(), 0600), 0);
        } else if (kind == QStringLiteral("loop")) {
            const QString other = folder + QStringLiteral("/other.h5");
            QVERIFY(QFile::link(other, rank1));
            QVERIFY(QFile::link(rank1, other));
        } else if (kind == QStringLiteral("dangling")) {
            QVERIFY(QFile::link(folder + QStringLiteral("/gone.h5"), rank1));
        }
        QElapsedTimer timer;
        timer.start();
        const TraceSet set = openTraceSet(folder);
        QVERIFY(timer.elapsed() < 30000);
        QVERIFY2(find(set.diagnostics, Severity::Error, QStringLiteral("rank00001.h5"),
                      {QStringLiteral("rank 1: file rank00001.h5 "), expected}),
                 qPrintable(dump(set.diagnostics)));
        QVERIFY(set.usable());  // rank 0 is still indexed
    }

    void dtypeStorageMismatch() {
        const TraceSet set = openTraceSet(fixture("bad/dtype_storage"));
        const auto* d = find(set.diagnostics, Severity::Error, QStringLiteral("rank00000.h5"),
                             {QStringLiteral("dtype bf16"), QStringLiteral("32-bit floats")});
        QVERIFY2(d, qPrintable(dump(set.diagnostics)));
        QVERIFY(!d->dataset.isEmpty());
        QVERIFY(!findRecord(set, 0, QStringLiteral("layers.0.fc1"), TensorKind::ForwardOutput));
    }

    void missingAndInvalidAttributes() {
        const TraceSet set = openTraceSet(fixture("bad/missing_attr"));
        const auto* kind = find(set.diagnostics, Severity::Error, QStringLiteral("rank00000.h5"),
                                {QStringLiteral("attribute 'kind' is missing")});
        QVERIFY2(kind, qPrintable(dump(set.diagnostics)));
        QCOMPARE(kind->dataset, QStringLiteral("/tensors/000001"));
        const auto* range = find(set.diagnostics, Severity::Error, QStringLiteral("rank00001.h5"),
                                 {QStringLiteral("attribute 'ranges'"), QStringLiteral("[[0,4"),
                                  QStringLiteral("not valid JSON")});
        QVERIFY2(range, qPrintable(dump(set.diagnostics)));
        QCOMPARE(range->dataset, QStringLiteral("/tensors/000002"));
        QVERIFY(range->tensor.contains(QStringLiteral("layers.0.fc1 forward_output")));
        QCOMPARE(set.records.size(), std::size_t{10});
    }

    void valueProblemsAreLeftToTheComparison_data() {
        QTest::addColumn<QString>("folder");
        QTest::newRow("nan") << fixture("bad/nan");
        QTest::newRow("dtype_mixed") << fixture("bad/dtype_mixed");
        QTest::newRow("ref_missing_tensor") << fixture("bad/ref_missing_tensor");
        QTest::newRow("ref") << fixture("bad/ref");
    }
    void valueProblemsAreLeftToTheComparison() {
        QFETCH(QString, folder);
        const TraceSet set = openTraceSet(folder);
        QVERIFY2(set.diagnostics.empty(), qPrintable(dump(set.diagnostics)));
        QVERIFY(set.usable());
    }

    void mixedDtypesAreIndexedPerRank() {
        const TraceSet set = openTraceSet(fixture("bad/dtype_mixed"));
        const auto* r0 =
            findRecord(set, 0, QStringLiteral("layers.0.fc1"), TensorKind::ForwardOutput);
        const auto* r1 =
            findRecord(set, 1, QStringLiteral("layers.0.fc1"), TensorKind::ForwardOutput);
        QVERIFY(r0 && r1);
        QCOMPARE(r0->dtype, DType::F32);
        QCOMPARE(r1->dtype, DType::BF16);
    }

    void extraRankFileWarns() {
        QTemporaryDir dir;
        QVERIFY(test::copyFolder(fixture("tp_column", "dist"), dir.path()));
        QVERIFY(QFile::copy(dir.filePath(QStringLiteral("rank00001.h5")),
                            dir.filePath(QStringLiteral("rank00007.h5"))));
        const TraceSet set = openTraceSet(dir.path());
        QVERIFY2(find(set.diagnostics, Severity::Warning, QStringLiteral("rank00007.h5"),
                      {QStringLiteral("not listed in manifest.json")}),
                 qPrintable(dump(set.diagnostics)));
        QVERIFY(!hasErrors(set.diagnostics));
        QCOMPARE(set.records.size(), std::size_t{12});
    }

    // Variations h5py does not write but other HDF5 writers may: fixed-length space-padded
    // strings, 32-bit integers, fp8 and fp16 words; and problems only a hand-made file has.
    void handWrittenRankFiles() {
        QTemporaryDir dir;
        QVERIFY(test::writeManifest(dir.path(), 2, QStringLiteral("tp")));
        for (int rank = 0; rank < 2; ++rank) {
            test::RankFileWriter w(
                dir.filePath(QStringLiteral("rank%1.h5").arg(rank, 5, 10, QLatin1Char('0'))), rank);
            QVERIFY(w.valid());
            const std::uint8_t fp8[6] = {0x38, 0x40, 0x44, 0xb8, 0x00, 0x48};
            hid_t ds = w.dataset("a", H5T_STD_U8LE, H5T_NATIVE_UINT8, {2, 3}, fp8);
            test::RankFileWriter::standardAttributes(ds, "layers.0.fc1", "forward_output", 0,
                                                     "fp8_e4m3", {2, 6});
            test::RankFileWriter::float64(ds, "scale_inv", 0.5);
            test::RankFileWriter::variableString(
                ds, "ranges", rank == 0 ? "[[[0,2]],[[0,3]]]" : "[[[0,2]],[[3,6]]]");
            test::RankFileWriter::fixedString(ds, "placements", "{\"tp\": \"Shard(1)\"}");
            H5Dclose(ds);

            const std::uint16_t half[4] = {0x3c00, 0x4000, 0xc000, 0x0000};
            ds = w.dataset("b", H5T_STD_U16LE, H5T_NATIVE_UINT16, {4}, half);
            test::RankFileWriter::standardAttributes(ds, "layers.0.fc1.bias", "param", 1, "fp16",
                                                     {4});
            H5Dclose(ds);
            if (rank == 1) {
                continue;
            }
            const float values[4] = {1, 2, 3, 4};
            // Same seq as "b": execution order is ambiguous.
            ds = w.dataset("c", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {4}, values);
            test::RankFileWriter::standardAttributes(ds, "layers.0.fc2.bias", "param", 1, "fp32",
                                                     {4});
            H5Dclose(ds);
            // A placement on an axis the mesh does not have.
            ds = w.dataset("d", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {4}, values);
            test::RankFileWriter::standardAttributes(ds, "layers.0.fc3.bias", "param", 2, "fp32",
                                                     {4});
            test::RankFileWriter::fixedString(ds, "placements", "{\"pp\": \"Replicate\"}");
            H5Dclose(ds);
            // fp8 without its scale.
            ds = w.dataset("e", H5T_STD_U8LE, H5T_NATIVE_UINT8, {2, 3}, fp8);
            test::RankFileWriter::standardAttributes(ds, "layers.0.fc4", "forward_output", 3,
                                                     "fp8_e5m2", {2, 3});
            H5Dclose(ds);
            // Signed words for a bf16 tensor, and an unknown kind.
            const std::int16_t words[4] = {0, 0, 0, 0};
            ds = w.dataset("f", H5T_STD_I16LE, H5T_NATIVE_INT16, {4}, words);
            test::RankFileWriter::standardAttributes(ds, "layers.0.fc5", "activation", 4, "bf16",
                                                     {4});
            H5Dclose(ds);
        }
        const TraceSet set = openTraceSet(dir.path());
        const QString ds = QStringLiteral("/tensors/");

        const auto* a0 =
            findRecord(set, 0, QStringLiteral("layers.0.fc1"), TensorKind::ForwardOutput);
        const auto* a1 =
            findRecord(set, 1, QStringLiteral("layers.0.fc1"), TensorKind::ForwardOutput);
        QVERIFY2(a0 && a1, qPrintable(dump(set.diagnostics)));
        QCOMPARE(a0->dtype, DType::FP8E4M3);
        QCOMPARE(a0->scales.scaleInv, std::vector<double>{0.5});
        QCOMPARE(a1->ranges.dims[1], ranges({{3, 6}}));
        QCOMPARE(a0->placements[0].placement, (Placement{Placement::Type::Shard, 1}));
        QCOMPARE(a0->key.name, QStringLiteral("layers.0.fc1"));  // padding trimmed
        const auto* b = findRecord(set, 0, QStringLiteral("layers.0.fc1.bias"), TensorKind::Param);
        QVERIFY(b);
        QCOMPARE(b->dtype, DType::F16);
        QCOMPARE(b->key.microBatch, -1);

        QVERIFY2(find(set.diagnostics, Severity::Warning, QStringLiteral("rank00000.h5"),
                      {QStringLiteral("seq 1 is used by both")}),
                 qPrintable(dump(set.diagnostics)));
        QVERIFY(findRecord(set, 0, QStringLiteral("layers.0.fc2.bias"), TensorKind::Param));
        const auto* axis = find(set.diagnostics, Severity::Error, QStringLiteral("rank00000.h5"),
                                {QStringLiteral("'pp'"), QStringLiteral("not an axis")});
        QVERIFY2(axis, qPrintable(dump(set.diagnostics)));
        QCOMPARE(axis->dataset, ds + QStringLiteral("d"));
        QVERIFY(!findRecord(set, 0, QStringLiteral("layers.0.fc3.bias"), TensorKind::Param));
        QVERIFY2(find(set.diagnostics, Severity::Error, QStringLiteral("rank00000.h5"),
                      {QStringLiteral("attribute 'scale_inv' is missing (required for fp8)")}),
                 qPrintable(dump(set.diagnostics)));
        QVERIFY2(find(set.diagnostics, Severity::Error, QStringLiteral("rank00000.h5"),
                      {QStringLiteral("attribute 'kind' is 'activation'")}),
                 qPrintable(dump(set.diagnostics)));
        QVERIFY2(find(set.diagnostics, Severity::Error, QStringLiteral("rank00000.h5"),
                      {QStringLiteral("dtype bf16"), QStringLiteral("16-bit signed integers")}),
                 qPrintable(dump(set.diagnostics)));
        QCOMPARE(set.records.size(), std::size_t{5});  // a, b on both ranks and c
    }

    // A rank file's format_version is held to the manifest's rule: MAJOR.MINOR of the major
    // this ttrace reads; anything else refuses the file, saying which.
    void rankFileFormatVersions() {
        for (const auto& [version, words] : std::vector<std::pair<QByteArray, QStringList>>{
                 {"2.0",
                  {QStringLiteral("rank file format 2.0 is not supported by this ttrace "
                                  "(1.x)")}},
                 {"1.x",
                  {QStringLiteral("file attribute 'format_version' is '1.x', not a "
                                  "version of the form MAJOR.MINOR")}},
                 {"one", {QStringLiteral("'one', not a version")}}}) {
            QTemporaryDir dir;
            QVERIFY(test::writeManifest(dir.path(), 1, QStringLiteral("tp")));
            {
                test::RankFileWriter w(dir.filePath(QStringLiteral("rank00000.h5")), 0);
                QVERIFY(w.valid());
                H5Adelete(w.file(), "format_version");
                test::RankFileWriter::fixedString(w.file(), "format_version", version);
            }
            const TraceSet set = openTraceSet(dir.path());
            QVERIFY2(find(set.diagnostics, Severity::Error, QStringLiteral("rank00000.h5"), words),
                     qPrintable(QString::fromLatin1(version) + QStringLiteral(": ") +
                                dump(set.diagnostics)));
        }
    }

    // Nothing outside a trace folder is read. A rank file whose datasets point at other files
    // (external storage, an external link, a soft link through one, a virtual dataset, a
    // /tensors group that is an external link) is refused where it does so, naming the file,
    // the dataset and the target; every target here is a FIFO outside the trace folder, which
    // HDF5 would wait on forever if it opened it, so a test that opened one would hang.
    void nothingOutsideTheFolderIsRead() {
        QTemporaryDir dir;
        const QString folder = dir.filePath(QStringLiteral("trace"));
        const QString outside = dir.filePath(QStringLiteral("outside"));
        QVERIFY(QDir().mkpath(folder) && QDir().mkpath(outside));
        QVERIFY(test::writeManifest(folder, 2, QStringLiteral("tp")));
        const auto fifo = [&](const char* name) {
            const QString path = outside + QLatin1Char('/') + QLatin1String(name);
            return ::mkfifo(QFile::encodeName(path).constData(), 0600) == 0 ? path : QString();
        };
        const QString storage = fifo("storage.bin"), linked = fifo("linked.h5"),
                      source = fifo("source.h5"), group = fifo("group.h5");
        QVERIFY(!storage.isEmpty() && !linked.isEmpty() && !source.isEmpty() && !group.isEmpty());
        const QString rank0 = folder + QStringLiteral("/rank00000.h5");
        const QString rank1 = folder + QStringLiteral("/rank00001.h5");
        const float values[4] = {1, 2, 3, 4};
        const auto attributes = [](hid_t ds, const QByteArray& name, int seq) {
            test::RankFileWriter::standardAttributes(ds, name, "param", seq, "fp32", {4});
            test::RankFileWriter::fixedString(ds, "placements", "{\"tp\": \"Replicate\"}");
            H5Dclose(ds);
        };
        const hsize_t four = 4;
        {
            test::RankFileWriter w(rank0, 0);
            QVERIFY(w.valid());
            attributes(w.dataset("good", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {4}, values), "good", 0);
            const hid_t external = H5Pcreate(H5P_DATASET_CREATE);
            QVERIFY(H5Pset_external(external, QFile::encodeName(storage).constData(), 0, 16) >= 0);
            attributes(
                w.dataset("external", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {4}, nullptr, external),
                "external", 1);
            H5Pclose(external);
            const hid_t virtualPlist = H5Pcreate(H5P_DATASET_CREATE);
            const hid_t space = H5Screate_simple(1, &four, nullptr);
            QVERIFY(H5Pset_virtual(virtualPlist, space, QFile::encodeName(source).constData(),
                                   "/data", space) >= 0);
            attributes(
                w.dataset("virtual", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {4}, nullptr, virtualPlist),
                "virtual", 2);
            H5Sclose(space);
            H5Pclose(virtualPlist);
        }
        {
            // Links are added to the written file: an external link in /tensors, and a soft
            // link in /tensors whose path goes through an external link at the root.
            const hid_t file =
                H5Fopen(QFile::encodeName(rank0).constData(), H5F_ACC_RDWR, H5P_DEFAULT);
            QVERIFY(file >= 0);
            QVERIFY(H5Lcreate_external(QFile::encodeName(linked).constData(), "/tensors/w", file,
                                       "tensors/linked", H5P_DEFAULT, H5P_DEFAULT) >= 0);
            QVERIFY(H5Lcreate_external(QFile::encodeName(linked).constData(), "/elsewhere", file,
                                       "elsewhere", H5P_DEFAULT, H5P_DEFAULT) >= 0);
            QVERIFY(H5Lcreate_soft("/elsewhere/w", file, "tensors/soft", H5P_DEFAULT,
                                   H5P_DEFAULT) >= 0);
            H5Fclose(file);
        }
        {
            // Rank 1: its /tensors group is itself an external link.
            const hid_t file = H5Fcreate(QFile::encodeName(rank1).constData(), H5F_ACC_TRUNC,
                                         H5P_DEFAULT, H5P_DEFAULT);
            QVERIFY(file >= 0);
            test::RankFileWriter::fixedString(file, "format_version", "1.0");
            test::RankFileWriter::int32(file, "rank", 1);
            QVERIFY(H5Lcreate_external(QFile::encodeName(group).constData(), "/tensors", file,
                                       "tensors", H5P_DEFAULT, H5P_DEFAULT) >= 0);
            H5Fclose(file);
        }

        QElapsedTimer timer;
        timer.start();
        const TraceSet set = openTraceSet(folder);
        QVERIFY(timer.elapsed() < 30000);
        const auto errorAt = [&](const QString& file, const QString& dataset) {
            QStringList messages;
            for (const auto& d : set.diagnostics) {
                if (d.severity == Severity::Error && d.file == file && d.dataset == dataset) {
                    messages << d.tensor + QStringLiteral(" | ") + d.message;
                }
            }
            return messages;
        };
        const QString why = QStringLiteral(
            "a rank file must hold its tensors' data itself, and nothing outside a trace folder "
            "is read");
        QCOMPARE(errorAt(rank0, QStringLiteral("/tensors/external")),
                 QStringList{QStringLiteral("external param it0 | keeps its data outside this "
                                            "rank file, in the file %1 (HDF5 external storage): "
                                            "%2; it was not opened")
                                 .arg(storage, why)});
        QCOMPARE(errorAt(rank0, QStringLiteral("/tensors/virtual")),
                 QStringList{QStringLiteral("virtual param it0 | is a virtual dataset, a view "
                                            "of /data in the file %1, not data of its own: %2; "
                                            "its sources were not opened")
                                 .arg(source, why)});
        QCOMPARE(errorAt(rank0, QStringLiteral("/tensors/linked")),
                 QStringList{QStringLiteral(" | is an external link to /tensors/w in the file %1, "
                                            "outside this rank file: %2; the link was not "
                                            "followed")
                                 .arg(linked, why)});
        QCOMPARE(errorAt(rank0, QStringLiteral("/tensors/soft")),
                 QStringList{QStringLiteral(" | leads out of this rank file through an external "
                                            "link to /elsewhere in the file %1: %2; the link was "
                                            "not followed")
                                 .arg(linked, why)});
        QCOMPARE(errorAt(rank1, QString()),
                 QStringList{QStringLiteral(" | /tensors is an external link to /tensors in the "
                                            "file %1, outside this rank file: %2; the link was not "
                                            "followed")
                                 .arg(group, why)});
        // The rest of the file is read; nothing refused has a record.
        QCOMPARE(set.records.size(), std::size_t{1});
        QCOMPARE(set.records.front().dataset, QStringLiteral("/tensors/good"));
    }

    // What a symbolic link may point to (checker.md, "What a trace folder is"): a trace folder
    // or a rank file that is a link is followed wherever it points, like any path the user
    // names; only the kind of its target is checked (notARankFile). Unlike the links inside a
    // rank file, which the file's contents choose and which are never followed.
    void symlinkedFolderAndRankFileAreFollowed() {
        QTemporaryDir dir;
        const QString real = dir.filePath(QStringLiteral("real"));
        const QString elsewhere = dir.filePath(QStringLiteral("elsewhere/rank00001.h5"));
        QVERIFY(QDir().mkpath(real) && QDir().mkpath(dir.filePath(QStringLiteral("elsewhere"))));
        QVERIFY(test::copyFolder(fixture("tp_column/dist"), real));
        QVERIFY(QFile::rename(real + QStringLiteral("/rank00001.h5"), elsewhere));
        QVERIFY(QFile::link(elsewhere, real + QStringLiteral("/rank00001.h5")));
        const QString linkedFolder = dir.filePath(QStringLiteral("linked"));
        QVERIFY(QFile::link(real, linkedFolder));
        const TraceSet set = openTraceSet(linkedFolder);
        QVERIFY2(!hasErrors(set.diagnostics), qPrintable(dump(set.diagnostics)));
        const TraceSet original = openTraceSet(fixture("tp_column/dist"));
        QCOMPARE(set.records.size(), original.records.size());
        QVERIFY(findRecord(set, 1, QStringLiteral("layers.0.fc1"), TensorKind::ForwardOutput));
    }

    // A rank file changed since it was indexed (an index cache of yesterday's file) is read
    // under the same rule: a dataset that now keeps its data in a FIFO is not read.
    void readerRefusesDataOutsideTheFile() {
        QTemporaryDir dir;
        QVERIFY(test::writeManifest(dir.path(), 1, QStringLiteral("tp")));
        const QString rank0 = dir.filePath(QStringLiteral("rank00000.h5"));
        const QString storage = dir.filePath(QStringLiteral("storage.bin"));
        const float values[4] = {1, 2, 3, 4};
        const auto write = [&](hid_t createPlist) {
            test::RankFileWriter w(rank0, 0);
            const hid_t ds = w.dataset("a", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {4},
                                       createPlist == H5P_DEFAULT ? values : nullptr, createPlist);
            test::RankFileWriter::standardAttributes(ds, "a", "param", 0, "fp32", {4});
            H5Dclose(ds);
            return w.valid();
        };
        QVERIFY(write(H5P_DEFAULT));
        const TraceSet set = openTraceSet(dir.path());
        QCOMPARE(set.records.size(), std::size_t{1});
        const TensorRecord record = set.records.front();

        const hid_t external = H5Pcreate(H5P_DATASET_CREATE);
        QVERIFY(H5Pset_external(external, QFile::encodeName(storage).constData(), 0, 16) >= 0);
        QVERIFY(write(external));
        H5Pclose(external);
        QCOMPARE(::mkfifo(QFile::encodeName(storage).constData(), 0600), 0);
        Hdf5Reader reader;
        std::vector<float> out(4);
        const std::vector<std::int64_t> start{0};
        const auto problem = reader.read(record, start, record.localShape, out.data());
        QVERIFY(problem);
        QVERIFY2(problem->message.contains(
                     QStringLiteral("keeps its data outside this rank file, in the file %1 (HDF5 "
                                    "external storage)")
                         .arg(storage)),
                 qPrintable(problem->toString()));
    }

    // Cancel stops indexing between two datasets of a file (a file of 100,000 takes seconds):
    // the index says it is partial, and such an index is never cached.
    void cancelledIndexingIsPartial() {
        const QString path = fixture("tp_column/dist") + QStringLiteral("/rank00000.h5");
        std::atomic<bool> cancel{true};
        const RankFileIndex partial = indexRankFile(path, &cancel);
        QVERIFY(partial.opened);
        QVERIFY(partial.cancelled);
        QVERIFY(partial.records.empty());
        cancel.store(false);
        const RankFileIndex whole = indexRankFile(path, &cancel);
        QVERIFY(!whole.cancelled);
        QVERIFY(!whole.records.empty());
    }

    // Range bounds no double holds exactly (and that the conversion to int64 would make
    // undefined): an error naming the attribute, as for any malformed ranges.
    void rangesBeyondExactDoubles() {
        QTemporaryDir dir;
        QVERIFY(test::writeManifest(dir.path(), 1, QStringLiteral("tp")));
        const QByteArray bounds[] = {"[[[0,1e300]],[[0,3]]]", "[[[-9.3e18,2]],[[0,3]]]",
                                     "[[[0,9007199254740994]],[[0,3]]]"};
        {
            test::RankFileWriter w(dir.filePath(QStringLiteral("rank00000.h5")), 0);
            const float values[6] = {1, 2, 3, 4, 5, 6};
            for (int i = 0; i < 3; ++i) {
                const QByteArray name = "r" + QByteArray::number(i);
                const hid_t ds =
                    w.dataset(name.constData(), H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {2, 3}, values);
                test::RankFileWriter::standardAttributes(ds, "t." + name, "forward_output", i,
                                                         "fp32", {4, 3});
                test::RankFileWriter::variableString(ds, "ranges", bounds[i]);
                H5Dclose(ds);
            }
        }
        const TraceSet set = openTraceSet(dir.path());
        QVERIFY(set.records.empty());
        for (int i = 0; i < 3; ++i) {
            const QString expected =
                QStringLiteral(
                    "attribute 'ranges' '%1' must list, per dimension, [start, stop] "
                    "pairs")
                    .arg(QString::fromLatin1(bounds[i]));
            QVERIFY2(std::any_of(set.diagnostics.begin(), set.diagnostics.end(),
                                 [&](const Diagnostic& d) { return d.message == expected; }),
                     qPrintable(expected));
        }
    }

    // Placements that contradict the ranges, ranges without placements, a damaged attribute
    // naming a thousand axes, and several axes off the mesh: each one error for its dataset,
    // not one line per axis.
    void inconsistentPlacements() {
        QTemporaryDir dir;
        QVERIFY(test::writeManifest(dir.path(), 1, QStringLiteral("tp")));
        {
            test::RankFileWriter w(dir.filePath(QStringLiteral("rank00000.h5")), 0);
            QVERIFY(w.valid());
            const float values[6] = {1, 2, 3, 4, 5, 6};
            const auto add = [&](const char* name, int seq, const QByteArray& placements) {
                const hid_t ds = w.dataset(name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {2, 3}, values);
                test::RankFileWriter::standardAttributes(ds, QByteArray("t.") + name,
                                                         "forward_output", seq, "fp32", {4, 3});
                test::RankFileWriter::variableString(ds, "ranges", "[[[0,2]],[[0,3]]]");
                if (!placements.isEmpty()) {
                    test::RankFileWriter::variableString(ds, "placements", placements);
                }
                H5Dclose(ds);
            };
            add("a", 0, "{\"tp\": \"Shard(1)\"}");  // the ranges cut dimension 0
            add("d", 3, QByteArray());              // nothing says what cut it
            QByteArray many = "{";
            for (int i = 0; i < 1000; ++i) {
                many += (i ? ", " : "") + QByteArray("\"x") + QByteArray::number(i) +
                        "\": \"Replicate\"";
            }
            add("b", 1, many + "}");
            add("c", 2, "{\"tp\": \"Shard(0)\", \"x\": \"Replicate\", \"y\": \"Replicate\"}");
        }
        const TraceSet set = openTraceSet(dir.path());
        const auto errorsOf = [&](const QString& dataset) {
            QStringList messages;
            for (const auto& d : set.diagnostics) {
                if (d.severity == Severity::Error && d.dataset == dataset) {
                    messages << d.message;
                }
            }
            return messages;
        };
        QCOMPARE(errorsOf(QStringLiteral("/tensors/a")),
                 QStringList{QStringLiteral("its ranges [0:2][0:3] cut dimension 0, which none of "
                                            "its placements {tp: Shard(1)} shards")});
        QCOMPARE(errorsOf(QStringLiteral("/tensors/d")),
                 QStringList{QStringLiteral("its ranges [0:2][0:3] cut dimension 0, but it has no "
                                            "placements saying which mesh axis shards it")});
        QCOMPARE(errorsOf(QStringLiteral("/tensors/b")),
                 QStringList{QStringLiteral("attribute 'placements' names 1000 mesh axes, more "
                                            "than any mesh has (at most 64 are read)")});
        QCOMPARE(errorsOf(QStringLiteral("/tensors/c")),
                 QStringList{QStringLiteral("attribute 'placements' names the axes 'x', 'y', "
                                            "which are not axes of the manifest's mesh")});
        QVERIFY(set.records.empty());
    }

    void traceFoldersAreNotModified() {
        // The corpus holds rank files that crash or hang libhdf5: read as the programs do.
        Hdf5Isolation isolation;
        isolation.workerPath = test::hdf5Worker();
        isolation.limits.stallSeconds = 2;
        isolateHdf5(isolation);
        const auto inProcessAgain = qScopeGuard([] { isolateHdf5(std::nullopt); });
        const auto before = snapshot(test::fixturesRoot());
        QVERIFY(!before.empty());
        QTemporaryDir cacheDir;
        QString error;
        auto cache = IndexCache::open(cacheDir.filePath(QStringLiteral("index.sqlite")), &error);
        QVERIFY2(cache, qPrintable(error));
        Hdf5Reader reader;
        QDirIterator it(test::fixturesRoot(), {QStringLiteral("manifest.json")}, QDir::Files,
                        QDirIterator::Subdirectories);
        int sets = 0;
        while (it.hasNext()) {
            OpenOptions options;
            options.cache = cache.get();
            const TraceSet set = openTraceSet(QFileInfo(it.next()).absolutePath(), options);
            for (const auto& r : set.records) {
                std::vector<float> values(static_cast<std::size_t>(r.ranges.elementCount()));
                const std::vector<std::int64_t> start(r.localShape.size(), 0);
                QVERIFY(!reader.read(r, start, r.localShape, values.data()));
            }
            ++sets;
        }
        QVERIFY(sets > 30);
        QCOMPARE(snapshot(test::fixturesRoot()), before);
    }

    void cachedOpenMatchesAndSkipsHdf5() {
        CachedCopy copy;
        QVERIFY2(copy.make(fixture("tp_column", "dist")), qPrintable(copy.error));
        const QTemporaryDir& traceDir = copy.traceDir;
        const OpenOptions& options = copy.options;

        const TraceSet first = openTraceSet(traceDir.path(), options);
        QVERIFY2(first.diagnostics.empty(), qPrintable(dump(first.diagnostics)));
        const TraceSet second = openTraceSet(traceDir.path(), options);
        QCOMPARE(recordTexts(second.records), recordTexts(first.records));
        QCOMPARE(recordTexts(openTraceSet(traceDir.path()).records), recordTexts(first.records));

        // Overwrite rank 1's bytes but keep its size and modification time: a cached open
        // never notices, which shows it does not read HDF5; an uncached one does.
        const QString rank1 = traceDir.filePath(QStringLiteral("rank00001.h5"));
        const std::filesystem::path rank1Path = rank1.toStdString();
        const auto mtime = std::filesystem::last_write_time(rank1Path);
        QVERIFY(overwriteKeepingStamp(rank1));
        const TraceSet cached = openTraceSet(traceDir.path(), options);
        QVERIFY2(cached.diagnostics.empty(), qPrintable(dump(cached.diagnostics)));
        QCOMPARE(recordTexts(cached.records), recordTexts(first.records));
        QVERIFY(hasErrors(openTraceSet(traceDir.path()).diagnostics));

        // A new modification time invalidates the entry.
        std::filesystem::last_write_time(rank1Path, mtime + std::chrono::seconds(1));
        const TraceSet touched = openTraceSet(traceDir.path(), options);
        QVERIFY2(find(touched.diagnostics, Severity::Error, QStringLiteral("rank00001.h5"),
                      {QStringLiteral("is not a readable HDF5 file")}),
                 qPrintable(dump(touched.diagnostics)));
        QCOMPARE(touched.records.size(), std::size_t{6});
    }

    // The processes of a distributed check index one part of the rank files each; together
    // they fill the cache the open then reads instead of HDF5.
    void partsIndexedByEachProcessFillTheCache() {
        CachedCopy copy;
        QVERIFY2(copy.make(fixture("tp_column", "dist")), qPrintable(copy.error));
        const QTemporaryDir& traceDir = copy.traceDir;
        const auto& cache = copy.cache;
        const QString rank0 = traceDir.filePath(QStringLiteral("rank00000.h5"));
        const QString rank1 = traceDir.filePath(QStringLiteral("rank00001.h5"));
        const auto isCached = [&cache](const QString& file) {
            const auto stamp = fileStamp(file);
            return stamp && cache->lookup(file, stamp->size, stamp->mtimeNs).has_value();
        };

        QCOMPARE(indexPartIntoCache(traceDir.path(), *cache, 1, 2), std::size_t{1});
        QVERIFY(isCached(rank1));
        QVERIFY(!isCached(rank0));
        QCOMPARE(indexPartIntoCache(traceDir.path(), *cache, 0, 2), std::size_t{1});
        QVERIFY(isCached(rank0));

        // Garbage in both files, modification times kept: only an open that reads the cache
        // still sees every tensor.
        const TraceSet uncached = openTraceSet(traceDir.path());
        QVERIFY(overwriteKeepingStamp(rank0));
        QVERIFY(overwriteKeepingStamp(rank1));
        const TraceSet cached = openTraceSet(traceDir.path(), copy.options);
        QVERIFY2(cached.diagnostics.empty(), qPrintable(dump(cached.diagnostics)));
        QCOMPARE(recordTexts(cached.records), recordTexts(uncached.records));

        // No manifest, or a part that does not exist: nothing to index.
        QCOMPARE(indexPartIntoCache(copy.cacheDir.path(), *cache, 0, 1), std::size_t{0});
        QCOMPARE(indexPartIntoCache(traceDir.path(), *cache, 2, 2), std::size_t{0});
    }

    void cachedOpenKeepsDiagnostics() {
        QTemporaryDir traceDir;
        QTemporaryDir cacheDir;
        QVERIFY(test::copyFolder(fixture("bad/missing_attr"), traceDir.path()));
        QVERIFY(QFile::copy(traceDir.filePath(QStringLiteral("rank00000.h5")),
                            traceDir.filePath(QStringLiteral("rank00009.h5"))));
        const QString dbPath = cacheDir.filePath(QStringLiteral("index.sqlite"));
        QString error;
        TraceSet first;
        {
            auto cache = IndexCache::open(dbPath, &error);
            QVERIFY2(cache, qPrintable(error));
            OpenOptions options;
            options.cache = cache.get();
            first = openTraceSet(traceDir.path(), options);
        }
        QVERIFY(hasErrors(first.diagnostics));
        // A fresh connection to the same database, as a second process would have.
        auto cache = IndexCache::open(dbPath, &error);
        QVERIFY2(cache, qPrintable(error));
        OpenOptions options;
        options.cache = cache.get();
        const TraceSet second = openTraceSet(traceDir.path(), options);
        QCOMPARE(diagnosticTexts(second.diagnostics), diagnosticTexts(first.diagnostics));
        QCOMPARE(recordTexts(second.records), recordTexts(first.records));
        QCOMPARE(diagnosticTexts(openTraceSet(traceDir.path()).diagnostics),
                 diagnosticTexts(first.diagnostics));
    }

    void tensorSubsetIsThePartOfTheWholeSet_data() {
        QTest::addColumn<QString>("folder");
        for (const char* name : {"cp_zigzag/dist", "combined/dist", "ep/dist", "pp_vpp/dist",
                                 "tp_strided/dist", "bad/missing_rank", "bad/rank_mismatch",
                                 "bad/missing_attr", "bad/corrupt", "bad/shape_mismatch"}) {
            QTest::newRow(name) << QString::fromUtf8(name);
        }
    }
    // For every tensor: the records of the whole set's open, with rank, coords and file, in
    // the same order, and the diagnostics about that tensor or no one tensor; uncached, while
    // filling the cache, and from the cache.
    void tensorSubsetIsThePartOfTheWholeSet() {
        QFETCH(QString, folder);
        const QString path = fixture(qPrintable(folder));
        const TraceSet whole = openTraceSet(path);
        const auto keys = keysOf(whole);
        QVERIFY(!keys.empty());
        QTemporaryDir cacheDir;
        QString error;
        auto cache = IndexCache::open(cacheDir.filePath(QStringLiteral("index.sqlite")), &error);
        QVERIFY2(cache, qPrintable(error));
        OpenOptions cached;
        cached.cache = cache.get();
        for (const TensorKey& key : keys) {
            const auto expectedRecords = recordTexts(recordsOf(whole, key));
            const auto expectedDiagnostics =
                diagnosticTexts(diagnosticsAbout(whole.diagnostics, key));
            // The first cached open fills the cache, the next ones read it.
            for (const OpenOptions& options : {OpenOptions{}, cached, cached}) {
                const TraceSet part = openTraceSetTensor(path, key, options);
                QCOMPARE(part.folder, whole.folder);
                QCOMPARE(part.manifest.ranks.size(), whole.manifest.ranks.size());
                QCOMPARE(recordTexts(part.records), expectedRecords);
                QCOMPARE(diagnosticTexts(part.diagnostics), expectedDiagnostics);
            }
        }
        // A tensor of no rank file: no record, the file-level diagnostics only.
        const TensorKey absent{QStringLiteral("no.such.module"), TensorKind::ForwardOutput, 0, 0,
                               0};
        const TraceSet none = openTraceSetTensor(path, absent, cached);
        QVERIFY(none.records.empty());
        QVERIFY(!none.usable());
        QCOMPARE(diagnosticTexts(none.diagnostics),
                 diagnosticTexts(diagnosticsAbout(whole.diagnostics, absent)));
    }

    // Cached rank files are not read (garbage with the stamp kept still gives their records);
    // a file whose stamp changed is indexed again, whole, and its part taken.
    void tensorSubsetReadsTheCacheOnlyWhileCurrent() {
        CachedCopy copy;
        QVERIFY2(copy.make(fixture("tp_column", "dist")), qPrintable(copy.error));
        const QTemporaryDir& traceDir = copy.traceDir;
        const OpenOptions& options = copy.options;
        const TraceSet whole = openTraceSet(traceDir.path(), options);
        const TensorKey key{QStringLiteral("layers.0.fc1"), TensorKind::ForwardOutput, 0, 0, 0};
        const auto expected = recordTexts(recordsOf(whole, key));
        QCOMPARE(expected.size(), 2);

        const QString rank1 = traceDir.filePath(QStringLiteral("rank00001.h5"));
        QVERIFY(overwriteKeepingStamp(rank1));
        const TraceSet cached = openTraceSetTensor(traceDir.path(), key, options);
        QVERIFY2(cached.diagnostics.empty(), qPrintable(dump(cached.diagnostics)));
        QCOMPARE(recordTexts(cached.records), expected);

        // rank_mismatch's rank 1 says it is rank 0: refused, and said why.
        QVERIFY(QFile::remove(rank1));
        QVERIFY(QFile::copy(fixture("bad/rank_mismatch") + QStringLiteral("/rank00001.h5"), rank1));
        const auto mtime = std::filesystem::last_write_time(rank1.toStdString());
        std::filesystem::last_write_time(rank1.toStdString(), mtime + std::chrono::seconds(1));
        const TraceSet changed = openTraceSetTensor(traceDir.path(), key, options);
        QVERIFY2(find(changed.diagnostics, Severity::Error, QStringLiteral("rank00001.h5"),
                      {QStringLiteral("manifest lists this file as rank 1")}),
                 qPrintable(dump(changed.diagnostics)));
        QCOMPARE(recordTexts(changed.records), expected.mid(0, 1));
        QCOMPARE(recordTexts(changed.records),
                 recordTexts(openTraceSetTensor(traceDir.path(), key).records));
        // The whole file was cached again: its other tensors come from the cache too.
        const auto stamp = fileStamp(rank1);
        QVERIFY(stamp && copy.cache->isCurrent(rank1, stamp->size, stamp->mtimeNs));
    }

    void tensorSubsetOfBadFolders() {
        const TensorKey key{QStringLiteral("layers.0.fc1"), TensorKind::ForwardOutput, 0, 0, 0};
        const TraceSet missing = openTraceSetTensor(fixture("does_not_exist"), key);
        QVERIFY(!missing.usable());
        QVERIFY2(find(missing.diagnostics, Severity::Error, QStringLiteral("does_not_exist"),
                      {QStringLiteral("does not exist")}),
                 qPrintable(dump(missing.diagnostics)));
        const TraceSet noManifest = openTraceSetTensor(fixture("bad/no_manifest"), key);
        QVERIFY(noManifest.records.empty());
        QVERIFY2(find(noManifest.diagnostics, Severity::Error, QString(),
                      {QStringLiteral("manifest.json is missing")}),
                 qPrintable(dump(noManifest.diagnostics)));

        std::atomic<bool> cancel{true};
        OpenOptions cancelled;
        cancelled.cancel = &cancel;
        const TraceSet stopped = openTraceSetTensor(fixture("combined", "dist"), key, cancelled);
        QVERIFY(stopped.cancelled);
        QVERIFY(stopped.records.empty());
    }

    void threadCountChangesNothing_data() {
        QTest::addColumn<QString>("folder");
        for (const char* name : {"combined/dist", "bad/corrupt", "bad/missing_rank",
                                 "bad/rank_mismatch", "bad/missing_attr"}) {
            QTest::newRow(name) << QString::fromUtf8(name);
        }
    }
    // Rank files are indexed on several threads but checked in manifest order: the same
    // records and the same diagnostics, in the same order, whatever the thread count.
    void threadCountChangesNothing() {
        QFETCH(QString, folder);
        OpenOptions one;
        one.threads = 1;
        const TraceSet alone = openTraceSet(fixture(qPrintable(folder)), one);
        QVERIFY(!alone.records.empty() || !alone.diagnostics.empty());
        for (const int threads : {2, 4}) {
            OpenOptions several;
            several.threads = threads;
            const TraceSet parallel = openTraceSet(fixture(qPrintable(folder)), several);
            QCOMPARE(recordTexts(parallel.records), recordTexts(alone.records));
            QCOMPARE(diagnosticTexts(parallel.diagnostics), diagnosticTexts(alone.diagnostics));
        }
    }

    void progressAndCancel() {
        std::vector<double> fractions;
        OpenOptions options;
        options.progress = [&fractions](double f) {
            fractions.push_back(f);
            return true;
        };
        const TraceSet set = openTraceSet(fixture("combined", "dist"), options);
        QVERIFY(set.usable());
        QVERIFY(!set.cancelled);
        QVERIFY(fractions.size() >= 8);
        QVERIFY(std::is_sorted(fractions.begin(), fractions.end()));
        QCOMPARE(fractions.back(), 1.0);

        std::atomic<bool> cancel{true};
        OpenOptions cancelled;
        cancelled.cancel = &cancel;
        const TraceSet stopped = openTraceSet(fixture("combined", "dist"), cancelled);
        QVERIFY(stopped.cancelled);
        QVERIFY(!stopped.usable());

        int calls = 0;
        OpenOptions refusing;
        refusing.progress = [&calls](double) { return ++calls < 3; };
        const TraceSet partial = openTraceSet(fixture("combined", "dist"), refusing);
        QVERIFY(partial.cancelled);
        QCOMPARE(calls, 3);
    }
};

QTEST_GUILESS_MAIN(TestTraceSet)
#include "test_trace_set.moc"
