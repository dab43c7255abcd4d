#include "report/CheckReport.h"

namespace ttrace {

namespace {

// `inMemory` when it is what there is, else what `read` returns.
template <typename Part, typename Read>
std::shared_ptr<const Part> partOf(const Part& inMemory, bool readInstead, Read read) {
    if (!readInstead) {
        // Not owned: the report outlives the caller's use.
        return {std::shared_ptr<const void>(), &inMemory};
    }
    return std::make_shared<const Part>(read());
}

}  // namespace

std::shared_ptr<const std::vector<ShardResult>> CheckReport::shardsOf(std::size_t index) const {
    const auto& results = comparison.results;
    if (index >= results.size()) {
        return std::make_shared<const std::vector<ShardResult>>();
    }
    const auto& shards = results[index].shards;
    return partOf(shards, details && shards.empty(),
                  [this, index] { return details->shardsOf(index); });
}

std::shared_ptr<const std::map<int, std::int64_t>> CheckReport::rankSeqOf(std::size_t index) const {
    const auto& results = comparison.results;
    if (index >= results.size()) {
        return std::make_shared<const std::map<int, std::int64_t>>();
    }
    const auto& rankSeq = results[index].rankSeq;
    return partOf(rankSeq, details && rankSeq.empty(),
                  [this, index] { return details->rankSeqOf(index); });
}

}  // namespace ttrace
