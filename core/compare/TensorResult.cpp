#include "compare/TensorResult.h"

namespace ttrace {

bool TensorResult::isFaulty() const {
    // NaN/Inf counts in the reference are subtracted out: a reference that overflows the same
    // way is not the distributed run's fault.
    const bool newNonFinite = metrics.nanDist > metrics.nanRef || metrics.infDist > metrics.infRef;
    return normalizedError > 1.0 || !replicaMismatches.empty() || newNonFinite;
}

}  // namespace ttrace
