#include "compare/MetricsBackend.h"

#include <vector>

namespace ttrace {

ErrorAccumulator MetricsBackend::compareStored(const StoredRun& run) const {
    const std::size_t n = run.elements();
    std::vector<float> reference(n), distributed(n);
    decodeStored(run.reference, run.moreReference, run.rowLength, run.rows, reference.data());
    decodeStored(run.distributed, run.moreDistributed, run.rowLength, run.rows, distributed.data());
    return compareRows(reference.data(), run.rowLength, distributed.data(), run.rowLength,
                       run.rows);
}

}  // namespace ttrace
