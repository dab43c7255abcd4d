#include "compare/PastedScales.h"

#include <cstring>

#include "trace/BoxCopy.h"

namespace ttrace {

namespace {

std::int64_t floorMod(std::int64_t a, std::int64_t b) {
    const std::int64_t r = a % b;
    return r < 0 ? r + b : r;
}

}  // namespace

void PastedScales::start(std::span<const std::int64_t> count, std::vector<float>& table) {
    count_.assign(count.begin(), count.end());
    table_ = &table;
    table_->clear();
    started_ = false;
    scales_ = StoredScales{};
}

bool PastedScales::add(const StoredScales& scales, std::span<const std::int64_t> offset,
                       std::span<const std::int64_t> pieceCount) {
    const bool perTensor = scales.table == nullptr;
    if (!started_) {
        started_ = true;
        scales_.table = nullptr;
        scales_.scaleInv = scales.scaleInv;
        if (!perTensor) {
            // The box's grid of block columns: the first piece's, moved to the box's columns.
            const auto width = static_cast<std::int64_t>(scales.blockColumns);
            const std::int64_t columns = count_.empty() ? 1 : count_.back();
            scales_.blockColumns = scales.blockColumns;
            scales_.columnShift =
                floorMod(scales.columnShift - (offset.empty() ? 0 : offset.back()), width);
            scales_.rowEntries =
                static_cast<std::size_t>((columns - 1 + scales_.columnShift) / width + 1);
            scales_.pitch = static_cast<std::size_t>(columns);
            std::size_t rows = 1;
            for (std::size_t d = 0; d + 1 < count_.size(); ++d) {
                rows *= static_cast<std::size_t>(count_[d]);
            }
            table_->assign(rows * scales_.rowEntries, 0.0F);
        }
    }
    if (perTensor != (scales_.blockColumns == 0)) {
        return false;  // a scale per tensor beside a table
    }
    if (perTensor) {
        return std::memcmp(&scales.scaleInv, &scales_.scaleInv, sizeof(float)) == 0;
    }
    const auto width = static_cast<std::int64_t>(scales_.blockColumns);
    const std::int64_t column = offset.empty() ? 0 : offset.back();
    const std::int64_t columns = pieceCount.empty() ? 1 : pieceCount.back();
    const std::int64_t boxColumns = count_.empty() ? 1 : count_.back();
    const std::int64_t first = column + scales_.columnShift - scales.columnShift;
    const bool onGrid =
        scales.blockColumns == scales_.blockColumns && first >= 0 && first % width == 0;
    // Its first and last block lie in it alone: it starts and ends on a block's edge, or at
    // the box's.
    const bool ownBlocks =
        (column == 0 || (column + scales_.columnShift) % width == 0) &&
        (column + columns == boxColumns || (column + columns + scales_.columnShift) % width == 0);
    const auto entry = static_cast<std::size_t>(first / width);
    if (!onGrid || !ownBlocks || entry + scales.rowEntries > scales_.rowEntries) {
        return false;
    }
    // The table as an array of [leading dimensions..., entries of a row].
    std::vector<std::int64_t> tableShape(count_.begin(), count_.end());
    std::vector<std::int64_t> at(offset.begin(), offset.end());
    std::vector<std::int64_t> extent(pieceCount.begin(), pieceCount.end());
    if (tableShape.empty()) {
        tableShape = at = extent = {0};
    }
    tableShape.back() = static_cast<std::int64_t>(scales_.rowEntries);
    at.back() = static_cast<std::int64_t>(entry);
    extent.back() = static_cast<std::int64_t>(scales.rowEntries);
    pasteBox(reinterpret_cast<const std::byte*>(scales.table), tableShape, at, extent,
             sizeof(float), reinterpret_cast<std::byte*>(table_->data()));
    return true;
}

StoredScales PastedScales::scales() const {
    StoredScales out = scales_;
    if (out.blockColumns != 0) {
        out.table = table_->data();
    }
    return out;
}

}  // namespace ttrace
