#include "compare/BlockComparer.h"

#include <cstddef>
#include <cstring>
#include <optional>

#include "compare/ReferenceBox.h"
#include "compare/ReplicaSum.h"
#include "trace/BoxCopy.h"

namespace ttrace {

BlockComparer::BlockComparer(Hdf5Reader& reader, const MetricsBackend& backend,
                             std::int64_t chunkElements)
    : reader_(reader),
      backend_(backend),
      capacity_(static_cast<std::size_t>(chunkElements < 1 ? 1 : chunkElements)),
      reference_(backend.allocateHostBuffer(capacity_)),
      perturbed_(backend.allocateHostBuffer(capacity_)),
      gathered_(backend.allocateHostBuffer(capacity_)),
      first_(backend.allocateHostBuffer(capacity_)),
      other_(backend.allocateHostBuffer(capacity_)),
      summand_(std::make_unique_for_overwrite<float[]>(capacity_)) {}

std::optional<Diagnostic> BlockComparer::compare(const ComparisonTask& task,
                                                 const Block& referenceBlock,
                                                 BlockOutcome& outcome) {
    const auto& shape = task.distributed->globalShape;
    const auto n = static_cast<std::size_t>(referenceBlock.elementCount());
    outcome = BlockOutcome{};
    if (n > capacity_) {
        Diagnostic error;
        error.tensor = task.distributed->key.toString();
        error.message = QStringLiteral("internal: block of %1 elements exceeds the chunk of %2")
                            .arg(n)
                            .arg(capacity_);
        return error;
    }
    if (auto error = readTrustedBox(reader_, *task.reference, referenceBlock, reference_.get(),
                                    gathered_.get(), other_.get(), summand_.get(), outcome.bytes,
                                    &backend_, &outcome.referenceCopies)) {
        return error;
    }
    if (task.perturbed) {
        if (auto error = readTrustedBox(reader_, *task.perturbed, referenceBlock, perturbed_.get(),
                                        gathered_.get(), other_.get(), summand_.get(),
                                        outcome.bytes, &backend_, &outcome.perturbedCopies)) {
            return error;
        }
        auto acc = backend_.compare(reference_.get(), perturbed_.get(), n);
        toGlobalPositions(acc, referenceBlock, shape);
        outcome.perturbation = acc;
    }
    const auto& shards = task.distributed->shards;
    for (std::size_t s = 0; s < shards.size(); ++s) {
        const auto pieces = shardPiecesInBox(shards[s].ranges, referenceBlock);
        if (pieces.empty()) {
            continue;
        }
        ShardContribution contribution;
        contribution.shard = s;
        contribution.replicas.resize(shards[s].replicas.size());
        contribution.mismatches.resize(
            contribution.replicas.empty() ? 0 : contribution.replicas.size() - 1);
        for (const Block& piece : pieces) {
            const auto m = static_cast<std::size_t>(piece.elementCount());
            // The reference's values of the piece: compared in place where they are equally
            // spaced runs of the block (a column range), gathered where they are not.
            std::vector<std::int64_t> offset(piece.globalStart.size());
            for (std::size_t d = 0; d < offset.size(); ++d) {
                offset[d] = piece.globalStart[d] - referenceBlock.globalStart[d];
            }
            auto rows = boxRows(referenceBlock.count, offset, piece.count);
            if (!rows) {
                copyBox(reinterpret_cast<const std::byte*>(reference_.get()), referenceBlock.count,
                        offset, piece.count, sizeof(float),
                        reinterpret_cast<std::byte*>(gathered_.get()));
            }
            const float* referenceValues = rows ? reference_.get() + rows->offset : gathered_.get();
            const auto stride = static_cast<std::size_t>(rows ? rows->stride : 0);
            const auto runLength = static_cast<std::size_t>(rows ? rows->runLength : m);
            const auto runs = static_cast<std::size_t>(rows ? rows->rows : 1);
            const auto againstReference = [&](const float* values) {
                return backend_.compareRows(referenceValues, stride, values, runLength, runs);
            };
            // Replicas that must be identical usually are: a replica bitwise equal to the
            // first has the first's metrics, and its mismatch is the first against itself,
            // computed once. Only replicas that differ cost a comparison.
            ErrorAccumulator firstAgainstReference;
            std::optional<ErrorAccumulator> firstAgainstItself;
            for (std::size_t k = 0; k < shards[s].replicas.size(); ++k) {
                float* values = k == 0 ? first_.get() : other_.get();
                if (auto error = readReplicaSum(reader_, shards[s].replicas[k], piece, values,
                                                summand_.get(), outcome.bytes)) {
                    return error;
                }
                if (k > 0 && std::memcmp(values, first_.get(), m * sizeof(float)) == 0) {
                    contribution.replicas[k].merge(firstAgainstReference);
                    if (!firstAgainstItself) {
                        firstAgainstItself = backend_.compare(first_.get(), first_.get(), m);
                        toGlobalPositions(*firstAgainstItself, piece, shape);
                    }
                    contribution.mismatches[k - 1].merge(*firstAgainstItself);
                    continue;
                }
                auto acc = againstReference(values);
                toGlobalPositions(acc, piece, shape);
                contribution.replicas[k].merge(acc);
                if (k == 0) {
                    firstAgainstReference = acc;
                } else {
                    auto mismatch = backend_.compare(first_.get(), values, m);
                    toGlobalPositions(mismatch, piece, shape);
                    contribution.mismatches[k - 1].merge(mismatch);
                }
            }
        }
        outcome.shards.push_back(std::move(contribution));
    }
    return std::nullopt;
}

}  // namespace ttrace
