#include "report/HeatmapGrid.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

namespace ttrace {

QString HeatmapColumn::label() const {
    QString text = QStringLiteral("it") + QString::number(iteration);
    if (!isParameterKind(kind)) {
        text += QStringLiteral(" mb") + QString::number(microBatch);
    }
    if (index != 0) {
        text += QStringLiteral(" [") + QString::number(index) + QLatin1Char(']');
    }
    if (!parameter.isEmpty()) {
        text += QLatin1Char(' ') + parameter;
    }
    return text;
}

HeatmapGrid buildHeatmapGrid(const std::vector<TensorResult>& results) {
    // A module's place is its earliest activation in the reference order (parameters are
    // often captured before the forward pass, which would put every module with weights
    // ahead of those without); modules with parameters only follow by their earliest
    // parameter, and results without a reference position keep their order after the others.
    struct ModuleInfo {
        int phase = 2;  // 0: placed by an activation, 1: by a parameter
        std::int64_t firstSeq = std::numeric_limits<std::int64_t>::max();
        std::size_t firstResult = std::numeric_limits<std::size_t>::max();
        int layer = -1;
    };
    std::map<QString, ModuleInfo> modules;
    // kind, iteration, micro-batch, index, parameter
    using ColumnKey = std::tuple<int, int, int, int, QString>;
    const auto columnKey = [](const TensorKey& key) {
        QString parameter;
        if (isParameterKind(key.kind)) {
            const QString module = key.module();
            parameter =
                module.size() < key.name.size() ? key.name.mid(module.size() + 1) : QString();
        }
        return ColumnKey{static_cast<int>(key.kind), key.iteration, key.microBatch, key.index,
                         parameter};
    };
    std::map<ColumnKey, std::size_t> columnIndex;
    for (std::size_t i = 0; i < results.size(); ++i) {
        const TensorResult& r = results[i];
        ModuleInfo& info = modules[r.key.module()];
        const std::int64_t seq =
            r.referenceSeq >= 0 ? r.referenceSeq : std::numeric_limits<std::int64_t>::max();
        const int phase = isParameterKind(r.key.kind) ? 1 : 0;
        if (std::tie(phase, seq, i) < std::tie(info.phase, info.firstSeq, info.firstResult)) {
            info.phase = phase;
            info.firstSeq = seq;
            info.firstResult = i;
            info.layer = r.layer;
        }
        columnIndex.emplace(columnKey(r.key), 0);
    }

    HeatmapGrid grid;
    std::vector<std::pair<const QString*, const ModuleInfo*>> order;
    for (const auto& [module, info] : modules) {
        order.emplace_back(&module, &info);
    }
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
        return std::tie(a.second->phase, a.second->firstSeq, a.second->firstResult) <
               std::tie(b.second->phase, b.second->firstSeq, b.second->firstResult);
    });
    std::map<QString, std::size_t> rowIndex;
    for (const auto& [module, info] : order) {
        rowIndex[*module] = grid.rows.size();
        grid.rows.push_back({*module, info->layer});
    }
    for (auto& [key, index] : columnIndex) {
        index = grid.columns.size();
        grid.columns.push_back({static_cast<TensorKind>(std::get<0>(key)), std::get<3>(key),
                                std::get<1>(key), std::get<2>(key), std::get<4>(key)});
    }
    grid.cells.reserve(results.size());
    for (std::size_t i = 0; i < results.size(); ++i) {
        const TensorKey& key = results[i].key;
        grid.cells.push_back({rowIndex[key.module()], columnIndex[columnKey(key)], i});
    }
    return grid;
}

}  // namespace ttrace
