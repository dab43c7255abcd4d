#include "mapping/ExecutionOrder.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <tuple>

namespace ttrace {

namespace {

// Where a tensor goes among those no rank orders against each other.
using FlowKey = std::tuple<int, int, int, int, std::int64_t, std::size_t>;

// Parameters are recorded before the first micro-batch; their gradients and updates after
// the last.
int microBatchOf(const TensorKey& key) {
    if (!isParameterKind(key.kind)) {
        return key.microBatch;
    }
    return key.kind == TensorKind::Param ? -1 : std::numeric_limits<int>::max();
}

}  // namespace

std::vector<std::int64_t> executionOrder(const std::vector<LogicalTensor>& tensors) {
    // Each rank's tensors in its own order, and the lowest layer it holds (its stage).
    std::map<int, std::vector<std::pair<std::int64_t, std::size_t>>> chains;
    std::map<int, int> stage;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        for (const auto& shard : tensors[i].shards) {
            for (const auto& replica : shard.replicas) {
                for (const TensorRecord* record : replica.summands) {
                    chains[record->rank].emplace_back(record->seq, i);
                    if (tensors[i].layer >= 0) {
                        auto [it, inserted] = stage.try_emplace(record->rank, tensors[i].layer);
                        it->second = std::min(it->second, tensors[i].layer);
                    }
                }
            }
        }
    }
    std::vector<std::vector<std::size_t>> order;  // per chain, tensor indices
    std::vector<int> chainStage;
    std::vector<std::int64_t> firstSeq(tensors.size(), std::numeric_limits<std::int64_t>::max());
    for (auto& [rank, chain] : chains) {
        std::sort(chain.begin(), chain.end());
        std::vector<std::size_t> indices;
        for (const auto& [seq, i] : chain) {
            indices.push_back(i);
            firstSeq[i] = std::min(firstSeq[i], seq);
        }
        order.push_back(std::move(indices));
        const auto it = stage.find(rank);
        chainStage.push_back(it == stage.end() ? 0 : it->second);
    }
    // Chains holding each tensor, and at how many of them it is first: ready when at all.
    std::vector<int> holders(tensors.size(), 0), atHead(tensors.size(), 0);
    std::vector<int> lowestStage(tensors.size(), std::numeric_limits<int>::max());
    for (std::size_t c = 0; c < order.size(); ++c) {
        for (const std::size_t i : order[c]) {
            ++holders[i];
            lowestStage[i] = std::min(lowestStage[i], chainStage[c]);
        }
    }
    const auto flowKey = [&](std::size_t i) {
        const TensorKey& key = tensors[i].key;
        const bool backward = isBackwardKind(key.kind);
        const int stageKey = backward ? -lowestStage[i] : lowestStage[i];
        return FlowKey{key.iteration, microBatchOf(key), backward ? 1 : 0,
                       stageKey,      firstSeq[i],       i};
    };
    std::priority_queue<FlowKey, std::vector<FlowKey>, std::greater<>> ready;
    std::vector<std::size_t> head(order.size(), 0);
    std::vector<bool> placed(tensors.size(), false);
    const auto arrive = [&](std::size_t c) {
        // Skips what was placed out of this chain's order (a cycle broken).
        while (head[c] < order[c].size() && placed[order[c][head[c]]]) {
            ++head[c];
        }
        if (head[c] < order[c].size()) {
            const std::size_t i = order[c][head[c]];
            if (++atHead[i] == holders[i]) {
                ready.push(flowKey(i));
            }
        }
    };
    for (std::size_t c = 0; c < order.size(); ++c) {
        arrive(c);
    }
    // Chains holding each tensor, to advance once it is placed.
    std::vector<std::vector<std::size_t>> chainsOf(tensors.size());
    for (std::size_t c = 0; c < order.size(); ++c) {
        for (const std::size_t i : order[c]) {
            chainsOf[i].push_back(c);
        }
    }
    std::vector<std::int64_t> positions(tensors.size(), -1);
    std::int64_t next = 0;
    const auto place = [&](std::size_t i) {
        placed[i] = true;
        positions[i] = next++;
        for (const std::size_t c : chainsOf[i]) {
            if (head[c] < order[c].size() && order[c][head[c]] == i) {
                ++head[c];
                arrive(c);
            }
        }
    };
    while (true) {
        while (!ready.empty()) {
            const std::size_t i = std::get<5>(ready.top());
            ready.pop();
            if (!placed[i]) {
                place(i);
            }
        }
        // Nothing ready: ranks disagree on an order (or every tensor is placed).
        std::optional<FlowKey> earliest;
        for (std::size_t c = 0; c < order.size(); ++c) {
            if (head[c] < order[c].size()) {
                const FlowKey key = flowKey(order[c][head[c]]);
                if (!earliest || key < *earliest) {
                    earliest = key;
                }
            }
        }
        if (!earliest) {
            break;
        }
        const std::size_t i = std::get<5>(*earliest);
        place(i);
        // The chains it was not first in skip it when they get there.
    }
    // Tensors no rank holds (none after buildLogicalTensors) go last, in key order.
    for (auto& position : positions) {
        if (position < 0) {
            position = next++;
        }
    }
    return positions;
}

}  // namespace ttrace
