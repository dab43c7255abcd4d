#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "compare/MetricsBackend.h"
#include "mapping/BlockPlan.h"
#include "mapping/LogicalTensor.h"
#include "trace/Diagnostic.h"
#include "trace/Hdf5Reader.h"

namespace ttrace {

// How one copy of a trusted run's shard compares with the shard's first copy, inside one box:
// a reference that holds a shard on several ranks (data-parallel replicas) must hold it
// bitwise the same on each.
struct CopyAgreement {
    std::size_t shard = 0;
    std::size_t replica = 0;  // 1 or more: compared with replica 0
    ErrorAccumulator difference;
};

// Turns a comparison's positions, offsets inside `block`, into global linear indices.
void toGlobalPositions(ErrorAccumulator& acc, const Block& block,
                       const std::vector<std::int64_t>& globalShape);

// Reads the box `box` (global coordinates; its localStart ignored) of a trusted run's tensor,
// held whole on one rank or cut into shards, copies and partial sums in any layout, into
// `out` (row-major, box.elementCount() floats): the first copy of each shard inside it, its
// partial sums added as the comparison adds them. A tensor held whole is read straight into
// `out`. With `agreement`, every other copy is read and compared with the first (one entry
// per copy inside the box, differences at global linear indices); without, only the first
// copies are read. `piece`, `other` and `summand` are scratch of box.elementCount() floats.
// Adds the bytes read to `bytes`.
[[nodiscard]] std::optional<Diagnostic> readTrustedBox(
    Hdf5Reader& reader, const LogicalTensor& tensor, const Block& box, float* out, float* piece,
    float* other, float* summand, std::int64_t& bytes, const MetricsBackend* backend,
    std::vector<CopyAgreement>* agreement);

}  // namespace ttrace
