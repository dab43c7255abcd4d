#pragma once

#include <optional>
#include <vector>

#include "mapping/LogicalTensor.h"
#include "trace/Diagnostic.h"
#include "trace/TraceCatalog.h"

namespace ttrace {

// One tensor of a catalogued trace set, its records read from the catalog and placed on global
// coordinates. Movable (a vector's move keeps its buffer, which `tensor` points into), never
// copied.
struct AssembledTensor {
    std::vector<TensorRecord> records;
    std::optional<LogicalTensor> tensor;  // none when it could not be read or assembled
    Diagnostics problems;                 // why, then

    AssembledTensor() = default;
    AssembledTensor(AssembledTensor&&) = default;
    AssembledTensor& operator=(AssembledTensor&&) = default;
    AssembledTensor(const AssembledTensor&) = delete;
    AssembledTensor& operator=(const AssembledTensor&) = delete;
};

// Reads the records of the tensor `key` from `catalog` and assembles them as
// buildLogicalTensors() does, with the same problems.
[[nodiscard]] AssembledTensor assembleTensor(const TraceCatalog& catalog, const TensorKey& key);

}  // namespace ttrace
