#pragma once

#include <cstdint>
#include <optional>

#include "mapping/BlockPlan.h"
#include "mapping/LogicalTensor.h"
#include "trace/Diagnostic.h"
#include "trace/Hdf5Reader.h"

namespace ttrace {

// Reads `piece` of one copy of a shard into `out`: its only summand, or the Partial(sum)
// summands added in float32 in rank order (how the ranks' all-reduce would add them), with
// `scratch` holding the summand being added. Both hold piece.elementCount() floats.
// Adds the bytes read to `bytes`.
[[nodiscard]] std::optional<Diagnostic> readReplicaSum(Hdf5Reader& reader, const Replica& replica,
                                                       const Block& piece, float* out,
                                                       float* scratch, std::int64_t& bytes);

}  // namespace ttrace
