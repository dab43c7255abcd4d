#include "compare/Localization.h"

#include <algorithm>
#include <limits>
#include <map>

#include "compare/FaultyShard.h"
#include "compare/RootCause.h"

namespace ttrace {

namespace {

// Every result index in the reference's execution order; tensors the reference did not place
// (referenceSeq -1) go last, in input order.
std::vector<std::size_t> referenceOrder(const std::vector<TensorResult>& results) {
    std::vector<std::size_t> order(results.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
        order[i] = i;
    }
    const auto seqOf = [&results](std::size_t i) {
        const auto seq = results[i].referenceSeq;
        return seq < 0 ? std::numeric_limits<std::int64_t>::max() : seq;
    };
    std::stable_sort(order.begin(), order.end(),
                     [&seqOf](std::size_t a, std::size_t b) { return seqOf(a) < seqOf(b); });
    return order;
}

}  // namespace

Localization localize(const std::vector<TensorResult>& results, const ResultDetails* details) {
    Localization loc;
    const std::vector<std::size_t> order = referenceOrder(results);

    for (const std::size_t i : order) {
        if (results[i].isFaulty()) {
            ++loc.faultyCount;
            if (!loc.firstFaulty) {
                loc.firstFaulty = i;
            }
        }
    }

    // Each rank's earliest fault by its own sequence numbers; ranks without one are left out.
    std::map<int, RankFirstFault> perRank;
    for (std::size_t i = 0; i < results.size(); ++i) {
        if (!results[i].isFaulty()) {
            continue;
        }
        std::map<int, std::int64_t> read;
        const auto* rankSeq = &results[i].rankSeq;
        if (details && rankSeq->empty()) {
            read = details->rankSeqOf(i);
            rankSeq = &read;
        }
        for (const auto& [rank, seq] : *rankSeq) {
            auto it = perRank.find(rank);
            if (it == perRank.end() || seq < it->second.seq) {
                perRank[rank] = RankFirstFault{rank, i, seq};
            }
        }
    }
    for (const auto& [rank, fault] : perRank) {
        loc.perRank.push_back(fault);
    }

    loc.rootCause = findRootCause(results, order, loc.firstFaulty);
    if (const auto target = loc.shardTensor()) {
        loc.faultyShard = findFaultyShard(results, *target);
    }
    return loc;
}

}  // namespace ttrace
