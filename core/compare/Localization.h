#pragma once

#include <QString>
#include <optional>
#include <vector>

#include "compare/GradientSource.h"
#include "compare/ResultDetails.h"
#include "compare/TensorResult.h"

namespace ttrace {

// The earliest faulty tensor in one rank's own execution order.
struct RankFirstFault {
    int rank = 0;
    std::size_t result = 0;  // index into the results
    std::int64_t seq = 0;
};

struct RootCause {
    QString module;          // module path
    std::size_t result = 0;  // the faulty output that convicts it (index into the results)
    std::optional<std::size_t> input;  // its input that is within tolerance, when captured
    QString reason;                    // "inputs within tolerance (0.31), output 42.0x over"
    // For a faulty output gradient: the module whose backward handed it over, or the loss.
    std::optional<GradientSource> gradient;
};

struct FaultyShard {
    std::size_t result = 0;  // index into the results
    std::size_t shard = 0;   // index into that result's shards
    std::vector<int> ranks;
    // False when the error is common to every shard: then `ranks` are all the tensor's ranks
    // and `shard` is merely the worst one, not a localization.
    bool standsOut = true;
    QString reason;  // why this shard stands out, or why none does
};

struct Localization {
    std::optional<std::size_t> firstFaulty;  // earliest faulty tensor in the reference order
    std::vector<RankFirstFault> perRank;     // each rank's earliest faulty tensor
    std::optional<RootCause> rootCause;
    std::optional<FaultyShard> faultyShard;
    std::size_t faultyCount = 0;

    bool bugFound() const { return firstFaulty.has_value(); }
    // The tensor whose shards the faulty shard is looked for in: the root cause's faulty
    // output, else the first faulty tensor.
    std::optional<std::size_t> shardTensor() const {
        return rootCause ? std::optional(rootCause->result) : firstFaulty;
    }
};

// Finds the first faulty tensor (by the reference's execution order; each rank's earliest
// by its own order), the root-cause module (inputs within tolerance, outputs not) and the
// shard, replica and rank that stand out.
// `details`: where the faulty tensors' rank sequence numbers are read from when `results`
// were loaded without them (each tensor's in turn, none kept).
[[nodiscard]] Localization localize(const std::vector<TensorResult>& results,
                                    const ResultDetails* details = nullptr);

}  // namespace ttrace
