#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "compare/BlockComparer.h"
#include "mapping/LogicalTensor.h"

namespace ttrace {

// The running sums of one tensor. Workers finish blocks in any order; the tally merges them
// in block order, so that the double-precision sums (and so every result) are the same
// whatever the number of threads. Only the out-of-order window is kept pending.
class TensorTally {
public:
    TensorTally(const LogicalTensor& tensor, bool withPerturbation);

    // Thread-safe.
    void add(std::int64_t seq, BlockOutcome outcome);
    // Marks the tensor as unusable; the first diagnostic is kept, later blocks are skipped.
    void fail(const Diagnostic& diagnostic);
    bool failed() const { return failed_.load(std::memory_order_relaxed); }

    // Read once every worker has finished.
    std::optional<Diagnostic> failure() const { return failure_; }
    // The whole tensor against the reference, each shard by its worst copy: where replicas
    // that must be identical differ, the tensor's error is that of the copy furthest from the
    // reference, not of whichever copy comes first.
    ErrorAccumulator total() const;
    const std::optional<ErrorAccumulator>& perturbation() const { return perturbation_; }
    // [shard][replica] vs the reference; [shard][replica - 1] vs replica 0.
    const std::vector<std::vector<ErrorAccumulator>>& replicas() const { return replicas_; }
    const std::vector<std::vector<ErrorAccumulator>>& mismatches() const { return mismatches_; }
    // The trusted runs' own copies against their first, by (shard, replica) of their tensors.
    using CopyAgreements = std::map<std::pair<std::size_t, std::size_t>, ErrorAccumulator>;
    const CopyAgreements& referenceCopies() const { return referenceCopies_; }
    const CopyAgreements& perturbedCopies() const { return perturbedCopies_; }
    std::int64_t bytes() const { return bytes_; }

private:
    void mergeInOrder(const BlockOutcome& outcome);

    std::mutex mutex_;
    std::map<std::int64_t, BlockOutcome> pending_;
    std::int64_t next_ = 0;
    std::atomic<bool> failed_{false};
    std::optional<Diagnostic> failure_;

    std::optional<ErrorAccumulator> perturbation_;
    std::vector<std::vector<ErrorAccumulator>> replicas_;
    std::vector<std::vector<ErrorAccumulator>> mismatches_;
    CopyAgreements referenceCopies_, perturbedCopies_;
    std::int64_t bytes_ = 0;
};

}  // namespace ttrace
