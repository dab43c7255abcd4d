#include "compare/TensorTally.h"

namespace ttrace {

TensorTally::TensorTally(const LogicalTensor& tensor, bool withPerturbation) {
    if (withPerturbation) {
        perturbation_ = ErrorAccumulator{};
    }
    for (const auto& shard : tensor.shards) {
        replicas_.emplace_back(shard.replicas.size());
        mismatches_.emplace_back(shard.replicas.empty() ? 0 : shard.replicas.size() - 1);
    }
}

void TensorTally::add(std::int64_t seq, std::size_t shard, BlockOutcome outcome) {
    const std::lock_guard lock(mutex_);
    if (seq != next_) {
        pending_.emplace(seq, std::make_pair(shard, std::move(outcome)));
        return;
    }
    mergeInOrder(shard, outcome);
    ++next_;
    for (auto it = pending_.begin(); it != pending_.end() && it->first == next_;
         it = pending_.erase(it)) {
        mergeInOrder(it->second.first, it->second.second);
        ++next_;
    }
}

void TensorTally::mergeInOrder(std::size_t shard, const BlockOutcome& outcome) {
    if (!outcome.replicas.empty()) {
        total_.merge(outcome.replicas.front());
    }
    for (std::size_t k = 0; k < outcome.replicas.size() && k < replicas_[shard].size(); ++k) {
        replicas_[shard][k].merge(outcome.replicas[k]);
    }
    for (std::size_t k = 0; k < outcome.mismatches.size() && k < mismatches_[shard].size(); ++k) {
        mismatches_[shard][k].merge(outcome.mismatches[k]);
    }
    if (perturbation_ && outcome.perturbation) {
        perturbation_->merge(*outcome.perturbation);
    }
    bytes_ += outcome.bytes;
}

void TensorTally::fail(const Diagnostic& diagnostic) {
    const std::lock_guard lock(mutex_);
    if (!failure_) {
        failure_ = diagnostic;
    }
    failed_.store(true, std::memory_order_relaxed);
    pending_.clear();
}

}  // namespace ttrace
