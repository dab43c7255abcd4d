#include "compare/TensorResult.h"

#include <map>

namespace ttrace {

double TensorResult::judgedError() const {
    return relativeErrorBeyondFactor(metrics, commonFactor);
}

bool TensorResult::isFaulty() const {
    // NaN/Inf counts in the reference are subtracted out: a reference that overflows the same
    // way is not the distributed run's fault.
    const bool newNonFinite = metrics.nanDist > metrics.nanRef || metrics.infDist > metrics.infRef;
    const bool scaleMismatch = fp8Scales && !fp8Scales->mismatches.empty();
    return normalizedError > 1.0 || !replicaMismatches.empty() ||
           !recomputationMismatches.empty() || newNonFinite || scaleMismatch;
}

std::vector<std::size_t> worstCopies(const std::vector<ShardResult>& shards) {
    std::vector<std::size_t> worst;
    // A map, not a search of `worst`: data-parallel shards can number in the thousands.
    std::map<ShardRanges, std::size_t> slot;  // ranges -> position in `worst`
    for (std::size_t i = 0; i < shards.size(); ++i) {
        const auto [it, added] = slot.try_emplace(shards[i].ranges, worst.size());
        if (added) {
            worst.push_back(i);
        } else if (shards[i].normalizedError > shards[worst[it->second]].normalizedError) {
            worst[it->second] = i;
        }
    }
    return worst;
}

std::vector<int> worstCopyRanks(const std::vector<ShardResult>& shards) {
    std::vector<int> ranks;
    for (const std::size_t i : worstCopies(shards)) {
        ranks.insert(ranks.end(), shards[i].ranks.begin(), shards[i].ranks.end());
    }
    return ranks;
}

std::vector<std::size_t> TensorResult::worstCopies() const {
    return ttrace::worstCopies(shards);
}

std::vector<int> TensorResult::worstCopyRanks() const {
    return ttrace::worstCopyRanks(shards);
}

}  // namespace ttrace
