#include "report/CheckReport.h"

#include <algorithm>

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

Verdict CheckReport::verdict() const {
    if (bugFound()) {
        return Verdict::BugFound;
    }
    if (comparison.results.empty()) {
        return Verdict::NothingCompared;
    }
    // The session gathers every problem into `diagnostics`; a report built directly may hold
    // them where the comparison left them.
    const bool errors = hasErrors(diagnostics) || hasErrors(comparison.diagnostics) ||
                        std::any_of(comparison.results.begin(), comparison.results.end(),
                                    [](const TensorResult& r) { return hasErrors(r.diagnostics); });
    return errors || !comparison.complete() || !comparison.coverage.complete(comparedCount())
               ? Verdict::NoBugInPart
               : Verdict::NoBug;
}

std::shared_ptr<const std::vector<ShardResult>> CheckReport::shardsOf(std::size_t index) const {
    const auto& results = comparison.results;
    if (index >= results.size()) {
        return std::make_shared<const std::vector<ShardResult>>();
    }
    const auto& shards = results[index].shards;
    return partOf(shards, details && shards.empty(), [this, index] {
        // Stored with their measured errors: judged like their tensor.
        auto read = details->shardsOf(index);
        judgeShards(read, comparison.results[index]);
        return read;
    });
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
