// fp4 e2m1 (NVFP4, MXFP4) in real HDF5 rank files: the words packed two elements a byte, read
// in boxes that start and end inside a byte, through the plain file and through HDF5, decoded
// with block scales and the per-tensor scale above them; the E4M3 scale format; and the
// indexer's messages on fp4 datasets it cannot read.
#include <QStringList>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <array>
#include <cmath>

#include "DiagnosticText.h"
#include "Hdf5TestFiles.h"
#include "store/IndexCache.h"
#include "trace/DType.h"
#include "trace/Hdf5Reader.h"
#include "trace/IsolatedHdf5.h"
#include "trace/ScaleFormat.h"
#include "trace/StoredBox.h"
#include "trace/TraceSet.h"

using namespace ttrace;

namespace {

// e2m1's values by code: sign in bit 3, then 2 exponent bits and 1 mantissa bit.
constexpr std::array<float, 16> kValues = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                           -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
constexpr hsize_t kRows = 3, kCols = 6;

QString rankFile(const QString& folder) {
    return folder + QStringLiteral("/rank00000.h5");
}

// Element (r, c) of the test tensor holds code (r * kCols + c) % 16.
std::uint8_t codeAt(hsize_t r, hsize_t c) {
    return static_cast<std::uint8_t>((r * kCols + c) % 16);
}

std::vector<std::uint8_t> packedTensor() {
    std::vector<std::uint8_t> bytes(kRows * kCols / 2);
    for (hsize_t r = 0; r < kRows; ++r) {
        for (hsize_t c = 0; c < kCols; c += 2) {
            bytes[(r * kCols + c) / 2] =
                static_cast<std::uint8_t>(codeAt(r, c) | (codeAt(r, c + 1) << 4));
        }
    }
    return bytes;
}

// The block scales of the test tensor: blocks of [1, 2], 3 x 3 of them, all e4m3 numbers.
const std::vector<double> kBlockScales = {1.0,   0.5,         2.0, 448.0, 0.125,
                                          1.125, 0.001953125, 3.0, 0.75};
constexpr double kTensorScale = 0.0009765625 * 3;  // an fp32 number

QString messages(const Diagnostics& diagnostics) {
    QStringList lines;
    for (const auto& d : diagnostics) {
        lines << d.toString();
    }
    return lines.join(QLatin1Char('\n'));
}

}  // namespace

class Fp4Test : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void decodesEveryCodeLowNibbleFirst() {
        std::array<std::uint8_t, 8> bytes{};
        for (std::uint8_t code = 0; code < 16; code += 2) {
            bytes[code / 2] = static_cast<std::uint8_t>(code | ((code + 1) << 4));
        }
        std::array<float, 16> out{};
        decode(DType::FP4E2M1, bytes.data(), out.data(), out.size());
        for (std::size_t i = 0; i < out.size(); ++i) {
            QCOMPARE(out[i], kValues[i]);
            QCOMPARE(std::signbit(out[i]), std::signbit(kValues[i]));
        }
        // Starting in the middle of the first byte: its high nibble first.
        std::array<float, 5> skipped{};
        decode(DType::FP4E2M1, bytes.data(), skipped.data(), skipped.size(), 1);
        QCOMPARE(skipped[0], kValues[1]);
        QCOMPARE(skipped[4], kValues[5]);
    }

    void storedBoxesRoundOutToWholeBytes() {
        const std::vector<std::int64_t> shape = {3, 6};
        const StoredBox odd = storedBox(DType::FP4E2M1, shape, std::vector<std::int64_t>{1, 1},
                                        std::vector<std::int64_t>{2, 4});
        QCOMPARE(odd.shape, (std::vector<std::int64_t>{3, 3}));
        QCOMPARE(odd.start, (std::vector<std::int64_t>{1, 0}));
        QCOMPARE(odd.count, (std::vector<std::int64_t>{2, 3}));  // elements 1..4: bytes 0..2
        QCOMPARE(odd.skip, std::size_t{1});
        QCOMPARE(odd.words(), std::size_t{6});
        const StoredBox even = storedBox(DType::FP4E2M1, shape, std::vector<std::int64_t>{0, 2},
                                         std::vector<std::int64_t>{3, 2});
        QCOMPARE(even.start, (std::vector<std::int64_t>{0, 1}));
        QCOMPARE(even.count, (std::vector<std::int64_t>{3, 1}));
        QCOMPARE(even.skip, std::size_t{0});
        // Other dtypes: a word is an element.
        const StoredBox bf16 = storedBox(DType::BF16, shape, std::vector<std::int64_t>{1, 1},
                                         std::vector<std::int64_t>{2, 4});
        QCOMPARE(bf16.count, (std::vector<std::int64_t>{2, 4}));
        QCOMPARE(datasetBytes(DType::FP4E2M1, shape), std::int64_t{9});
        QCOMPARE(datasetBytes(DType::BF16, shape), std::int64_t{36});
        QCOMPARE(elementShape(DType::FP4E2M1, std::vector<std::int64_t>{3, 3}), shape);
    }

    void e4m3ScaleFormatHoldsExactlyTheE4m3Numbers() {
        for (const double held : {448.0, 1.0, 1.875, 0.015625, 0.001953125, 0.013671875}) {
            QVERIFY2(holdsScale(ScaleFormat::E4M3, held), qPrintable(QString::number(held)));
        }
        // 3 mantissa bits; at most 448; subnormals are multiples of 2^-9; positive
        for (const double outside : {1.0625, 480.0, 0.0009765625, 0.0029296875, 0.0, -1.0}) {
            QVERIFY2(!holdsScale(ScaleFormat::E4M3, outside), qPrintable(QString::number(outside)));
        }
        QVERIFY(holdsScale(ScaleFormat::E8M0, 0.25));
        QVERIFY(!holdsScale(ScaleFormat::E8M0, 0.75));
    }

    void scaleFormatsNameTheirRecipes() {
        QCOMPARE(recipeName(DType::FP4E2M1, ScaleFormat::E4M3, true), QStringLiteral("NVFP4"));
        QCOMPARE(recipeName(DType::FP4E2M1, ScaleFormat::E8M0, true), QStringLiteral("MXFP4"));
        QCOMPARE(recipeName(DType::FP8E4M3, ScaleFormat::E8M0, true), QStringLiteral("MXFP8"));
        // float64 scales, and powers of two per tensor, are no recipe of their own
        QCOMPARE(recipeName(DType::FP8E4M3, std::nullopt, true), QStringLiteral("fp8"));
        QCOMPARE(recipeName(DType::FP8E5M2, ScaleFormat::E8M0, false), QStringLiteral("fp8"));
        QCOMPARE(recipeName(DType::FP4E2M1, std::nullopt, false), QStringLiteral("fp4"));
    }

    // Every box of the packed tensor, contiguous (read at its offset) and chunked (through
    // HDF5 in this process, then in an HDF5 worker as the programs read), decodes to code
    // value * block scale * tensor scale.
    void readsEveryBoxOfAPackedTensor() {
        for (const int way : {0, 1, 2}) {
            const bool chunked = way > 0;
            if (way == 2) {
                const auto notIsolated = isolateHdf5ForThisProgram();
                QVERIFY2(!notIsolated, qPrintable(notIsolated.value_or(QString())));
                QVERIFY(hdf5Isolated());
            }
            QTemporaryDir dir;
            QVERIFY(test::writeManifest(dir.path(), 1, QString(), QStringLiteral("reference")));
            {
                test::RankFileWriter w(rankFile(dir.path()), 0);
                const hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
                if (chunked) {
                    const std::array<hsize_t, 2> chunk = {2, 2};
                    H5Pset_chunk(plist, 2, chunk.data());
                }
                const auto bytes = packedTensor();
                const hid_t ds = w.dataset("000000", H5T_STD_U8LE, H5T_NATIVE_UINT8,
                                           {kRows, kCols / 2}, bytes.data(), plist);
                H5Pclose(plist);
                test::RankFileWriter::standardAttributes(ds, "layers.0.mlp.fc1", "forward_input", 0,
                                                         "fp4_e2m1", {kRows, kCols});
                w.blockScales(ds, "000000", {1, 2}, {kRows, kCols / 2}, kBlockScales);
                test::RankFileWriter::variableString(ds, "scale_format", "e4m3");
                test::RankFileWriter::float64(ds, "tensor_scale_inv", kTensorScale);
                H5Dclose(ds);
            }
            const TraceSet set = openTraceSet(dir.path());
            QVERIFY2(set.diagnostics.empty(), qPrintable(messages(set.diagnostics)));
            QCOMPARE(set.records.size(), std::size_t{1});
            const TensorRecord& record = set.records.front();
            // What the scales are, as indexed and as the index cache gives them back: NVFP4's
            QTemporaryDir cacheDir;
            QString cacheError;
            const auto cache =
                IndexCache::open(cacheDir.filePath(QStringLiteral("index.sqlite")), &cacheError);
            QVERIFY2(cache, qPrintable(cacheError));
            OpenOptions viaCache;
            viaCache.cache = cache.get();
            const TraceSet filled = openTraceSet(dir.path(), viaCache);
            const TraceSet cached = openTraceSet(dir.path(), viaCache);
            for (const TraceSet* s : {&set, &filled, &cached}) {
                QCOMPARE(s->records.front().scales.format, std::optional(ScaleFormat::E4M3));
                QVERIFY(s->records.front().scales.tensorScale);
            }
            QCOMPARE(record.localShape, (std::vector<std::int64_t>{3, 6}));
            QCOMPARE(record.storedBytes(), std::int64_t{9});
            QCOMPARE(record.dataOffset.has_value(), !chunked);
            Hdf5Reader reader;
            for (std::int64_t r0 = 0; r0 < 3; ++r0) {
                for (std::int64_t c0 = 0; c0 < 6; ++c0) {
                    for (std::int64_t cols = 1; c0 + cols <= 6; ++cols) {
                        const std::int64_t rows = 3 - r0;
                        std::vector<float> out(static_cast<std::size_t>(rows * cols), -99.0f);
                        const std::vector<std::int64_t> start = {r0, c0}, count = {rows, cols};
                        const auto failure = reader.read(record, start, count, out.data());
                        QVERIFY2(!failure, failure ? qPrintable(failure->toString()) : "");
                        for (std::int64_t r = 0; r < rows; ++r) {
                            for (std::int64_t c = 0; c < cols; ++c) {
                                const auto gr = static_cast<hsize_t>(r0 + r);
                                const auto gc = static_cast<hsize_t>(c0 + c);
                                const double scale = kBlockScales[gr * 3 + gc / 2] * kTensorScale;
                                const auto expected =
                                    static_cast<float>(kValues[codeAt(gr, gc)] * scale);
                                QCOMPARE(out[static_cast<std::size_t>(r * cols + c)], expected);
                            }
                        }
                    }
                }
            }
        }
    }

    // fp4 datasets the indexer cannot read are errors naming the dataset and the problem.
    void malformedFp4IsNamed() {
        QTemporaryDir dir;
        QVERIFY(test::writeManifest(dir.path(), 1, QString(), QStringLiteral("reference")));
        {
            test::RankFileWriter w(rankFile(dir.path()), 0);
            const auto bytes = packedTensor();
            const auto add = [&](const char* name, int seq) {
                const hid_t ds = w.dataset(name, H5T_STD_U8LE, H5T_NATIVE_UINT8, {kRows, kCols / 2},
                                           bytes.data());
                test::RankFileWriter::standardAttributes(
                    ds, QByteArray("t") + name, "forward_input", seq, "fp4_e2m1", {kRows, kCols});
                return ds;
            };
            hid_t ds = add("a", 0);  // right: per tensor, an e4m3 scale
            test::RankFileWriter::float64(ds, "scale_inv", 0.75);
            test::RankFileWriter::variableString(ds, "scale_format", "e4m3");
            H5Dclose(ds);
            ds = add("b", 1);  // e4m3 block scales one of which is not an e4m3 number
            w.blockScales(ds, "b", {1, 2}, {kRows, kCols / 2},
                          {1.0, 1.0, 1.0, 1.0, 1.0625, 1.0, 1.0, 1.0, 1.0});
            test::RankFileWriter::variableString(ds, "scale_format", "e4m3");
            H5Dclose(ds);
            ds = add("c", 2);  // a tensor scale without blocks
            test::RankFileWriter::float64(ds, "scale_inv", 1.0);
            test::RankFileWriter::float64(ds, "tensor_scale_inv", 2.0);
            H5Dclose(ds);
            ds = add("d", 3);  // a negative tensor scale
            w.blockScales(ds, "d", {1, 2}, {kRows, kCols / 2}, kBlockScales);
            test::RankFileWriter::float64(ds, "tensor_scale_inv", -1.0);
            H5Dclose(ds);
            ds = add("e", 4);  // blocks tiling the bytes, not the elements
            w.blockScales(ds, "e", {1, 3}, {kRows, 1}, {1.0, 1.0, 1.0});
            H5Dclose(ds);
            const std::uint8_t one = 0x22;
            ds = w.dataset("f", H5T_STD_U8LE, H5T_NATIVE_UINT8, {}, &one);  // no dimensions
            test::RankFileWriter::standardAttributes(ds, "tf", "forward_input", 5, "fp4_e2m1", {});
            test::RankFileWriter::float64(ds, "scale_inv", 1.0);
            H5Dclose(ds);
            ds = w.dataset("g", H5T_STD_U16LE, H5T_NATIVE_UINT16, {kRows, kCols / 2},
                           std::vector<std::uint16_t>(kRows * kCols / 2).data());  // 16-bit
            test::RankFileWriter::standardAttributes(ds, "tg", "forward_input", 6, "fp4_e2m1",
                                                     {kRows, kCols});
            test::RankFileWriter::float64(ds, "scale_inv", 1.0);
            H5Dclose(ds);
            const std::vector<std::uint16_t> half(kRows * kCols, 0x3f80);  // bf16 ones
            ds = w.dataset("h", H5T_STD_U16LE, H5T_NATIVE_UINT16, {kRows, kCols}, half.data());
            test::RankFileWriter::standardAttributes(ds, "th", "forward_input", 7, "bf16",
                                                     {kRows, kCols});
            test::RankFileWriter::float64(ds, "tensor_scale_inv", 2.0);  // on no scaled dtype
            H5Dclose(ds);
        }
        const TraceSet set = openTraceSet(dir.path());
        QCOMPARE(set.records.size(), std::size_t{1});
        QCOMPARE(set.records.front().scales.scaleInv, std::vector<double>{0.75});
        const std::vector<std::pair<QString, QString>> expected = {
            {QStringLiteral("/tensors/b"),
             QStringLiteral("its scale_format is e4m3, but its scale_inv 1.0625 (at flat index 4 "
                            "of /scale_inv/b) is not a positive fp8 e4m3 number (at most 448, 3 "
                            "mantissa bits)")},
            {QStringLiteral("/tensors/c"),
             QStringLiteral("attribute 'tensor_scale_inv' is given without 'scale_block'")},
            {QStringLiteral("/tensors/d"),
             QStringLiteral("attribute 'tensor_scale_inv' is -1, not a positive finite number")},
            {QStringLiteral("/tensors/e"),
             QStringLiteral("its scales dataset /scale_inv/e has shape [3, 1], but blocks of "
                            "[1, 3] tile the dataset's shape [3, 6] in [3, 2]")},
            {QStringLiteral("/tensors/f"),
             QStringLiteral("is fp4_e2m1 without dimensions: fp4 packs two elements a byte")},
            {QStringLiteral("/tensors/h"),
             QStringLiteral("attribute 'tensor_scale_inv' is given for a bf16 tensor: it scales "
                            "the block scales of fp4 tensors (NVFP4)")},
            {QStringLiteral("/tensors/g"),
             QStringLiteral("dtype fp4_e2m1 must be stored as 8-bit unsigned integers, but the "
                            "dataset stores 16-bit unsigned integers")},
        };
        for (const auto& [dataset, message] : expected) {
            QVERIFY2(test::hasRankZeroError(set.diagnostics, dataset, message),
                     qPrintable(dataset + QStringLiteral(": ") + messages(set.diagnostics)));
        }
    }
};

QTEST_GUILESS_MAIN(Fp4Test)
#include "test_fp4.moc"
