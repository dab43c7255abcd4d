#pragma once

#include <cstdint>
#include <vector>

#include "trace/DType.h"
#include "trace/Diagnostic.h"
#include "trace/TensorKey.h"
#include "trace/TraceCatalog.h"

namespace ttrace {

// One tensor of a trusted run (the reference or the perturbed reference) as a comparison is
// planned with it. Its records are read from the run's catalog again, and it is assembled
// again, when it is compared (loadTask).
struct TrustedTensor {
    TensorKey key;
    std::vector<std::int64_t> globalShape;
    DType dtype = DType::F32;
    int layer = -1;
    std::int64_t storedBytes = 0;  // every piece, as stored
    std::int64_t order = -1;       // its place in the run's execution order (executionOrder)
};

// A trusted run as a comparison is planned with it, laid out over ranks or held on one: every
// tensor is read from the catalog and assembled here once, one at a time, so that the plan
// holds a few bytes per piece (for the execution order, while it is worked out) instead of the
// pieces. A 10,000-rank trusted run so costs what a distributed one does (docs/checker.md,
// "Distributed references").
struct TrustedRun {
    const TraceCatalog* catalog = nullptr;  // must outlive the run's plan
    std::vector<TrustedTensor> tensors;     // those that assemble, ordered by key
    // Those that do not (each has an error in `diagnostics`), ordered by key: present, but
    // not comparable.
    std::vector<TensorKey> refused;
    Diagnostics diagnostics;

    // The tensor `key` among those that assemble, or null.
    const TrustedTensor* find(const TensorKey& key) const;
};

[[nodiscard]] TrustedRun outlineTrustedRun(const TraceCatalog& catalog);

}  // namespace ttrace
