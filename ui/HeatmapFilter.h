#pragma once

#include <QRegularExpression>
#include <QString>
#include <optional>

#include "compare/TensorResult.h"

namespace ttrace {

// What the layer heatmap shows: modules whose name contains `module` (or matches it as a
// glob when it has * ? or [), one tensor kind, one iteration; empty parts show everything.
class HeatmapFilter {
public:
    HeatmapFilter() = default;
    HeatmapFilter(const QString& module, std::optional<TensorKind> kind,
                  std::optional<int> iteration);

    bool isEmpty() const { return module_.isEmpty() && !kind_ && !iteration_; }
    bool shows(const TensorResult& result) const;
    // The parts of shows(): a module path, a tensor kind and iteration.
    bool showsModule(const QString& module) const;
    bool showsKindAndIteration(TensorKind kind, int iteration) const;
    QString module() const { return module_; }
    std::optional<TensorKind> kind() const { return kind_; }
    std::optional<int> iteration() const { return iteration_; }

private:
    QString module_;
    QRegularExpression glob_;  // valid when `module_` is a glob
    std::optional<TensorKind> kind_;
    std::optional<int> iteration_;
};

}  // namespace ttrace
