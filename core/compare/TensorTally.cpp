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

void TensorTally::add(std::int64_t seq, BlockOutcome outcome) {
    const std::lock_guard lock(mutex_);
    if (seq != next_) {
        pending_.emplace(seq, std::move(outcome));
        return;
    }
    mergeInOrder(outcome);
    ++next_;
    for (auto it = pending_.begin(); it != pending_.end() && it->first == next_;
         it = pending_.erase(it)) {
        mergeInOrder(it->second);
        ++next_;
    }
}

void TensorTally::mergeInOrder(const BlockOutcome& outcome) {
    for (const auto& contribution : outcome.shards) {
        auto& replicas = replicas_[contribution.shard];
        auto& mismatches = mismatches_[contribution.shard];
        for (std::size_t k = 0; k < contribution.replicas.size() && k < replicas.size(); ++k) {
            replicas[k].merge(contribution.replicas[k]);
        }
        for (std::size_t k = 0; k < contribution.mismatches.size() && k < mismatches.size(); ++k) {
            mismatches[k].merge(contribution.mismatches[k]);
        }
    }
    for (const auto& copy : outcome.referenceCopies) {
        referenceCopies_[{copy.shard, copy.replica}].merge(copy.difference);
    }
    for (const auto& copy : outcome.perturbedCopies) {
        perturbedCopies_[{copy.shard, copy.replica}].merge(copy.difference);
    }
    if (perturbation_ && outcome.perturbation) {
        perturbation_->merge(*outcome.perturbation);
    }
    bytes_ += outcome.bytes;
}

ErrorAccumulator TensorTally::total() const {
    ErrorAccumulator total;
    for (const auto& copies : replicas_) {
        const ErrorAccumulator* worst = nullptr;
        for (const auto& copy : copies) {
            // Every copy of a shard has the same reference, so the squared difference ranks
            // them; the first copy wins ties.
            if (!worst || copy.sumSqDiff > worst->sumSqDiff) {
                worst = &copy;
            }
        }
        if (worst) {
            total.merge(*worst);
        }
    }
    return total;
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
