#pragma once

#include <QString>
#include <cstddef>
#include <vector>

#include "compare/TensorResult.h"

namespace ttrace {

// The layer-by-layer heatmap's layout, shared by the report and any other view of it: rows
// are modules in the reference's execution order (so grouped by layer), columns are tensor
// kind x iteration x micro-batch (x output index, x parameter for parameter kinds, so that a
// module's weight and bias get a cell each), one cell per tensor result.
struct HeatmapRow {
    QString module;
    int layer = -1;
};

struct HeatmapColumn {
    TensorKind kind = TensorKind::ForwardOutput;
    int index = 0;
    int iteration = 0;
    int microBatch = 0;
    QString parameter;  // parameter kinds: the name below the module ("weight"), else empty

    QString label() const;  // "it0 mb1", "it0 mb1 [2]", "it1 weight"
};

struct HeatmapCell {
    std::size_t row = 0;
    std::size_t column = 0;
    std::size_t result = 0;  // index into the results
};

struct HeatmapGrid {
    std::vector<HeatmapRow> rows;
    std::vector<HeatmapColumn> columns;  // ordered by kind, iteration, micro-batch, index
    std::vector<HeatmapCell> cells;      // in result order
};

HeatmapGrid buildHeatmapGrid(const std::vector<TensorResult>& results);

}  // namespace ttrace
