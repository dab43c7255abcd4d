#include "report/CheckReport.h"

namespace ttrace {

std::shared_ptr<const std::vector<ShardResult>> CheckReport::shardsOf(std::size_t index) const {
    const auto& results = comparison.results;
    if (index >= results.size()) {
        return std::make_shared<const std::vector<ShardResult>>();
    }
    if (!shardSource || !results[index].shards.empty()) {
        // Not owned: the report outlives the caller's use.
        return {std::shared_ptr<const void>(), &results[index].shards};
    }
    return std::make_shared<const std::vector<ShardResult>>(shardSource->shardsOf(index));
}

}  // namespace ttrace
