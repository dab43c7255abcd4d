#include "compare/TaskPartition.h"

#include <algorithm>
#include <numeric>
#include <queue>
#include <utility>

namespace ttrace {

std::vector<std::vector<std::size_t>> partitionTasks(const std::vector<std::int64_t>& taskBytes,
                                                     int parts) {
    const auto count = static_cast<std::size_t>(std::max(1, parts));
    std::vector<std::vector<std::size_t>> assigned(count);
    std::vector<std::size_t> order(taskBytes.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return taskBytes[a] > taskBytes[b]; });
    // (load, part): the smallest load first, then the lowest part.
    using Load = std::pair<std::int64_t, std::size_t>;
    std::priority_queue<Load, std::vector<Load>, std::greater<>> loads;
    for (std::size_t part = 0; part < count; ++part) {
        loads.emplace(0, part);
    }
    for (const std::size_t task : order) {
        auto [load, part] = loads.top();
        loads.pop();
        assigned[part].push_back(task);
        // Empty tasks still cost a little (opening datasets), so they spread out too.
        loads.emplace(load + std::max<std::int64_t>(1, taskBytes[task]), part);
    }
    for (auto& tasks : assigned) {
        std::sort(tasks.begin(), tasks.end());
    }
    return assigned;
}

}  // namespace ttrace
