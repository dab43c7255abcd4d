#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "compare/StoredRun.h"
#include "trace/BlockScales.h"

namespace ttrace {

// The scales of a box of stored words pasted together from pieces (a trusted run laid out
// over ranks, BlockComparer): one scale per tensor that every piece shares; per-tensor scales
// that differ from piece to piece (each rank's own amax) as a table of one entry per run of
// `columnGrid` columns; or the pieces' tables of block scales pasted where their rows and
// block columns fall in the box. The box then decodes as each piece does. Pieces tile the
// box, each added once.
class PastedScales {
public:
    // Starts a box of `count` elements whose rows are `pitch` stored elements apart, the
    // first at stored column `origin` (fp4: whole bytes, two elements each), and whose table,
    // where it has one, is `table`. Every piece starts and ends on a multiple of `columnGrid`
    // columns of the box, or at its end.
    void start(std::span<const std::int64_t> count, std::size_t pitch, std::size_t origin,
               std::int64_t columnGrid, std::vector<float>& table);

    // Adds the piece of `pieceCount` elements at `offset` in the box, its stored words
    // described by `piece`. False where one table cannot say both it and the pieces before:
    // a table beside a per-tensor scale, per-tensor scales that differ where a table of them
    // would hold a float an element, blocks of another width or on another grid of the box's
    // columns, a block split with a neighbouring piece (whose two halves may carry two scales).
    [[nodiscard]] bool add(const StoredWords& piece, std::span<const std::int64_t> offset,
                           std::span<const std::int64_t> pieceCount);

    // The box's scales, pointing into its table.
    StoredScales scales() const;

private:
    // A piece under one scale per tensor, until they differ.
    struct Placed {
        std::vector<std::int64_t> offset, count;
        float scaleInv;
    };

    [[nodiscard]] bool addPerTensor(float scaleInv, std::span<const std::int64_t> offset,
                                    std::span<const std::int64_t> pieceCount);
    // Writes `scaleInv` into the table's entries of the piece (one per columnGrid_ columns).
    [[nodiscard]] bool fillEntries(float scaleInv, std::span<const std::int64_t> offset,
                                   std::span<const std::int64_t> pieceCount);
    // Pastes `table` (rows of the piece, `entries` a row) into the box's at `offset`.
    void pasteEntries(const float* table, std::span<const std::int64_t> offset,
                      std::span<const std::int64_t> pieceCount, std::size_t entry,
                      std::size_t entries);

    std::vector<std::int64_t> count_;
    std::size_t origin_ = 0;
    std::int64_t columnGrid_ = 1;
    std::vector<float>* table_ = nullptr;
    bool started_ = false;
    bool perTensorPieces_ = false;
    std::vector<Placed> placed_;
    // The box's element column c is under entry (c + elementShift_) / blockColumns.
    std::int64_t elementShift_ = 0;
    StoredScales scales_;
};

}  // namespace ttrace
