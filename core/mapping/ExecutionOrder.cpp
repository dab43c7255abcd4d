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
// One micro-batch's forward (0) or backward (1) pass of one iteration.
using Pass = std::tuple<int, int, int>;

// Parameters are recorded before the first micro-batch; their gradients and updates after
// the last.
int microBatchOf(const TensorKey& key) {
    if (!isParameterKind(key.kind)) {
        return key.microBatch;
    }
    return key.kind == TensorKind::Param ? -1 : std::numeric_limits<int>::max();
}

// The merge of the ranks' orders, one tensor at a time (see executionOrder).
class Merge {
public:
    explicit Merge(const std::vector<OrderedTensor>& tensors) : tensors_(tensors) {
        // Each rank's tensors in its own order, and the lowest layer it holds (its stage).
        std::map<int, std::vector<std::pair<std::int64_t, std::size_t>>> chains;
        std::map<int, int> stageOfRank;
        for (std::size_t i = 0; i < tensors.size(); ++i) {
            for (const auto& [rank, seq] : tensors[i].pieces) {
                chains[rank].emplace_back(seq, i);
                if (tensors[i].layer >= 0) {
                    auto [it, inserted] = stageOfRank.try_emplace(rank, tensors[i].layer);
                    it->second = std::min(it->second, tensors[i].layer);
                }
            }
        }
        const std::size_t n = tensors.size();
        firstSeq_.assign(n, std::numeric_limits<std::int64_t>::max());
        stage_.assign(n, std::numeric_limits<int>::max());
        holders_.assign(n, 0);
        atHead_.assign(n, 0);
        queued_.assign(n, false);
        placed_.assign(n, false);
        chainsOf_.resize(n);
        for (auto& [rank, chain] : chains) {
            std::sort(chain.begin(), chain.end());
            const auto found = stageOfRank.find(rank);
            const int stage = found == stageOfRank.end() ? 0 : found->second;
            std::vector<std::size_t> indices;
            for (const auto& [seq, i] : chain) {
                indices.push_back(i);
                firstSeq_[i] = std::min(firstSeq_[i], seq);
                stage_[i] = std::min(stage_[i], stage);
                ++holders_[i];
                chainsOf_[i].push_back(order_.size());
            }
            order_.push_back(std::move(indices));
        }
        head_.assign(order_.size(), 0);
        for (std::size_t i = 0; i < n; ++i) {
            if (const auto pass = passOf(i)) {
                ++unplaced_[*pass][stage_[i]];
            }
        }
    }

    std::vector<std::int64_t> run() {
        for (std::size_t c = 0; c < order_.size(); ++c) {
            arrive(c);
        }
        std::vector<std::int64_t> positions(tensors_.size(), -1);
        std::int64_t next = 0;
        while (true) {
            std::optional<std::size_t> i;
            while (!ready_.empty() && !i) {
                const std::size_t top = std::get<5>(ready_.top());
                ready_.pop();
                if (!placed_[top]) {
                    i = top;
                }
            }
            if (!i) {
                i = earliestHead();  // ranks that disagree: a cycle broken
            }
            if (!i) {
                break;
            }
            positions[*i] = next++;
            place(*i);
        }
        for (auto& position : positions) {
            if (position < 0) {
                position = next++;  // no rank holds it (none of an assembled tensor)
            }
        }
        return positions;
    }

private:
    // The pass a module tensor belongs to; parameters' tensors follow their ranks only.
    std::optional<Pass> passOf(std::size_t i) const {
        const TensorKey& key = tensors_[i].key;
        if (isParameterKind(key.kind)) {
            return std::nullopt;
        }
        return Pass{key.iteration, key.microBatch, isBackwardKind(key.kind) ? 1 : 0};
    }

    FlowKey flowKey(std::size_t i) const {
        const TensorKey& key = tensors_[i].key;
        const bool backward = isBackwardKind(key.kind);
        // A backward pass runs through the stages in reverse; parameters' gradients, recorded
        // at the optimizer step, go in the parameters' order, as on one device.
        const bool reversed = backward && !isParameterKind(key.kind);
        const int stage = reversed ? -stage_[i] : stage_[i];
        return FlowKey{key.iteration, microBatchOf(key), backward ? 1 : 0, stage, firstSeq_[i], i};
    }

    // A pass goes through the stages in order: forward from the lowest layers, backward from
    // the highest. A tensor waits for its pass's earlier stages.
    bool waitsForAnotherStage(std::size_t i) const {
        const auto pass = passOf(i);
        if (!pass) {
            return false;
        }
        const auto& stages = unplaced_.at(*pass);
        const bool backward = std::get<2>(*pass) == 1;
        for (const auto& [stage, count] : stages) {
            if (count > 0 && (backward ? stage > stage_[i] : stage < stage_[i])) {
                return true;
            }
        }
        return false;
    }

    // The head of chain c, queued when every rank holding it has it first and its pass has
    // gone through the stages before.
    void offerHead(std::size_t c) {
        if (head_[c] >= order_[c].size()) {
            return;
        }
        const std::size_t i = order_[c][head_[c]];
        if (!queued_[i] && atHead_[i] == holders_[i] && !waitsForAnotherStage(i)) {
            queued_[i] = true;
            ready_.push(flowKey(i));
        }
    }

    // Chain c's head moved: skip what was placed out of its order (a cycle broken), count the
    // new head.
    void arrive(std::size_t c) {
        while (head_[c] < order_[c].size() && placed_[order_[c][head_[c]]]) {
            ++head_[c];
        }
        if (head_[c] < order_[c].size()) {
            ++atHead_[order_[c][head_[c]]];
            offerHead(c);
        }
    }

    void place(std::size_t i) {
        placed_[i] = true;
        for (const std::size_t c : chainsOf_[i]) {
            if (head_[c] < order_[c].size() && order_[c][head_[c]] == i) {
                ++head_[c];
                arrive(c);
            }
        }
        if (const auto pass = passOf(i); pass && --unplaced_[*pass][stage_[i]] == 0) {
            for (std::size_t c = 0; c < order_.size(); ++c) {
                offerHead(c);  // a stage of this pass is done: the next may go
            }
        }
    }

    std::optional<std::size_t> earliestHead() const {
        std::optional<FlowKey> earliest;
        for (std::size_t c = 0; c < order_.size(); ++c) {
            if (head_[c] < order_[c].size()) {
                const FlowKey key = flowKey(order_[c][head_[c]]);
                if (!earliest || key < *earliest) {
                    earliest = key;
                }
            }
        }
        return earliest ? std::optional(std::get<5>(*earliest)) : std::nullopt;
    }

    const std::vector<OrderedTensor>& tensors_;
    std::vector<std::vector<std::size_t>> order_;  // per rank, tensor indices in its order
    std::vector<std::size_t> head_;                // per rank, its first tensor not placed
    std::vector<std::vector<std::size_t>> chainsOf_;
    std::vector<std::int64_t> firstSeq_;
    std::vector<int> stage_;  // the lowest stage holding it
    std::vector<int> holders_, atHead_;
    std::vector<bool> queued_, placed_;
    std::map<Pass, std::map<int, std::int64_t>> unplaced_;  // per pass and stage
    std::priority_queue<FlowKey, std::vector<FlowKey>, std::greater<>> ready_;
};

}  // namespace

OrderedTensor orderedTensor(const LogicalTensor& tensor) {
    OrderedTensor ordered{tensor.key, tensor.layer, {}};
    for (const auto& shard : tensor.shards) {
        for (const auto& replica : shard.replicas) {
            for (const TensorRecord* record : replica.summands) {
                ordered.pieces.emplace_back(record->rank, record->seq);
            }
        }
    }
    return ordered;
}

std::vector<std::int64_t> executionOrder(const std::vector<OrderedTensor>& tensors) {
    return Merge(tensors).run();
}

}  // namespace ttrace
