#pragma once

#include <QStringList>
#include <cstddef>
#include <optional>
#include <vector>

#include "RankGroups.h"

namespace ttrace {

// What a heatmap view draws: labelled rows and columns and cells of normalized error, each
// cell standing for one tensor result (and, on per-rank views, one rank of it).
struct ErrorGridCell {
    int row = 0;
    int column = 0;
    double normalizedError = 0;
    std::size_t result = 0;
    std::optional<int> rank;
};

struct ErrorGrid {
    QStringList rowLabels;
    std::vector<int> rowGroups;  // one per row: a line is drawn where the group changes
    // Ranks x layer grids with more ranks than rows: each row a block of ranks (its cells the
    // worst of their members), activating one shows its members. Else empty.
    std::vector<RankBox> rowBoxes;
    QStringList columnLabels;
    std::vector<ErrorGridCell> cells;
    std::optional<std::size_t> markedResult;  // its cells framed: the first faulty tensor
};

}  // namespace ttrace
