#include "compare/TensorResult.h"

#include <algorithm>

namespace ttrace {

bool TensorResult::isFaulty() const {
    // NaN/Inf counts in the reference are subtracted out: a reference that overflows the same
    // way is not the distributed run's fault.
    const bool newNonFinite = metrics.nanDist > metrics.nanRef || metrics.infDist > metrics.infRef;
    return normalizedError > 1.0 || !replicaMismatches.empty() || newNonFinite;
}

std::vector<int> TensorResult::worstCopyRanks() const {
    std::vector<const ShardResult*> worst;  // one per distinct shard, in order
    for (const ShardResult& copy : shards) {
        auto same = std::find_if(worst.begin(), worst.end(), [&copy](const ShardResult* w) {
            return w->ranges == copy.ranges;
        });
        if (same == worst.end()) {
            worst.push_back(&copy);
        } else if (copy.normalizedError > (*same)->normalizedError) {
            *same = &copy;
        }
    }
    std::vector<int> ranks;
    for (const ShardResult* copy : worst) {
        ranks.insert(ranks.end(), copy->ranks.begin(), copy->ranks.end());
    }
    return ranks;
}

}  // namespace ttrace
