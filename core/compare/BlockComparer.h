#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "compare/MetricsBackend.h"
#include "compare/TensorPairing.h"
#include "mapping/BlockPlan.h"
#include "trace/Hdf5Reader.h"

namespace ttrace {

// What one block of one shard contributes; positions are global linear indices.
struct BlockOutcome {
    std::vector<ErrorAccumulator> replicas;    // replica k vs the reference
    std::vector<ErrorAccumulator> mismatches;  // replica k+1 vs replica 0, bit for bit
    std::optional<ErrorAccumulator> perturbation;
    std::int64_t bytes = 0;  // trace bytes read
};

// One worker's reading and comparing of blocks. Owns fixed buffers of `chunkElements` floats,
// so a worker's memory never depends on the size of the tensors.
class BlockComparer {
public:
    BlockComparer(Hdf5Reader& reader, const MetricsBackend& backend, std::int64_t chunkElements);

    // Reads the block from the reference, the perturbed reference and every replica of the
    // shard, and compares them. A failed read returns its diagnostic.
    [[nodiscard]] std::optional<Diagnostic> compare(const ComparisonTask& task, const Shard& shard,
                                                    const Block& block, BlockOutcome& outcome);

private:
    // Reads a replica into `out`; Partial(sum) summands are added in float32 in rank order,
    // as an all-reduce would.
    std::optional<Diagnostic> readReplica(const Replica& replica, const Block& block, float* out,
                                          std::int64_t& bytes);
    // Turns block offsets into global linear indices.
    void toGlobal(ErrorAccumulator& acc, const Block& block,
                  const std::vector<std::int64_t>& globalShape) const;

    Hdf5Reader& reader_;
    const MetricsBackend& backend_;
    // Uninitialised on purpose: every block overwrites what it uses, and zeroing five chunks
    // per worker showed up in profiles of small traces.
    std::size_t capacity_;
    std::unique_ptr<float[]> reference_, perturbed_, first_, other_, summand_;
};

}  // namespace ttrace
