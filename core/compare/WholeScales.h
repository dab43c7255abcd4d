#pragma once

#include <QString>
#include <optional>
#include <vector>

#include "mapping/LogicalTensor.h"
#include "trace/BlockScales.h"
#include "trace/Diagnostic.h"

namespace ttrace {

// The fp8 scales of a trusted run's whole tensor, over its global shape: the one record's
// where the run holds it whole; assembled from its pieces where it is laid out over ranks.
struct WholeScales {
    BlockScales scales;       // block: the whole tensor's (empty: one scale, per tensor)
    std::vector<bool> known;  // per block: some piece carries its scale
    // Blocks whose pieces of different samples (split by data parallelism) carry different
    // scales, each rank's own amax: the block's scale is their largest, a reduced amax's, and
    // the pieces' values lie on other fp8 grids than one device's would.
    std::int64_t dataParallelBlocks = 0;
    // The largest scale_inv of the blocks known.
    double largest() const;
};

struct AssembledScales {
    std::optional<WholeScales> whole;  // none: not fp8, or no piece scaled as the others
    // Pieces that carry different scales for one block of the whole tensor: the run's amax was
    // not reduced over them, so it has no whole-tensor scale to check another run against.
    std::optional<Diagnostic> disagreement;
};

// The whole tensor's scales of `run`, a trusted run's tensor (`role`: "reference" or
// "perturbed reference"). A laid-out run's pieces each carry the scale of the whole tensor's
// block holding each of their blocks, as a distributed run's must (docs/thresholds.md, "fp8
// scales"). The whole tensor's block along a dimension is the one the pieces' blocks show
// where a piece holds more than one block along it, a block of 1, a block larger than
// itself, or a microscaling recipe's block (scale_format: MX's 32, NVFP4's 16 elements);
// otherwise (each piece one block along it: per tensor, or per row along the rows' length)
// it spans the whole dimension. Partial sums and blocks straddling two of the whole
// tensor's blocks say nothing of them; a block no piece holds alone stays unknown. Pieces
// holding other samples of a block (a data-parallel split: samplesOf) may carry other
// scales, each rank quantizing its own samples; the block takes the largest. Pieces of the
// same samples must agree.
// The disagreement's message ends with `consequence`.
[[nodiscard]] AssembledScales assembleWholeScales(const LogicalTensor& run, const QString& role,
                                                  const QString& consequence);

}  // namespace ttrace
