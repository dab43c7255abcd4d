// Hdf5Reader: boxes of real fixture datasets decode to the values h5py wrote; every shard of
// a distributed run equals the reference's slice that its ranges name; every storage layout
// reads alike (direct reads and HDF5's); failures are
// diagnostics naming file and dataset; concurrent readers agree.
#include <QFileInfo>
#include <QScopeGuard>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "Hdf5TestFiles.h"
#include "TestPaths.h"
#include "trace/Hdf5Reader.h"
#include "trace/IsolatedHdf5.h"
#include "trace/TraceSet.h"

using namespace ttrace;

namespace {

QString fixture(const char* caseName, const char* role = nullptr) {
    return test::fixture(QString::fromLatin1(caseName),
                         role ? QString::fromLatin1(role) : QString());
}

std::int64_t product(const std::vector<std::int64_t>& shape) {
    std::int64_t n = 1;
    for (const auto e : shape) {
        n *= e;
    }
    return n;
}

// The whole dataset of `record`, or an empty vector with the diagnostic in `problem`.
std::vector<float> readAll(Hdf5Reader& reader, const TensorRecord& record,
                           QString* problem = nullptr) {
    std::vector<float> values(static_cast<std::size_t>(product(record.localShape)));
    const std::vector<std::int64_t> start(record.localShape.size(), 0);
    if (const auto d = reader.read(record, start, record.localShape, values.data())) {
        if (problem) {
            *problem = d->toString();
        }
        return {};
    }
    return values;
}

// For every local element of `ranges`, the row-major index of the global element it holds.
std::vector<std::int64_t> globalIndices(const ShardRanges& ranges,
                                        const std::vector<std::int64_t>& globalShape) {
    // Per dimension, the global coordinate of each local coordinate.
    std::vector<std::vector<std::int64_t>> coords;
    for (const auto& dim : ranges.dims) {
        std::vector<std::int64_t> c;
        for (const auto& r : dim) {
            for (auto i = r.start; i < r.stop; ++i) {
                c.push_back(i);
            }
        }
        coords.push_back(std::move(c));
    }
    std::vector<std::int64_t> out(static_cast<std::size_t>(ranges.elementCount()));
    const std::size_t rank = coords.size();
    std::vector<std::size_t> local(rank, 0);
    for (auto& index : out) {
        std::int64_t global = 0;
        for (std::size_t d = 0; d < rank; ++d) {
            global = global * globalShape[d] + coords[d][local[d]];
        }
        index = global;
        for (std::size_t d = rank; d-- > 0;) {  // row-major increment
            if (++local[d] < coords[d].size()) {
                break;
            }
            local[d] = 0;
        }
    }
    return out;
}

const TensorRecord* findByKey(const TraceSet& set, const TensorKey& key) {
    for (const auto& r : set.records) {
        if (r.key == key) {
            return &r;
        }
    }
    return nullptr;
}

bool hasPartial(const TensorRecord& record) {
    return std::any_of(record.placements.begin(), record.placements.end(),
                       [](const auto& p) { return p.placement.type == Placement::Type::Partial; });
}

}  // namespace

class TestHdf5Reader : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() {
        QVERIFY2(QFileInfo(fixture("tp_column", "dist")).isDir(),
                 "fixtures missing: run make_fixtures.py (CTest fixture 'traces')");
    }

    // dist holds exact slices of ref in these cases: every shard must equal its slice bitwise.
    void shardsEqualReferenceSlices_data() {
        QTest::addColumn<QString>("caseName");
        for (const char* name : {"tp_column", "tp_row", "tp_strided", "sp", "cp_zigzag", "pp_vpp",
                                 "dp_microbatch", "ep"}) {
            QTest::newRow(name) << QString::fromLatin1(name);
        }
    }
    void shardsEqualReferenceSlices() {
        QFETCH(QString, caseName);
        const TraceSet dist = openTraceSet(test::fixture(caseName, QStringLiteral("dist")));
        const TraceSet ref = openTraceSet(test::fixture(caseName, QStringLiteral("ref")));
        QVERIFY(dist.usable() && ref.usable());
        Hdf5Reader reader;
        int compared = 0;
        for (const auto& shard : dist.records) {
            if (hasPartial(shard)) {
                continue;  // partial sums are not slices
            }
            const auto* whole = findByKey(ref, shard.key);
            QVERIFY2(whole, qPrintable(shard.key.toString()));
            QCOMPARE(whole->globalShape, shard.globalShape);
            QString problem;
            const auto local = readAll(reader, shard, &problem);
            QVERIFY2(!local.empty(), qPrintable(problem));
            const auto global = readAll(reader, *whole, &problem);
            QVERIFY2(!global.empty(), qPrintable(problem));
            const auto indices = globalIndices(shard.ranges, shard.globalShape);
            for (std::size_t i = 0; i < local.size(); ++i) {
                const float expected = global[static_cast<std::size_t>(indices[i])];
                if (local[i] != expected) {
                    QFAIL(qPrintable(QStringLiteral("%1 rank %2 element %3: %4 != %5")
                                         .arg(shard.key.toString())
                                         .arg(shard.rank)
                                         .arg(i)
                                         .arg(local[i])
                                         .arg(expected)));
                }
            }
            ++compared;
        }
        QVERIFY(compared >= 2);
    }

    void boxesAreSlicesOfTheWholeDataset() {
        const TraceSet dist = openTraceSet(fixture("cp_zigzag", "dist"));
        const TraceSet ref = openTraceSet(fixture("cp_zigzag", "ref"));
        Hdf5Reader reader;
        const auto& shard = dist.records.front();  // rank 0: sequence chunks 0 and 3
        QCOMPARE(shard.rank, 0);
        const auto* whole = findByKey(ref, shard.key);
        QVERIFY(whole);
        const auto all = readAll(reader, *whole);  // [2, 16, 8]
        // Local rows 4..8 of rank 0 are global rows 12..16 (the second zig-zag chunk).
        const std::vector<std::int64_t> start{1, 4, 2};
        const std::vector<std::int64_t> count{1, 4, 5};
        std::vector<float> box(20);
        QVERIFY(!reader.read(shard, start, count, box.data()));
        for (int s = 0; s < 4; ++s) {
            for (int h = 0; h < 5; ++h) {
                const auto globalIndex = (1 * 16 + (12 + s)) * 8 + (2 + h);
                QCOMPARE(box[static_cast<std::size_t>(s * 5 + h)],
                         all[static_cast<std::size_t>(globalIndex)]);
            }
        }
    }

    void valuesAreWhatH5pyWrote() {
        Hdf5Reader reader;
        const TraceSet nan = openTraceSet(fixture("bad/nan"));
        const TensorRecord* r0 = nullptr;
        const TensorRecord* r1 = nullptr;
        for (const auto& r : nan.records) {
            if (r.key.name == u"layers.0.fc1" && r.key.kind == TensorKind::ForwardOutput) {
                (r.rank == 0 ? r0 : r1) = &r;
            }
        }
        QVERIFY(r0 && r1);
        const auto v0 = readAll(reader, *r0);
        const auto v1 = readAll(reader, *r1);
        QCOMPARE(v0.size(), std::size_t{32});
        QVERIFY(std::isnan(v0[1 * 8 + 2]));
        QVERIFY(std::isinf(v1[0]) && v1[0] > 0);
        QCOMPARE(std::count_if(v0.begin(), v0.end(), [](float v) { return std::isnan(v); }), 1);
        // The rest of the shard is tp_column's data: h5py printed ref[0, 0] as 1.8143066.
        QVERIFY(std::abs(v0[0] - 1.8143066f) < 1e-6f);
    }

    void bf16ShardsStayCloseToTheReference() {
        const TraceSet dist = openTraceSet(fixture("combined", "dist"));
        const TraceSet ref = openTraceSet(fixture("combined", "ref"));
        Hdf5Reader reader;
        int compared = 0;
        for (const auto& shard : dist.records) {
            QCOMPARE(shard.dtype, DType::BF16);
            if (hasPartial(shard)) {
                continue;
            }
            const auto* whole = findByKey(ref, shard.key);
            QVERIFY2(whole, qPrintable(shard.key.toString()));
            const auto local = readAll(reader, shard);
            const auto global = readAll(reader, *whole);
            const auto indices = globalIndices(shard.ranges, shard.globalShape);
            for (std::size_t i = 0; i < local.size(); ++i) {
                const float expected = global[static_cast<std::size_t>(indices[i])];
                QVERIFY(std::isfinite(local[i]));
                // Noise of relative 2^-9 then bf16 rounding (2^-8): well under 2^-6.
                QVERIFY2(std::abs(local[i] - expected) <= std::ldexp(1.0f, -6) * std::abs(expected),
                         qPrintable(shard.key.toString()));
            }
            ++compared;
        }
        QVERIFY(compared > 100);
    }

    void decodesFp8AndFp16Words() {
        QTemporaryDir dir;
        QVERIFY(test::writeManifest(dir.path(), 1, QString(), QStringLiteral("reference")));
        {
            test::RankFileWriter w(dir.filePath(QStringLiteral("rank00000.h5")), 0);
            const std::uint8_t e4m3[6] = {0x38, 0x40, 0x44, 0xb8, 0x00, 0x48};
            hid_t ds = w.dataset("a", H5T_STD_U8LE, H5T_NATIVE_UINT8, {2, 3}, e4m3);
            test::RankFileWriter::standardAttributes(ds, "x", "forward_output", 0, "fp8_e4m3",
                                                     {2, 3});
            test::RankFileWriter::float64(ds, "scale_inv", 0.5);
            H5Dclose(ds);
            const std::uint8_t e5m2[3] = {0x3c, 0x7c, 0xc0};  // 1, +inf, -2
            ds = w.dataset("b", H5T_STD_U8LE, H5T_NATIVE_UINT8, {3}, e5m2);
            test::RankFileWriter::standardAttributes(ds, "y", "forward_output", 1, "fp8_e5m2", {3});
            test::RankFileWriter::float64(ds, "scale_inv", 2.0);
            H5Dclose(ds);
            const std::uint16_t half[4] = {0x3c00, 0x4000, 0xc000, 0x0001};
            ds = w.dataset("c", H5T_STD_U16LE, H5T_NATIVE_UINT16, {4}, half);
            test::RankFileWriter::standardAttributes(ds, "z", "forward_output", 2, "fp16", {4});
            H5Dclose(ds);
        }
        const TraceSet set = openTraceSet(dir.path());
        QVERIFY(set.diagnostics.empty());
        QCOMPARE(set.records.size(), std::size_t{3});
        Hdf5Reader reader;
        QCOMPARE(readAll(reader, set.records[0]),
                 (std::vector<float>{0.5f, 1.0f, 1.5f, -0.5f, 0.0f, 2.0f}));
        const auto b = readAll(reader, set.records[1]);
        QCOMPARE(b[0], 2.0f);
        QVERIFY(std::isinf(b[1]) && b[1] > 0);
        QCOMPARE(b[2], -4.0f);
        QCOMPARE(readAll(reader, set.records[2]),
                 (std::vector<float>{1.0f, 2.0f, -2.0f, std::ldexp(1.0f, -24)}));
        // A box in the middle of the fp8 dataset.
        std::vector<float> box(2);
        const std::vector<std::int64_t> start{1, 1};
        const std::vector<std::int64_t> count{1, 2};
        QVERIFY(!reader.read(set.records[0], start, count, box.data()));
        QCOMPARE(box, (std::vector<float>{0.0f, 2.0f}));
    }

    void failuresNameFileAndDataset() {
        const TraceSet set = openTraceSet(fixture("tp_column", "dist"));
        const TensorRecord record = set.records.front();  // [4, 8]
        Hdf5Reader reader;
        std::vector<float> out(64);

        const std::vector<std::int64_t> start{2, 0};
        const std::vector<std::int64_t> tooMany{3, 8};
        auto d = reader.read(record, start, tooMany, out.data());
        QVERIFY(d);
        QCOMPARE(d->severity, Severity::Error);
        QCOMPARE(d->file, record.file);
        QCOMPARE(d->dataset, record.dataset);
        QVERIFY2(d->message.contains(QStringLiteral("outside")), qPrintable(d->message));
        QVERIFY2(d->message.contains(QStringLiteral("[2:5, 0:8]")), qPrintable(d->message));

        const std::vector<std::int64_t> negative{-1, 0};
        QVERIFY(reader.read(record, negative, std::vector<std::int64_t>{1, 1}, out.data()));
        QVERIFY(reader.read(record, std::vector<std::int64_t>{0}, std::vector<std::int64_t>{1},
                            out.data()));

        // Records the index did not make (no data offset): read through HDF5, which says what
        // is wrong with them.
        TensorRecord missingDataset = record;
        missingDataset.dataOffset.reset();
        missingDataset.dataset = QStringLiteral("/tensors/nope");
        d = reader.read(missingDataset, std::vector<std::int64_t>{0, 0},
                        std::vector<std::int64_t>{1, 1}, out.data());
        QVERIFY(d);
        QCOMPARE(d->dataset, QStringLiteral("/tensors/nope"));
        QVERIFY2(d->message.contains(QStringLiteral("cannot open the dataset")),
                 qPrintable(d->message));

        TensorRecord corrupt = record;
        corrupt.file =
            QDir(fixture("bad/corrupt")).absoluteFilePath(QStringLiteral("rank00001.h5"));
        d = reader.read(corrupt, std::vector<std::int64_t>{0, 0}, std::vector<std::int64_t>{1, 1},
                        out.data());
        QVERIFY(d);
        QCOMPARE(d->file, corrupt.file);
        QVERIFY2(d->message.contains(QStringLiteral("cannot open the file")),
                 qPrintable(d->message));

        TensorRecord missingFile = record;
        missingFile.file = QStringLiteral("/nonexistent/rank00000.h5");
        d = reader.read(missingFile, std::vector<std::int64_t>{0, 0},
                        std::vector<std::int64_t>{1, 1}, out.data());
        QVERIFY(d);
        QCOMPARE(d->file, missingFile.file);

        // The index says [4, 8]; a record claiming another shape means the file changed.
        TensorRecord stale = record;
        stale.dataOffset.reset();
        stale.localShape = {8, 8};
        d = reader.read(stale, std::vector<std::int64_t>{4, 0}, std::vector<std::int64_t>{4, 8},
                        out.data());
        QVERIFY(d);
        QVERIFY2(d->message.contains(QStringLiteral("changed")), qPrintable(d->message));

        // An empty box reads nothing and succeeds.
        out[0] = 42.0f;
        QVERIFY(!reader.read(record, std::vector<std::int64_t>{4, 0},
                             std::vector<std::int64_t>{0, 8}, out.data()));
        QCOMPARE(out[0], 42.0f);
    }

    // Contiguous little-endian datasets are read at their file offset, outside HDF5; chunked,
    // compressed, big-endian and never-written ones go through HDF5. Every box of each must
    // read the same values, whether its rows are long runs or short ones.
    // Both in this process and with HDF5 in a worker process (IsolatedHdf5.h), which then
    // indexes the file and reads every box that is not read at its offset.
    void storageLayoutsReadAlike_data() {
        QTest::addColumn<bool>("isolated");
        QTest::newRow("in process") << false;
        QTest::newRow("in a worker") << true;
    }
    void storageLayoutsReadAlike() {
        QFETCH(bool, isolated);
        if (isolated) {
            QVERIFY(QFileInfo(test::hdf5Worker()).isExecutable());
            isolateHdf5(Hdf5Isolation{test::hdf5Worker(), {}});
        }
        const auto inProcessAgain = qScopeGuard([] { isolateHdf5(std::nullopt); });
        constexpr hsize_t rows = 24, cols = 1100;  // a row is 4400 bytes: one direct run
        std::vector<float> values(rows * cols);
        for (std::size_t i = 0; i < values.size(); ++i) {
            values[i] = static_cast<float>(i) * 0.25f - 1000.0f;
        }
        std::vector<std::uint16_t> words(rows * cols);
        for (std::size_t i = 0; i < words.size(); ++i) {
            words[i] = static_cast<std::uint16_t>(0x3f80 + (i % 97));  // bf16 1.0 and up
        }
        QTemporaryDir dir;
        QVERIFY(test::writeManifest(dir.path(), 1, QString(), QStringLiteral("reference")));
        {
            test::RankFileWriter w(dir.filePath(QStringLiteral("rank00000.h5")), 0);
            const hid_t chunked = H5Pcreate(H5P_DATASET_CREATE);
            const hsize_t chunk[2] = {5, 300};
            H5Pset_chunk(chunked, 2, chunk);
            H5Pset_deflate(chunked, 4);
            const auto add = [&](const char* dataset, hid_t fileType, hid_t memType,
                                 const void* data, hid_t plist, const char* dtype, int seq) {
                const hid_t ds = w.dataset(dataset, fileType, memType, {rows, cols}, data, plist);
                test::RankFileWriter::standardAttributes(ds, dataset, "forward_output", seq, dtype,
                                                         {int(rows), int(cols)});
                H5Dclose(ds);
            };
            add("contiguous", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, values.data(), H5P_DEFAULT, "fp32",
                0);
            add("chunked", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, values.data(), chunked, "fp32", 1);
            add("big_endian", H5T_IEEE_F32BE, H5T_NATIVE_FLOAT, values.data(), H5P_DEFAULT, "fp32",
                2);
            add("unwritten", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, nullptr, H5P_DEFAULT, "fp32", 3);
            add("bf16", H5T_STD_U16LE, H5T_NATIVE_UINT16, words.data(), H5P_DEFAULT, "bf16", 4);
            H5Pclose(chunked);
        }
        const TraceSet set = openTraceSet(dir.path());
        for (const auto& d : set.diagnostics) {
            QFAIL(qPrintable(d.toString()));
        }
        QCOMPARE(set.records.size(), std::size_t{5});

        struct Box {
            std::int64_t row, col, nRows, nCols;
        };
        const Box boxes[] = {
            {0, 0, rows, cols},  // whole dataset: one run
            {7, 0, 9, cols},     // a band of whole rows: one run
            {3, 100, 10, 1000},  // long runs inside rows: one read per row
            {2, 1090, 20, 7},    // short runs: through HDF5's sieve buffer
            {23, 1099, 1, 1},    // the last element
        };
        // Contiguous words stored as read have their offset in the index; the others not.
        for (const auto& record : set.records) {
            const bool direct =
                record.dataset.endsWith(u"contiguous") || record.dataset.endsWith(u"bf16");
            QCOMPARE(record.dataOffset.has_value(), direct);
            QVERIFY(record.fileStamp);
        }
        // Each as indexed, and without the offset (HDF5 opens the file and finds it again).
        std::vector<TensorRecord> records = set.records;
        for (const auto& record : set.records) {
            records.push_back(record);
            records.back().dataOffset.reset();
        }
        Hdf5Reader reader;
        for (const auto& record : records) {
            for (const auto& box : boxes) {
                std::vector<float> out(static_cast<std::size_t>(box.nRows * box.nCols), -7.0f);
                const std::vector<std::int64_t> start{box.row, box.col};
                const std::vector<std::int64_t> count{box.nRows, box.nCols};
                const auto error = reader.read(record, start, count, out.data());
                QVERIFY2(!error, qPrintable(error ? error->toString() : QString()));
                for (std::int64_t r = 0; r < box.nRows; ++r) {
                    for (std::int64_t c = 0; c < box.nCols; ++c) {
                        const auto i = static_cast<std::size_t>((box.row + r) * std::int64_t(cols) +
                                                                box.col + c);
                        float expected = values[i];
                        if (record.dataset.endsWith(u"unwritten")) {
                            expected = 0.0f;  // HDF5's default fill value
                        } else if (record.dtype == DType::BF16) {
                            const std::uint32_t bits = std::uint32_t{words[i]} << 16;
                            std::memcpy(&expected, &bits, sizeof expected);
                        }
                        const float got = out[static_cast<std::size_t>(r * box.nCols + c)];
                        if (got != expected) {
                            QFAIL(qPrintable(QStringLiteral("%1 box at (%2, %3): element (%4, %5) "
                                                            "is %6, expected %7")
                                                 .arg(record.dataset)
                                                 .arg(box.row)
                                                 .arg(box.col)
                                                 .arg(r)
                                                 .arg(c)
                                                 .arg(got)
                                                 .arg(expected)));
                        }
                    }
                }
            }
        }
    }

    // A data offset is read directly only inside the file: one that would run past its end
    // (a damaged index entry, a file cut short) is refused with the sizes, never read.
    void directReadsStayInsideTheFile() {
        const TraceSet set = openTraceSet(fixture("tp_column", "dist"));
        QVERIFY(set.usable());
        TensorRecord record = set.records.front();
        QVERIFY(record.dataOffset && record.fileStamp);
        const std::int64_t fileBytes = QFileInfo(record.file).size();
        std::vector<float> out(static_cast<std::size_t>(record.ranges.elementCount()));
        const std::vector<std::int64_t> start(record.localShape.size(), 0);
        Hdf5Reader reader;
        for (const std::uint64_t offset : {static_cast<std::uint64_t>(fileBytes - 4),
                                           std::numeric_limits<std::uint64_t>::max() - 2}) {
            record.dataOffset = offset;
            const auto error = reader.read(record, start, record.localShape, out.data());
            QVERIFY(error);
            QVERIFY2(error->message.contains(
                         QStringLiteral("lies beyond the end of the file (%1 bytes; truncated?)")
                             .arg(fileBytes)),
                     qPrintable(error->message));
        }
    }

    // The index's offset of a dataset is used only while its file is the one indexed: a file
    // rewritten since (the dataset now elsewhere in it) is read through HDF5, not at the old
    // offset.
    void rewrittenFileIsNotReadAtTheOldOffset() {
        QTemporaryDir dir;
        QVERIFY(test::writeManifest(dir.path(), 1, QString(), QStringLiteral("reference")));
        const QString path = dir.filePath(QStringLiteral("rank00000.h5"));
        const auto write = [&path](bool padFirst, const std::vector<float>& values) {
            test::RankFileWriter w(path, 0);
            if (padFirst) {
                const std::vector<float> pad(4096, -1.0f);
                H5Dclose(w.dataset("0pad", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {4096}, pad.data()));
            }
            const hid_t ds = w.dataset("a", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {4}, values.data());
            test::RankFileWriter::standardAttributes(ds, "layers.0.fc1", "forward_output", 0,
                                                     "fp32", {4});
            H5Dclose(ds);
        };
        write(false, {1, 2, 3, 4});
        const TraceSet before = openTraceSet(dir.path());
        QCOMPARE(before.records.size(), std::size_t{1});
        const TensorRecord record = before.records.front();
        QVERIFY(record.dataOffset && record.fileStamp);
        {
            Hdf5Reader reader;
            std::vector<float> out(4);
            QVERIFY(!reader.read(record, std::vector<std::int64_t>{0}, std::vector<std::int64_t>{4},
                                 out.data()));
            QCOMPARE(out, (std::vector<float>{1, 2, 3, 4}));
        }
        write(true, {5, 6, 7, 8});
        const TraceSet after = openTraceSet(dir.path());
        QVERIFY(after.records.front().dataOffset != record.dataOffset);
        Hdf5Reader reader;
        std::vector<float> out(4);
        QVERIFY(!reader.read(record, std::vector<std::int64_t>{0}, std::vector<std::int64_t>{4},
                             out.data()));
        QCOMPARE(out, (std::vector<float>{5, 6, 7, 8}));
    }

    void concurrentReadsAgree() {
        const TraceSet set = openTraceSet(fixture("combined", "dist"));
        QVERIFY(set.usable());
        Hdf5Reader single;
        std::vector<std::vector<float>> expected;
        for (const auto& r : set.records) {
            expected.push_back(readAll(single, r));
        }
        // Fewer open files than ranks: threads keep evicting each other's files.
        Hdf5Reader shared(nullptr, 2);
        std::atomic<int> mismatches{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < 6; ++t) {
            threads.emplace_back([&, t] {
                for (int pass = 0; pass < 3; ++pass) {
                    for (std::size_t i = 0; i < set.records.size(); ++i) {
                        const auto& r =
                            set.records[(i * 7 + static_cast<std::size_t>(t)) % set.records.size()];
                        const auto index = static_cast<std::size_t>(&r - set.records.data());
                        if (readAll(shared, r) != expected[index]) {
                            ++mismatches;
                        }
                    }
                }
            });
        }
        for (auto& thread : threads) {
            thread.join();
        }
        QCOMPARE(mismatches.load(), 0);
    }
};

QTEST_GUILESS_MAIN(TestHdf5Reader)
#include "test_hdf5_reader.moc"
