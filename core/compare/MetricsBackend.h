#pragma once

#include <QString>
#include <cstddef>
#include <memory>

#include "compare/ErrorMetrics.h"

namespace ttrace {

// Where the arithmetic of a comparison runs. The CPU backend is always built and is the
// oracle; a CUDA backend implements the same interface and must agree with it.
class MetricsBackend {
public:
    virtual ~MetricsBackend() = default;
    virtual QString name() const = 0;

    // Compares n decoded elements of D against R in one pass. Positions in the result are
    // offsets into the arrays. Must be safe to call from several threads at once.
    [[nodiscard]] virtual ErrorAccumulator compare(const float* reference, const float* distributed,
                                                   std::size_t n) const = 0;

    // The same over `rows` runs of `rowLength` elements: run k of R starts at
    // reference + k * referenceStride, run k of D at distributed + k * rowLength (D is packed).
    // Positions are offsets into D. What a shard piece of a reference block is, where the
    // shard cuts the block's rows (column-parallel layers): compared in place, not gathered.
    [[nodiscard]] virtual ErrorAccumulator compareRows(const float* reference,
                                                       std::size_t referenceStride,
                                                       const float* distributed,
                                                       std::size_t rowLength,
                                                       std::size_t rows) const = 0;
};

// Vectorisable single-pass loop; the comparison job runs it on several threads at once.
std::unique_ptr<MetricsBackend> makeCpuBackend();

}  // namespace ttrace
