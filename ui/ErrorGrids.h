#pragma once

#include <vector>

#include "ErrorGrid.h"
#include "HeatmapFilter.h"
#include "report/CheckReport.h"
#include "report/HeatmapGrid.h"

namespace ttrace {

// The layer-by-layer heatmap (rows: modules in execution order, grouped by layer; columns:
// tensor kind x iteration x micro-batch) of the results `filter` shows. `layout` is
// buildHeatmapGrid of the report's results, built once per report: a filter then costs one
// test per row and column and a pass over the cells.
ErrorGrid layerErrorGrid(const CheckReport& report, const HeatmapGrid& layout,
                         const HeatmapFilter& filter = {});

// Rows of a ranks x layer grid before ranks are grouped.
constexpr std::size_t kMaxRankRows = 64;

// One layer across the ranks: rows are the ranks in `within` holding a piece of the layer's
// tensors (in mesh order, grouped along the mesh axes but the last), columns are the layer's
// tensors in execution order (those `filter` shows), each cell the worst normalized error of
// the pieces that rank holds. With more than `maxRows` such ranks, a row is a block of ranks
// (groupRanks) and a cell the worst of its members.
ErrorGrid rankLayerGrid(const CheckReport& report, int layer, const HeatmapFilter& filter = {},
                        const RankBox& within = {}, std::size_t maxRows = kMaxRankRows);

// The layers that have results, ascending (-1 for tensors outside the layers comes first).
std::vector<int> resultLayers(const CheckReport& report);

// "layer 3", or "outside the layers" for -1.
QString layerName(int layer);

// "pp1 dp0 tp1" (axes of size 1 left out), or empty when the manifest has no mesh
// coordinates for `rank`.
QString meshCoordinates(const Manifest& manifest, int rank);

// The keys' texts without the module path they all share ("layers.1.": "mlp.fc1
// forward_output[0] it0 mb0"): column labels of one layer, short enough to read. A key
// whose name is that path itself keeps its whole text.
QStringList labelsWithinLayer(const std::vector<const TensorKey*>& keys);

}  // namespace ttrace
