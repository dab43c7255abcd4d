#include "compare/WorkQueue.h"

#include <utility>

namespace ttrace {

WorkQueue::WorkQueue(std::vector<std::vector<std::size_t>> blockCounts)
    : counts_(std::move(blockCounts)) {}

std::optional<WorkItem> WorkQueue::next() {
    const std::lock_guard lock(mutex_);
    // Skip shards and tensors that have no block left.
    while (cursor_.tensor < counts_.size()) {
        const auto& shards = counts_[cursor_.tensor];
        if (cursor_.shard < shards.size() && cursor_.block < shards[cursor_.shard]) {
            const WorkItem item = cursor_;
            ++cursor_.block;
            ++cursor_.seq;
            return item;
        }
        cursor_.block = 0;
        if (++cursor_.shard >= shards.size()) {
            cursor_.shard = 0;
            cursor_.seq = 0;
            ++cursor_.tensor;
        }
    }
    return std::nullopt;
}

}  // namespace ttrace
