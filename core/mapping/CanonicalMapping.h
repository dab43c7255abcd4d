#pragma once

#include <vector>

#include "mapping/LogicalTensor.h"
#include "trace/Diagnostic.h"
#include "trace/TraceSet.h"

namespace ttrace {

struct MappingResult {
    std::vector<LogicalTensor> tensors;  // ordered by key; only tensors that assemble cleanly
    Diagnostics diagnostics;             // one per tensor that could not be assembled, ...
    // Tensors the trace set holds that could not be assembled (each with its diagnostics),
    // ordered by key: present, but not comparable.
    std::vector<TensorKey> refused;
};

// Groups the records of a trace set into logical tensors and places every shard, replica and
// partial sum on global coordinates. Checks that the shards tile the global shape (no gaps,
// no overlaps, ranges inside the shape, local shape matching the ranges), that all pieces
// agree on global shape and dtype, that Partial(sum) groups are complete, and that no rank
// holds the tensor twice. A tensor that fails a check is left out and described by a
// diagnostic naming its files and datasets.
// Pointers in the result refer into `traceSet.records`, which must outlive it.
[[nodiscard]] MappingResult buildLogicalTensors(const TraceSet& traceSet);
// The same for `records` of a trace set with this manifest; pointers refer into `records`.
[[nodiscard]] MappingResult buildLogicalTensors(const Manifest& manifest,
                                                const std::vector<TensorRecord>& records);
// A temporary would be gone before the result is used (AddressSanitizer found one in a test).
MappingResult buildLogicalTensors(const TraceSet&&) = delete;
MappingResult buildLogicalTensors(const Manifest&, const std::vector<TensorRecord>&&) = delete;

}  // namespace ttrace
