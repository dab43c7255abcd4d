#include "mapping/LogicalTensor.h"

#include <algorithm>

namespace ttrace {

std::vector<int> Replica::ranks() const {
    std::vector<int> result;
    result.reserve(summands.size());
    for (const auto* record : summands) {
        result.push_back(record->rank);
    }
    return result;
}

std::int64_t LogicalTensor::elementCount() const {
    std::int64_t count = 1;
    for (const auto extent : globalShape) {
        count *= extent;
    }
    return count;
}

std::int64_t LogicalTensor::seqOnRank(int rank) const {
    for (const auto& shard : shards) {
        for (const auto& replica : shard.replicas) {
            for (const auto* record : replica.summands) {
                if (record->rank == rank) {
                    return record->seq;
                }
            }
        }
    }
    return -1;
}

std::vector<int> LogicalTensor::ranks() const {
    std::vector<int> result;
    for (const auto& shard : shards) {
        for (const auto& replica : shard.replicas) {
            for (const auto* record : replica.summands) {
                result.push_back(record->rank);
            }
        }
    }
    std::sort(result.begin(), result.end());
    result.erase(std::unique(result.begin(), result.end()), result.end());
    return result;
}

const TensorRecord* LogicalTensor::wholeRecord() const {
    const bool whole = shards.size() == 1 && shards.front().replicas.size() == 1 &&
                       shards.front().replicas.front().summands.size() == 1;
    return whole ? shards.front().replicas.front().summands.front() : nullptr;
}

std::int64_t LogicalTensor::storedBytes() const {
    std::int64_t bytes = 0;
    for (const auto& shard : shards) {
        for (const auto& replica : shard.replicas) {
            for (const auto* record : replica.summands) {
                bytes += record->storedBytes();
            }
        }
    }
    return bytes;
}

}  // namespace ttrace
