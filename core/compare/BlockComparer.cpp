#include "compare/BlockComparer.h"

#include <cstddef>

namespace ttrace {

BlockComparer::BlockComparer(Hdf5Reader& reader, const MetricsBackend& backend,
                             std::int64_t chunkElements)
    : reader_(reader),
      backend_(backend),
      capacity_(static_cast<std::size_t>(chunkElements < 1 ? 1 : chunkElements)),
      reference_(std::make_unique_for_overwrite<float[]>(capacity_)),
      perturbed_(std::make_unique_for_overwrite<float[]>(capacity_)),
      first_(std::make_unique_for_overwrite<float[]>(capacity_)),
      other_(std::make_unique_for_overwrite<float[]>(capacity_)),
      summand_(std::make_unique_for_overwrite<float[]>(capacity_)) {}

std::optional<Diagnostic> BlockComparer::readReplica(const Replica& replica, const Block& block,
                                                     float* out, std::int64_t& bytes) {
    const auto n = static_cast<std::size_t>(block.elementCount());
    for (std::size_t s = 0; s < replica.summands.size(); ++s) {
        const auto& record = *replica.summands[s];
        float* target = s == 0 ? out : summand_.get();
        if (auto error = reader_.read(record, block.localStart, block.count, target)) {
            return error;
        }
        bytes += block.elementCount() * storageBytes(record.dtype);
        if (s > 0) {
            for (std::size_t i = 0; i < n; ++i) {
                out[i] += target[i];
            }
        }
    }
    return std::nullopt;
}

void BlockComparer::toGlobal(ErrorAccumulator& acc, const Block& block,
                             const std::vector<std::int64_t>& globalShape) const {
    if (acc.maxAbsPos >= 0) {
        acc.maxAbsPos = linearIndex(blockElementCoord(block, acc.maxAbsPos), globalShape);
    }
    if (acc.maxRelPos >= 0) {
        acc.maxRelPos = linearIndex(blockElementCoord(block, acc.maxRelPos), globalShape);
    }
}

std::optional<Diagnostic> BlockComparer::compare(const ComparisonTask& task, const Shard& shard,
                                                 const Block& block, BlockOutcome& outcome) {
    const auto& shape = task.distributed->globalShape;
    const auto n = static_cast<std::size_t>(block.elementCount());
    outcome = BlockOutcome{};
    if (n > capacity_) {
        Diagnostic error;
        error.tensor = task.distributed->key.toString();
        error.message = QStringLiteral("internal: block of %1 elements exceeds the chunk of %2")
                            .arg(n)
                            .arg(capacity_);
        return error;
    }
    // The reference holds the tensor whole: its local coordinates are global ones.
    if (auto error =
            reader_.read(*task.reference, block.globalStart, block.count, reference_.get())) {
        return error;
    }
    outcome.bytes += block.elementCount() * storageBytes(task.reference->dtype);
    if (task.perturbed) {
        if (auto error =
                reader_.read(*task.perturbed, block.globalStart, block.count, perturbed_.get())) {
            return error;
        }
        outcome.bytes += block.elementCount() * storageBytes(task.perturbed->dtype);
        auto acc = backend_.compare(reference_.get(), perturbed_.get(), n);
        toGlobal(acc, block, shape);
        outcome.perturbation = acc;
    }
    for (std::size_t k = 0; k < shard.replicas.size(); ++k) {
        float* values = k == 0 ? first_.get() : other_.get();
        if (auto error = readReplica(shard.replicas[k], block, values, outcome.bytes)) {
            return error;
        }
        auto acc = backend_.compare(reference_.get(), values, n);
        toGlobal(acc, block, shape);
        outcome.replicas.push_back(acc);
        if (k > 0) {
            auto mismatch = backend_.compare(first_.get(), values, n);
            toGlobal(mismatch, block, shape);
            outcome.mismatches.push_back(mismatch);
        }
    }
    return std::nullopt;
}

}  // namespace ttrace
