#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace ttrace {

// One block of one shard of one tensor; `seq` numbers the blocks of a tensor in order.
struct WorkItem {
    std::size_t tensor = 0;
    std::size_t shard = 0;
    std::size_t block = 0;
    std::int64_t seq = 0;
};

// Hands out blocks in (tensor, shard, block) order to any number of workers, so that a single
// large tensor is spread over every thread and each tensor's blocks finish close together.
class WorkQueue {
public:
    // blockCounts[tensor][shard] = number of blocks of that shard.
    explicit WorkQueue(std::vector<std::vector<std::size_t>> blockCounts);

    std::optional<WorkItem> next();

private:
    std::mutex mutex_;
    std::vector<std::vector<std::size_t>> counts_;
    WorkItem cursor_;
};

}  // namespace ttrace
