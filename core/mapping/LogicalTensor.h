#pragma once

#include <cstdint>
#include <vector>

#include "trace/DType.h"
#include "trace/TensorKey.h"
#include "trace/TensorRecord.h"

namespace ttrace {

// One copy of a shard's values: a single record, or the records whose sum it is
// (Partial(sum) placements: the pieces that differ only along the partial axes).
struct Replica {
    std::vector<const TensorRecord*> summands;  // size 1 unless partial
    // Ranks holding the summands, in the order of `summands`.
    std::vector<int> ranks() const;
};

// All pieces that sit at the same place in the global tensor.
struct Shard {
    ShardRanges ranges;
    std::vector<Replica> replicas;  // must be bitwise identical to each other
};

// A global tensor of a trace set: every shard and replica of it, placed on global
// coordinates. Shards tile `globalShape` exactly (checked when building).
struct LogicalTensor {
    TensorKey key;
    std::vector<std::int64_t> globalShape;
    DType dtype = DType::F32;
    int layer = -1;
    int expert = -1;
    std::vector<Shard> shards;  // ordered by ranges

    std::int64_t elementCount() const;
    // Sequence number of this tensor on `rank`, or -1 when the rank holds no piece of it.
    std::int64_t seqOnRank(int rank) const;
    // Every rank holding a piece of it, ascending.
    std::vector<int> ranks() const;
    // The one record holding it whole on one rank, or null when it is laid out over ranks.
    const TensorRecord* wholeRecord() const;
    // Bytes of every piece as stored: what reading all its copies reads.
    std::int64_t storedBytes() const;
};

}  // namespace ttrace
