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
    return showsKindAndIteration(result.key.kind, result.key.iteration) &&
           showsModule(result.key.module());
}

bool HeatmapFilter::showsKindAndIteration(TensorKind kind, int iteration) const {
    return (!kind_ || kind == *kind_) && (!iteration_ || iteration == *iteration_);
}

bool HeatmapFilter::showsModule(const QString& module) const {
    if (module_.isEmpty()) {
        return true;
    }
    if (glob_.isValid() && !glob_.pattern().isEmpty()) {
        return glob_.match(module).hasMatch();
    }
    return module.contains(module_, Qt::CaseInsensitive);
}

}  // namespace ttrace
