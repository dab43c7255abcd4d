#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "trace/BlockScales.h"

namespace ttrace {

// The scales of a box of stored words pasted together from pieces (a trusted run laid out
// over ranks, BlockComparer): one scale per tensor that every piece shares, or the pieces'
// tables of block scales pasted where their rows and block columns fall in the box, so that
// the box decodes as each piece does. A box of whole-byte elements only (its rows are its
// stored rows); pieces tile it, each added once.
class PastedScales {
public:
    // Starts a box of `count` elements whose table, where it has one, is `table`.
    void start(std::span<const std::int64_t> count, std::vector<float>& table);

    // Adds the piece of `pieceCount` elements at `offset` in the box, its stored words
    // described by `scales`. False where one table cannot say both it and the pieces before:
    // a scale per tensor unlike theirs or beside a table, blocks of another width or on
    // another grid of the box's columns, a block split with a neighbouring piece (whose two
    // halves may carry two scales).
    [[nodiscard]] bool add(const StoredScales& scales, std::span<const std::int64_t> offset,
                           std::span<const std::int64_t> pieceCount);

    // The box's scales, pointing into its table.
    StoredScales scales() const;

private:
    std::vector<std::int64_t> count_;
    std::vector<float>* table_ = nullptr;
    bool started_ = false;
    StoredScales scales_;
};

}  // namespace ttrace
