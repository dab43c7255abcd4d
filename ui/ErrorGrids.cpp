#include "ErrorGrids.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace ttrace {

namespace {

// NaN is worse than any number: a rank with a non-finite piece shows it.
double worse(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) {
        return std::nan("");
    }
    return std::max(a, b);
}

const RankEntry* rankEntry(const Manifest& manifest, int rank) {
    for (const RankEntry& entry : manifest.ranks) {
        if (entry.rank == rank) {
            return &entry;
        }
    }
    return nullptr;
}

}  // namespace

QString layerName(int layer) {
    return layer >= 0 ? QStringLiteral("layer %1").arg(layer)
                      : QStringLiteral("outside the layers");
}

QString meshCoordinates(const Manifest& manifest, int rank) {
    const RankEntry* entry = rankEntry(manifest, rank);
    if (!entry || entry->coords.size() != manifest.meshAxes.size()) {
        return {};
    }
    const bool shapeKnown = manifest.meshShape.size() == manifest.meshAxes.size();
    QStringList parts;
    for (std::size_t a = 0; a < manifest.meshAxes.size(); ++a) {
        // An axis of size 1 ("cp0" in a job without context parallelism) says nothing.
        if (!shapeKnown || manifest.meshShape[a] > 1) {
            parts << manifest.meshAxes[a] + QString::number(entry->coords[a]);
        }
    }
    return parts.join(QLatin1Char(' '));
}

QStringList labelsWithinLayer(const std::vector<const TensorKey*>& keys) {
    // The longest dotted prefix of every name, a name itself counting as its prefix: the
    // layer's own module ("layers.1") is shown whole, its children without it.
    QString prefix;
    for (std::size_t i = 0; i < keys.size(); ++i) {
        const QString dotted = keys[i]->name + QLatin1Char('.');
        if (i == 0) {
            prefix = dotted;
            continue;
        }
        qsizetype common = 0;
        while (common < prefix.size() && common < dotted.size() &&
               prefix[common] == dotted[common]) {
            ++common;
        }
        prefix.truncate(common);
    }
    prefix.truncate(prefix.lastIndexOf(QLatin1Char('.')) + 1);
    QStringList labels;
    for (const TensorKey* key : keys) {
        const QString text = key->toString();
        const bool inside = key->name.size() > prefix.size() && key->name.startsWith(prefix);
        labels << (inside ? text.mid(prefix.size()) : text);
    }
    return labels;
}

ErrorGrid layerErrorGrid(const CheckReport& report, const HeatmapGrid& layout,
                         const HeatmapFilter& filter) {
    const auto& results = report.comparison.results;
    std::vector<bool> rowShown(layout.rows.size()), columnShown(layout.columns.size());
    for (std::size_t r = 0; r < layout.rows.size(); ++r) {
        rowShown[r] = filter.showsModule(layout.rows[r].module);
    }
    for (std::size_t c = 0; c < layout.columns.size(); ++c) {
        columnShown[c] =
            filter.showsKindAndIteration(layout.columns[c].kind, layout.columns[c].iteration);
    }
    // Rows and columns with at least one cell shown keep their order.
    std::vector<int> rowOf(layout.rows.size(), -1), columnOf(layout.columns.size(), -1);
    for (const HeatmapCell& cell : layout.cells) {
        if (rowShown[cell.row] && columnShown[cell.column]) {
            rowOf[cell.row] = 0;
            columnOf[cell.column] = 0;
        }
    }
    ErrorGrid grid;
    for (std::size_t r = 0; r < layout.rows.size(); ++r) {
        if (rowOf[r] == 0) {
            rowOf[r] = static_cast<int>(grid.rowLabels.size());
            grid.rowLabels << layout.rows[r].module;
            grid.rowGroups.push_back(layout.rows[r].layer);
        }
    }
    for (std::size_t c = 0; c < layout.columns.size(); ++c) {
        if (columnOf[c] == 0) {
            columnOf[c] = static_cast<int>(grid.columnLabels.size());
            grid.columnLabels << tensorKindName(layout.columns[c].kind) + QLatin1Char(' ') +
                                     layout.columns[c].label();
        }
    }
    for (const HeatmapCell& cell : layout.cells) {
        if (rowShown[cell.row] && columnShown[cell.column]) {
            grid.cells.push_back({rowOf[cell.row],
                                  columnOf[cell.column],
                                  results[cell.result].normalizedError,
                                  cell.result,
                                  {}});
        }
    }
    const auto& first = report.localization.firstFaulty;
    if (first && *first < results.size() && filter.shows(results[*first])) {
        grid.markedResult = first;
    }
    return grid;
}

ErrorGrid rankLayerGrid(const CheckReport& report, int layer, const HeatmapFilter& filter,
                        const RankBox& within, std::size_t maxRows) {
    const auto& results = report.comparison.results;
    const Manifest& manifest = report.distributed.manifest;
    std::vector<std::size_t> columns;
    // Each column's shards: only this layer's are read when the results came without them.
    std::vector<std::shared_ptr<const std::vector<ShardResult>>> columnShards;
    std::set<int> layerRanks;
    for (std::size_t i = 0; i < results.size(); ++i) {
        if (results[i].layer != layer || !filter.shows(results[i])) {
            continue;
        }
        columns.push_back(i);
        columnShards.push_back(report.shardsOf(i));
        for (const ShardResult& shard : *columnShards.back()) {
            layerRanks.insert(shard.ranks.begin(), shard.ranks.end());
        }
    }
    const RankSpace space(manifest, {layerRanks.begin(), layerRanks.end()});
    std::vector<int> ranks;
    for (const int rank : layerRanks) {
        if (space.contains(within, rank)) {
            ranks.push_back(rank);
        }
    }
    ErrorGrid grid;
    std::map<int, int> rowOfRank;
    // Rows of one group share the coordinates (or blocks) on every mesh axis but the last.
    std::map<std::vector<std::pair<int, int>>, int> groupOfPrefix;
    const auto groupOf = [&groupOfPrefix](std::vector<std::pair<int, int>> ranges) {
        ranges.pop_back();
        return groupOfPrefix.emplace(ranges, static_cast<int>(groupOfPrefix.size())).first->second;
    };
    if (ranks.size() > maxRows) {
        for (const RankGroup& group : groupRanks(space, ranks, maxRows)) {
            for (const int rank : group.members) {
                rowOfRank[rank] = static_cast<int>(grid.rowLabels.size());
            }
            grid.rowLabels << QStringLiteral("%1 (%2 ranks)")
                                  .arg(space.label(group.box))
                                  .arg(group.members.size());
            grid.rowGroups.push_back(groupOf(group.box.ranges));
            grid.rowBoxes.push_back(group.box);
        }
    } else {
        for (const int rank : ranks) {
            rowOfRank[rank] = static_cast<int>(grid.rowLabels.size());
            const QString coords = meshCoordinates(manifest, rank);
            grid.rowLabels << (coords.isEmpty()
                                   ? QStringLiteral("rank %1").arg(rank)
                                   : QStringLiteral("rank %1 (%2)").arg(rank).arg(coords));
            std::vector<std::pair<int, int>> point;
            for (const int coordinate : space.coordinates(rank)) {
                point.emplace_back(coordinate, coordinate);
            }
            grid.rowGroups.push_back(point.size() > 1 ? groupOf(point) : rank);
        }
    }
    const bool grouped = !grid.rowBoxes.empty();
    std::vector<const TensorKey*> keys;
    for (const std::size_t c : columns) {
        keys.push_back(&results[c].key);
    }
    grid.columnLabels = labelsWithinLayer(keys);
    for (std::size_t c = 0; c < columns.size(); ++c) {
        // Worst per row: per rank, or per block of ranks.
        std::map<int, double> worst;
        for (const ShardResult& shard : *columnShards[c]) {
            for (const int rank : shard.ranks) {
                const auto row = rowOfRank.find(rank);
                if (row == rowOfRank.end()) {
                    continue;  // outside `within`
                }
                const auto it = worst.find(row->second);
                worst[row->second] = it == worst.end() ? shard.normalizedError
                                                       : worse(it->second, shard.normalizedError);
            }
        }
        for (const auto& [row, error] : worst) {
            grid.cells.push_back(
                {row, static_cast<int>(c), error, columns[c],
                 grouped ? std::nullopt : std::optional(ranks[static_cast<std::size_t>(row)])});
        }
    }
    const auto& first = report.localization.firstFaulty;
    if (first && std::find(columns.begin(), columns.end(), *first) != columns.end()) {
        grid.markedResult = first;
    }
    return grid;
}

std::vector<int> resultLayers(const CheckReport& report) {
    std::set<int> layers;
    for (const TensorResult& r : report.comparison.results) {
        layers.insert(r.layer);
    }
    return {layers.begin(), layers.end()};
}

}  // namespace ttrace
