#include "compare/WorkQueue.h"

#include <utility>

namespace ttrace {

WorkQueue::WorkQueue(std::vector<std::size_t> blockCounts) : counts_(std::move(blockCounts)) {}

std::optional<WorkItem> WorkQueue::next() {
    const std::lock_guard lock(mutex_);
    // Skip tensors that have no block left.
    while (cursor_.tensor < counts_.size()) {
        if (cursor_.block < counts_[cursor_.tensor]) {
            const WorkItem item = cursor_;
            ++cursor_.block;
            return item;
        }
        cursor_.block = 0;
        ++cursor_.tensor;
    }
    return std::nullopt;
}

}  // namespace ttrace
