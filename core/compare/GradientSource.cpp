#include "compare/GradientSource.h"

namespace ttrace {

namespace {

bool encloses(const QString& outer, const QString& inner) {
    return inner == outer ||
           (inner.startsWith(outer) && inner.size() > outer.size() && inner[outer.size()] == u'.');
}

}  // namespace

GradientSource findGradientSource(const std::vector<TensorResult>& results,
                                  const std::vector<std::size_t>& order, std::size_t pos) {
    const TensorResult& gradient = results[order[pos]];
    const TensorKey& key = gradient.key;
    GradientSource source;
    // Backward runs from the loss down, so the modules whose backward ran before this output
    // gradient, in the same micro-batch, are the ones its module's output flowed into: the
    // nearest whose input gradient has this gradient's shape handed it over. An enclosing
    // module's output gradient coming first means the gradient was made inside that module
    // (a residual add, a mixture's weighting of its experts) from it.
    for (std::size_t i = pos; i-- > 0;) {
        const TensorResult& r = results[order[i]];
        if (r.key.iteration != key.iteration || r.key.microBatch != key.microBatch ||
            r.key.kind == TensorKind::ForwardInput || r.key.kind == TensorKind::ForwardOutput) {
            break;
        }
        const bool ownOrEnclosing = encloses(r.key.name, key.name);
        if (r.key.kind == TensorKind::InputGrad && !ownOrEnclosing &&
            r.globalShape == gradient.globalShape) {
            source.from = GradientSource::From::Module;
            source.upstream = order[i];
            break;
        }
        if (r.key.kind == TensorKind::OutputGrad && ownOrEnclosing && r.key.name != key.name) {
            source.from = GradientSource::From::Enclosing;
            source.upstream = order[i];
            break;
        }
    }
    return source;
}

}  // namespace ttrace
