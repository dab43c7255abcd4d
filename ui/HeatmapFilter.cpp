#include "HeatmapFilter.h"

namespace ttrace {

HeatmapFilter::HeatmapFilter(const QString& module, std::optional<TensorKind> kind,
                             std::optional<int> iteration)
    : module_(module.trimmed()), kind_(kind), iteration_(iteration) {
    if (module_.contains(QLatin1Char('*')) || module_.contains(QLatin1Char('?')) ||
        module_.contains(QLatin1Char('['))) {
        glob_ = QRegularExpression(QRegularExpression::wildcardToRegularExpression(
                                       module_, QRegularExpression::DefaultWildcardConversion),
                                   QRegularExpression::CaseInsensitiveOption);
    }
}

bool HeatmapFilter::shows(const TensorResult& result) const {
    if (kind_ && result.key.kind != *kind_) {
        return false;
    }
    if (iteration_ && result.key.iteration != *iteration_) {
        return false;
    }
    if (module_.isEmpty()) {
        return true;
    }
    const QString module = result.key.module();
    if (glob_.isValid() && !glob_.pattern().isEmpty()) {
        return glob_.match(module).hasMatch();
    }
    return module.contains(module_, Qt::CaseInsensitive);
}

}  // namespace ttrace
