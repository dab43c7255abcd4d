#include "compare/PastedScales.h"

#include <cstring>

#include "trace/BoxCopy.h"

namespace ttrace {

namespace {

std::int64_t floorMod(std::int64_t a, std::int64_t b) {
    const std::int64_t r = a % b;
    return r < 0 ? r + b : r;
}

std::size_t leadingRows(std::span<const std::int64_t> count) {
    std::size_t rows = 1;
    for (std::size_t d = 0; d + 1 < count.size(); ++d) {
        rows *= static_cast<std::size_t>(count[d]);
    }
    return rows;
}

bool sameBits(float a, float b) {
    return std::memcmp(&a, &b, sizeof(float)) == 0;  // a scale of -0 is not one of +0
}

}  // namespace

void PastedScales::start(std::span<const std::int64_t> count, std::size_t pitch, std::size_t origin,
                         std::int64_t columnGrid, std::vector<float>& table) {
    count_.assign(count.begin(), count.end());
    origin_ = origin;
    columnGrid_ = columnGrid;
    table_ = &table;
    table_->clear();
    started_ = false;
    placed_.clear();
    elementShift_ = 0;
    scales_ = StoredScales{};
    scales_.pitch = pitch;
}

bool PastedScales::add(const StoredWords& piece, std::span<const std::int64_t> offset,
                       std::span<const std::int64_t> pieceCount) {
    const StoredScales& scales = piece.scales;
    const bool perTensor = scales.table == nullptr;
    // The piece's element column j is under its entry (j + shift) / blockColumns.
    const std::int64_t shift = scales.columnShift + static_cast<std::int64_t>(piece.origin);
    const std::int64_t column = offset.empty() ? 0 : offset.back();
    if (!started_) {
        started_ = true;
        perTensorPieces_ = perTensor;
        scales_.scaleInv = scales.scaleInv;
        if (!perTensor) {
            // The box's grid of block columns: the first piece's, moved to the box's columns.
            const auto width = static_cast<std::int64_t>(scales.blockColumns);
            const std::int64_t columns = count_.empty() ? 1 : count_.back();
            scales_.blockColumns = scales.blockColumns;
            elementShift_ = floorMod(shift - column, width);
            scales_.rowEntries =
                static_cast<std::size_t>((columns - 1 + elementShift_) / width + 1);
            table_->assign(leadingRows(count_) * scales_.rowEntries, 0.0F);
        }
    }
    if (perTensor != perTensorPieces_) {
        return false;  // a scale per tensor beside a table
    }
    if (perTensor) {
        return addPerTensor(scales.scaleInv, offset, pieceCount);
    }
    const auto width = static_cast<std::int64_t>(scales_.blockColumns);
    const std::int64_t columns = pieceCount.empty() ? 1 : pieceCount.back();
    const std::int64_t boxColumns = count_.empty() ? 1 : count_.back();
    const std::int64_t first = column + elementShift_ - shift;
    const bool onGrid =
        scales.blockColumns == scales_.blockColumns && first >= 0 && first % width == 0;
    // Its first and last block lie in it alone: it starts and ends on a block's edge, or at
    // the box's.
    const bool ownBlocks =
        (column == 0 || (column + elementShift_) % width == 0) &&
        (column + columns == boxColumns || (column + columns + elementShift_) % width == 0);
    const auto entry = static_cast<std::size_t>(first / width);
    if (!onGrid || !ownBlocks || entry + scales.rowEntries > scales_.rowEntries) {
        return false;
    }
    pasteEntries(scales.table, offset, pieceCount, entry, scales.rowEntries);
    return true;
}

bool PastedScales::addPerTensor(float scaleInv, std::span<const std::int64_t> offset,
                                std::span<const std::int64_t> pieceCount) {
    if (scales_.blockColumns != 0) {
        return fillEntries(scaleInv, offset, pieceCount);
    }
    placed_.push_back(
        {{offset.begin(), offset.end()}, {pieceCount.begin(), pieceCount.end()}, scaleInv});
    if (sameBits(scaleInv, scales_.scaleInv)) {
        return true;
    }
    // They differ: a table of one float per columnGrid_ columns. At a float an element or
    // more, the box would cross as wide as fp32, and is left to it.
    if (columnGrid_ < 2) {
        return false;
    }
    scales_.blockColumns = static_cast<std::size_t>(columnGrid_);
    elementShift_ = 0;
    const std::int64_t columns = count_.empty() ? 1 : count_.back();
    scales_.rowEntries = static_cast<std::size_t>((columns - 1) / columnGrid_ + 1);
    table_->assign(leadingRows(count_) * scales_.rowEntries, 0.0F);
    for (const Placed& p : placed_) {
        if (!fillEntries(p.scaleInv, p.offset, p.count)) {
            return false;
        }
    }
    placed_.clear();
    return true;
}

bool PastedScales::fillEntries(float scaleInv, std::span<const std::int64_t> offset,
                               std::span<const std::int64_t> pieceCount) {
    const std::int64_t column = offset.empty() ? 0 : offset.back();
    const std::int64_t columns = pieceCount.empty() ? 1 : pieceCount.back();
    const std::int64_t boxColumns = count_.empty() ? 1 : count_.back();
    if (column % columnGrid_ != 0 ||
        (columns % columnGrid_ != 0 && column + columns != boxColumns)) {
        return false;  // off the grid the caller promised
    }
    const auto entries = static_cast<std::size_t>((columns + columnGrid_ - 1) / columnGrid_);
    const std::vector<float> table(leadingRows(pieceCount) * entries, scaleInv);
    pasteEntries(table.data(), offset, pieceCount, static_cast<std::size_t>(column / columnGrid_),
                 entries);
    return true;
}

void PastedScales::pasteEntries(const float* table, std::span<const std::int64_t> offset,
                                std::span<const std::int64_t> pieceCount, std::size_t entry,
                                std::size_t entries) {
    // The table as an array of [leading dimensions..., entries of a row].
    std::vector<std::int64_t> tableShape(count_.begin(), count_.end());
    std::vector<std::int64_t> at(offset.begin(), offset.end());
    std::vector<std::int64_t> extent(pieceCount.begin(), pieceCount.end());
    if (tableShape.empty()) {
        tableShape = at = extent = {0};
    }
    tableShape.back() = static_cast<std::int64_t>(scales_.rowEntries);
    at.back() = static_cast<std::int64_t>(entry);
    extent.back() = static_cast<std::int64_t>(entries);
    pasteBox(reinterpret_cast<const std::byte*>(table), tableShape, at, extent, sizeof(float),
             reinterpret_cast<std::byte*>(table_->data()));
}

StoredScales PastedScales::scales() const {
    StoredScales out = scales_;
    if (out.blockColumns != 0) {
        out.table = table_->data();
        out.columnShift = elementShift_ - static_cast<std::int64_t>(origin_);
    }
    return out;
}

}  // namespace ttrace
