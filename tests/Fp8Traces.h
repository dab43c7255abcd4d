#pragma once

// Hand-built fp8 traces (real HDF5 files): a [2, 4] tensor-parallel tensor of two column
// shards whose bytes decode to the reference's values, so that only the scales can tell a
// shard quantized with its own amax from a right one. test_fp8_scales checks the scale check
// on them, test_gui what the window shows of it.
#include <QDir>
#include <QTemporaryDir>
#include <QTest>
#include <cstdint>
#include <vector>

#include "Hdf5TestFiles.h"

namespace ttrace::test {

// E4M3 bit patterns of 1, 2, 3, 4 and 8.
inline constexpr std::uint8_t kOne = 0x38, kTwo = 0x40, kThree = 0x44, kFour = 0x48, kEight = 0x50;
inline constexpr std::int32_t kRows = 2, kCols = 4;
inline const QByteArray kName = "layers.0.attn.qkv";

inline QString rankFile(const QString& folder, int rank) {
    return folder + QStringLiteral("/rank%1.h5").arg(rank, 5, 10, QLatin1Char('0'));
}

// One fp8 forward_input dataset: `bytes` of a [rows, cols] box at `ranges` (JSON; empty for
// the whole tensor) with `scaleInv`, split along the columns unless `placements` says else.
inline void writeFp8(const QString& path, int rank, const std::vector<std::uint8_t>& bytes,
                     hsize_t cols, double scaleInv, const QByteArray& ranges, hsize_t rows = kRows,
                     const QByteArray& placements = "{\"tp\": \"Shard(1)\"}") {
    RankFileWriter w(path, rank);
    QVERIFY(w.valid());
    const hid_t ds =
        w.dataset("000000", H5T_STD_U8LE, H5T_NATIVE_UINT8, {rows, cols}, bytes.data());
    RankFileWriter::standardAttributes(ds, kName, "forward_input", 0, "fp8_e4m3", {kRows, kCols});
    RankFileWriter::float64(ds, "scale_inv", scaleInv);
    if (!ranges.isEmpty()) {
        RankFileWriter::variableString(ds, "ranges", ranges);
        RankFileWriter::variableString(ds, "placements", placements);
    }
    H5Dclose(ds);
}

// How a rank stores its shard: the byte of every element and the scale_inv that decodes it.
// Each choice decodes to 2, the reference's value, so only the scale can differ.
struct ShardBytes {
    std::uint8_t byte = kTwo;
    double scaleInv = 1.0;
};
inline constexpr ShardBytes kRightScale{kTwo, 1.0};
inline constexpr ShardBytes kHalfScale{kFour, 0.5};              // 4 x 1/2
inline constexpr ShardBytes kDoubleScale{kOne, 2.0};             // 1 x 2
inline constexpr ShardBytes kTwoThirdsScale{kThree, 2.0 / 3.0};  // 3 x 2/3

// Per-row or per-block scaling: the byte of every element of a block and the block's
// scale_inv; each choice decodes to 2.
struct BlockBytes {
    std::uint8_t byte = kTwo;
    double scaleInv = 1.0;
};
inline constexpr BlockBytes kOneX{kTwo, 1.0};
inline constexpr BlockBytes kHalfX{kFour, 0.5};       // 4 x 1/2
inline constexpr BlockBytes kQuarterX{kEight, 0.25};  // 8 x 1/4
// Blocks of [1, block columns], row by row: one column of them scales per row.
using BlockGrid = std::vector<std::vector<BlockBytes>>;

inline BlockGrid perRow(const std::vector<BlockBytes>& rows) {
    BlockGrid grid;
    for (const BlockBytes& row : rows) {
        grid.push_back({row});
    }
    return grid;
}

// One fp8 forward_input dataset of `grid` blocks of [1, blockCols], at `ranges` (JSON; empty
// for the whole tensor), its scales in `scaleFormat` where one is given ("e8m0": MXFP8's).
inline void writeBlockScaledFp8(const QString& path, int rank, const BlockGrid& grid,
                                hsize_t blockCols, const QByteArray& ranges,
                                const char* scaleFormat = nullptr) {
    RankFileWriter w(path, rank);
    QVERIFY(w.valid());
    std::vector<std::uint8_t> bytes;
    std::vector<double> scales;
    for (const auto& row : grid) {
        for (const BlockBytes& block : row) {
            bytes.insert(bytes.end(), blockCols, block.byte);
            scales.push_back(block.scaleInv);
        }
    }
    const hsize_t rows = grid.size(), gridCols = grid.front().size();
    const hid_t ds = w.dataset("000000", H5T_STD_U8LE, H5T_NATIVE_UINT8,
                               {rows, gridCols * blockCols}, bytes.data());
    RankFileWriter::standardAttributes(ds, kName, "forward_input", 0, "fp8_e4m3", {kRows, kCols});
    w.blockScales(ds, "000000", {1, static_cast<std::int32_t>(blockCols)}, {rows, gridCols},
                  scales);
    if (scaleFormat != nullptr) {
        RankFileWriter::variableString(ds, "scale_format", scaleFormat);
    }
    if (!ranges.isEmpty()) {
        RankFileWriter::variableString(ds, "ranges", ranges);
        RankFileWriter::variableString(ds, "placements", "{\"tp\": \"Shard(1)\"}");
    }
    H5Dclose(ds);
}

// The three folders of a check, the trusted runs written whole: 2 everywhere, the reference
// with scale_inv 1, the perturbed reference with `perturbedScale`; the distributed run's
// folder is left to the caller.
struct WholeTrustedFp8Runs {
    QTemporaryDir dir;
    QString dist, ref, pert;

    explicit WholeTrustedFp8Runs(double perturbedScale) {
        ref = dir.filePath(QStringLiteral("ref"));
        pert = dir.filePath(QStringLiteral("pert"));
        dist = dir.filePath(QStringLiteral("dist"));
        for (const auto& folder : {ref, pert, dist}) {
            QVERIFY(QDir().mkpath(folder));
        }
        const std::vector<std::uint8_t> whole(kRows * kCols, kTwo);
        QVERIFY(writeManifest(ref, 1, QString(), QStringLiteral("reference")));
        writeFp8(rankFile(ref, 0), 0, whole, kCols, 1.0, {});
        QVERIFY(writeManifest(pert, 1, QString(), QStringLiteral("perturbed-reference")));
        writeFp8(rankFile(pert, 0), 0, whole, kCols, perturbedScale, {});
    }
};

// The trusted runs of WholeTrustedFp8Runs; the distributed run splits the columns over two TP
// ranks, stored as `shard1` and `shard0` say.
struct Fp8Traces : WholeTrustedFp8Runs {
    Fp8Traces(double perturbedScale, ShardBytes shard1, ShardBytes shard0 = kRightScale)
        : WholeTrustedFp8Runs(perturbedScale) {
        QVERIFY(writeManifest(dist, 2, QStringLiteral("tp")));
        const std::vector<std::uint8_t> left(kRows * kCols / 2, shard0.byte);
        writeFp8(rankFile(dist, 0), 0, left, kCols / 2, shard0.scaleInv, "[[[0,2]],[[0,2]]]");
        const std::vector<std::uint8_t> right(kRows * kCols / 2, shard1.byte);
        writeFp8(rankFile(dist, 1), 1, right, kCols / 2, shard1.scaleInv, "[[[0,2]],[[2,4]]]");
    }
};

}  // namespace ttrace::test
