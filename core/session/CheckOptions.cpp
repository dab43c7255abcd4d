#include "session/CheckOptions.h"

#include <algorithm>
#include <thread>

namespace ttrace {

int threadsPerProcess(const CheckRequest& request, const ProcessGroup* group) {
    if (request.threads > 0 || !group) {
        return request.threads;
    }
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    return std::max(1, cores / std::max(1, group->sizeOnThisMachine()));
}

ComparisonOptions comparisonOptions(const CheckRequest& request, const ThresholdConfig& thresholds,
                                    const ProcessGroup* group) {
    ComparisonOptions options;
    options.thresholds = thresholds;
    options.threads = threadsPerProcess(request, group);
    options.chunkElements = request.chunkElements;
    options.backend = request.backend.get();
    options.cancel = request.cancel;
    return options;
}

}  // namespace ttrace
