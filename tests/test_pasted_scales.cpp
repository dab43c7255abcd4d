// PastedScales (core/compare): the scales of a box pasted together from pieces of stored words
// (a trusted run laid out over ranks, as the CUDA backend is given it) decode the box exactly
// as each piece decodes on its own (per-tensor scales that differ included, as a table), or
// are refused where one table cannot say them: per-tensor scales that differ on pieces that
// start on odd columns (a float an element), a table beside a per-tensor scale, blocks of
// another width, a block that two pieces split between them.
#include <QTest>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "compare/PastedScales.h"
#include "compare/StoredRun.h"
#include "trace/BlockScales.h"
#include "trace/BoxCopy.h"
#include "trace/DType.h"

using namespace ttrace;

namespace {

constexpr std::int64_t kRows = 4, kCols = 64;

// One piece of the box: a whole dataset of e4m3 words with its block scales, at `offset`;
// `stored` describes them (its table is `table`, pointed at again where the piece is copied).
struct Piece {
    std::vector<std::int64_t> count, offset;
    BlockScales scales;
    std::vector<std::uint8_t> words;
    std::vector<float> table;
    StoredScales stored;
};

Piece piece(std::vector<std::int64_t> count, std::vector<std::int64_t> offset,
            std::vector<std::int64_t> block, std::uint32_t seed) {
    std::mt19937 rng(seed);
    Piece p;
    p.count = std::move(count);
    p.offset = std::move(offset);
    p.words.resize(static_cast<std::size_t>(p.count[0] * p.count[1]));
    for (auto& word : p.words) {
        word = static_cast<std::uint8_t>(rng() % 0x7e);  // no NaN
    }
    p.scales.block = std::move(block);
    const auto grid = p.scales.perTensor() ? std::vector<std::int64_t>{1} : p.scales.grid(p.count);
    std::size_t blocks = 1;
    for (const auto n : grid) {
        blocks *= static_cast<std::size_t>(n);
    }
    p.scales.scaleInv.resize(blocks);
    for (double& scale : p.scales.scaleInv) {
        scale = std::ldexp(1.0, static_cast<int>(rng() % 9) - 4);
    }
    const std::vector<std::int64_t> start(2, 0);
    p.stored = p.scales.boxScales(DType::FP8E4M3, p.count, start, p.count, p.table);
    return p;
}

StoredWords wordsOf(const void* data, std::int64_t columns, const StoredScales& scales) {
    StoredWords words;
    words.data = data;
    words.dtype = DType::FP8E4M3;
    words.stride = static_cast<std::size_t>(columns);
    words.scales = scales;
    return words;
}

// Pastes `pieces` into a box of kRows x kCols; true with `decoded` the box decoded from its
// pasted words and scales, `expected` each piece decoded alone, placed; false where refused.
bool pasteAll(std::vector<Piece>& pieces, std::vector<float>& decoded,
              std::vector<float>& expected) {
    const std::vector<std::int64_t> box{kRows, kCols};
    std::vector<std::uint8_t> words(static_cast<std::size_t>(kRows * kCols));
    std::vector<float> table;
    std::int64_t columnGrid = kCols;  // as BlockComparer finds it
    for (const Piece& p : pieces) {
        columnGrid = std::gcd(columnGrid, std::gcd(p.offset[1], p.count[1]));
    }
    PastedScales pasted;
    pasted.start(box, kCols, 0, columnGrid, table);
    expected.assign(words.size(), 0.0F);
    for (Piece& p : pieces) {
        p.stored.table = p.table.empty() ? nullptr : p.table.data();  // this copy's table
        pasteBox(reinterpret_cast<const std::byte*>(p.words.data()), box, p.offset, p.count, 1,
                 reinterpret_cast<std::byte*>(words.data()));
        if (!pasted.add(wordsOf(p.words.data(), p.count[1], p.stored), p.offset, p.count)) {
            return false;
        }
        std::vector<float> alone(p.words.size());
        decodeStored(wordsOf(p.words.data(), p.count[1], p.stored), {},
                     static_cast<std::size_t>(p.count[1]), static_cast<std::size_t>(p.count[0]),
                     alone.data());
        pasteBox(reinterpret_cast<const std::byte*>(alone.data()), box, p.offset, p.count,
                 sizeof(float), reinterpret_cast<std::byte*>(expected.data()));
    }
    decoded.assign(words.size(), 0.0F);
    decodeStored(wordsOf(words.data(), kCols, pasted.scales()), {}, kCols, kRows, decoded.data());
    return true;
}

}  // namespace

class TestPastedScales : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void piecesDecodeAsTheyDoAlone_data() {
        QTest::addColumn<int>("layout");
        QTest::newRow("MX blocks of 32, columns split at 32") << 0;
        QTest::newRow("a scale per row, rows split") << 1;
        QTest::newRow("one scale per tensor, shared") << 2;
        QTest::newRow("blocks of 16, two column pieces over two row pieces") << 3;
        QTest::newRow("per-tensor scales that differ, rows split (batches)") << 4;
        QTest::newRow("per-tensor scales that differ, columns split at 16 and 48") << 5;
    }
    void piecesDecodeAsTheyDoAlone() {
        QFETCH(int, layout);
        std::vector<Piece> pieces;
        switch (layout) {
            case 0:
                pieces = {piece({4, 32}, {0, 0}, {1, 32}, 1), piece({4, 32}, {0, 32}, {1, 32}, 2)};
                break;
            case 1:
                pieces = {piece({2, 64}, {0, 0}, {1, 64}, 3), piece({2, 64}, {2, 0}, {1, 64}, 4)};
                break;
            case 2:
                pieces = {piece({4, 32}, {0, 0}, {}, 7), piece({4, 32}, {0, 32}, {}, 8)};
                pieces[1].stored.scaleInv = pieces[0].stored.scaleInv;
                break;
            case 4:
                pieces = {piece({1, 64}, {0, 0}, {}, 20), piece({3, 64}, {1, 0}, {}, 21)};
                pieces[1].stored.scaleInv = 2 * pieces[0].stored.scaleInv;
                break;
            case 5:
                pieces = {piece({4, 16}, {0, 0}, {}, 22), piece({4, 32}, {0, 16}, {}, 23),
                          piece({4, 16}, {0, 48}, {}, 24)};
                pieces[1].stored.scaleInv = 4 * pieces[0].stored.scaleInv;
                pieces[2].stored.scaleInv = pieces[0].stored.scaleInv;
                break;
            default:
                for (std::int64_t r = 0; r < 2; ++r) {
                    for (std::int64_t c = 0; c < 2; ++c) {
                        pieces.push_back(piece({2, 32}, {2 * r, 32 * c}, {1, 16},
                                               static_cast<std::uint32_t>(10 + 2 * r + c)));
                    }
                }
        }
        std::vector<float> decoded, expected;
        QVERIFY(pasteAll(pieces, decoded, expected));
        QVERIFY(std::any_of(expected.begin(), expected.end(), [](float v) { return v != 0; }));
        QVERIFY(std::memcmp(decoded.data(), expected.data(), decoded.size() * sizeof(float)) == 0);
    }

    void whatOneTableCannotSayIsRefused_data() {
        QTest::addColumn<int>("layout");
        QTest::newRow("per-tensor scales that differ, a piece on an odd column") << 0;
        QTest::newRow("a table beside a per-tensor scale") << 1;
        QTest::newRow("blocks of another width") << 2;
        QTest::newRow("a block of 32 split at column 24") << 3;
    }
    void whatOneTableCannotSayIsRefused() {
        QFETCH(int, layout);
        std::vector<Piece> pieces;
        switch (layout) {
            case 0:
                pieces = {piece({4, 33}, {0, 0}, {}, 1), piece({4, 31}, {0, 33}, {}, 2)};
                pieces[1].stored.scaleInv = 2 * pieces[0].stored.scaleInv;
                break;
            case 1:
                pieces = {piece({4, 32}, {0, 0}, {}, 3), piece({4, 32}, {0, 32}, {1, 32}, 4)};
                break;
            case 2:
                pieces = {piece({4, 32}, {0, 0}, {1, 32}, 5), piece({4, 32}, {0, 32}, {1, 16}, 6)};
                break;
            default:
                pieces = {piece({4, 24}, {0, 0}, {1, 32}, 7), piece({4, 40}, {0, 24}, {1, 32}, 8)};
        }
        std::vector<float> decoded, expected;
        QVERIFY(!pasteAll(pieces, decoded, expected));
    }
};

QTEST_GUILESS_MAIN(TestPastedScales)
#include "test_pasted_scales.moc"
