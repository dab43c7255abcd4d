#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace ttrace {

// One block of one tensor; blocks of a tensor are numbered in order from 0.
struct WorkItem {
    std::size_t tensor = 0;
    std::size_t block = 0;
};

// Hands out blocks in (tensor, block) order to any number of workers, so that a single large
// tensor is spread over every thread and each tensor's blocks finish close together.
class WorkQueue {
public:
    // blockCounts[tensor] = number of blocks of that tensor.
    explicit WorkQueue(std::vector<std::size_t> blockCounts);

    std::optional<WorkItem> next();

private:
    std::mutex mutex_;
    std::vector<std::size_t> counts_;
    WorkItem cursor_;
};

}  // namespace ttrace
