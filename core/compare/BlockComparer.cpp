#include "compare/BlockComparer.h"

#include <cstddef>
#include <cstring>
#include <optional>

#include "compare/ReferenceBox.h"
#include "compare/ReplicaSum.h"
#include "trace/BoxCopy.h"

namespace ttrace {

// The copies of a shard piece as decoded floats, R's piece compared in place where it is
// equally spaced runs of the block (a column range), gathered where it is not.
struct BlockComparer::FloatCopies {
    BlockComparer& self;
    const Block& referenceBlock;
    std::size_t m = 0;
    const float* referenceValues = nullptr;
    std::size_t stride = 0, runLength = 0, runs = 1;

    void startPiece(const Block& piece, const std::vector<std::int64_t>& offset) {
        m = static_cast<std::size_t>(piece.elementCount());
        auto rows = boxRows(referenceBlock.count, offset, piece.count);
        if (!rows) {
            copyBox(reinterpret_cast<const std::byte*>(self.reference_.get()), referenceBlock.count,
                    offset, piece.count, sizeof(float),
                    reinterpret_cast<std::byte*>(self.gathered_.get()));
        }
        referenceValues = rows ? self.reference_.get() + rows->offset : self.gathered_.get();
        stride = static_cast<std::size_t>(rows ? rows->stride : 0);
        runLength = static_cast<std::size_t>(rows ? rows->runLength : m);
        runs = static_cast<std::size_t>(rows ? rows->rows : 1);
    }
    float* values(bool first) const { return first ? self.first_.get() : self.other_.get(); }
    std::optional<Diagnostic> read(const Replica& replica, const Block& piece, bool first,
                                   std::int64_t& bytes) {
        return readReplicaSum(self.reader_, replica, piece, values(first), self.summand_.get(),
                              bytes);
    }
    bool otherIsFirst() const {
        return std::memcmp(values(false), values(true), m * sizeof(float)) == 0;
    }
    ErrorAccumulator againstReference(bool first) const {
        return self.backend_.compareRows(referenceValues, stride, values(first), runLength, runs);
    }
    ErrorAccumulator againstFirst(bool first) const {
        return self.backend_.compare(values(true), values(first), m);
    }
};

// The copies of a shard piece in their stored words, for a backend that decodes them.
struct BlockComparer::WordCopies {
    BlockComparer& self;
    std::vector<std::int64_t> offset, atStart;

    void startPiece(const Block&, const std::vector<std::int64_t>& pieceOffset) {
        offset = pieceOffset;
        atStart.assign(offset.size(), 0);
    }
    HeldBox& held(bool first) const { return first ? self.firstHeld_ : self.otherHeld_; }
    std::optional<Diagnostic> read(const Replica& replica, const Block& piece, bool first,
                                   std::int64_t& bytes) {
        return readHeldBox(self.reader_, replica, piece,
                           first ? self.first_.get() : self.other_.get(), self.summand_.get(),
                           self.backend_, self.capacity_, held(first), bytes);
    }
    bool otherIsFirst() const { return sameStoredValues(held(false), held(true)); }
    ErrorAccumulator againstReference(bool first) const {
        return compareHeld(self.backend_, self.referenceHeld_, offset, held(first));
    }
    ErrorAccumulator againstFirst(bool first) const {
        return compareHeld(self.backend_, held(true), atStart, held(first));
    }
};

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
    if (backend_.comparesStoredWords()) {
        const std::vector<std::int64_t> atStart(referenceBlock.count.size(), 0);
        if (auto error = readTrustedHeld(*task.reference, referenceBlock, reference_.get(),
                                         referenceHeld_, outcome.bytes, &outcome.referenceCopies)) {
            return error;
        }
        if (task.perturbed) {
            if (auto error =
                    readTrustedHeld(*task.perturbed, referenceBlock, perturbed_.get(),
                                    perturbedHeld_, outcome.bytes, &outcome.perturbedCopies)) {
                return error;
            }
            auto acc = compareHeld(backend_, referenceHeld_, atStart, perturbedHeld_);
            toGlobalPositions(acc, referenceBlock, shape);
            outcome.perturbation = acc;
        }
        WordCopies copies{*this, {}, {}};
        return compareShards(task, referenceBlock, outcome, copies);
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
    FloatCopies copies{*this, referenceBlock};
    return compareShards(task, referenceBlock, outcome, copies);
}

template <class Copies>
std::optional<Diagnostic> BlockComparer::compareShards(const ComparisonTask& task,
                                                       const Block& referenceBlock,
                                                       BlockOutcome& outcome, Copies& copies) {
    const auto& shape = task.distributed->globalShape;
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
            std::vector<std::int64_t> offset(piece.globalStart.size());
            for (std::size_t d = 0; d < offset.size(); ++d) {
                offset[d] = piece.globalStart[d] - referenceBlock.globalStart[d];
            }
            copies.startPiece(piece, offset);
            // Replicas that must be identical usually are: a replica bitwise equal to the
            // first has the first's metrics, and its mismatch is the first against itself,
            // computed once. Only replicas that differ cost a comparison.
            ErrorAccumulator firstAgainstReference;
            std::optional<ErrorAccumulator> firstAgainstItself;
            for (std::size_t k = 0; k < shards[s].replicas.size(); ++k) {
                const bool first = k == 0;
                if (auto error = copies.read(shards[s].replicas[k], piece, first, outcome.bytes)) {
                    return error;
                }
                if (!first && copies.otherIsFirst()) {
                    contribution.replicas[k].merge(firstAgainstReference);
                    if (!firstAgainstItself) {
                        firstAgainstItself = copies.againstFirst(true);
                        toGlobalPositions(*firstAgainstItself, piece, shape);
                    }
                    contribution.mismatches[k - 1].merge(*firstAgainstItself);
                    continue;
                }
                auto acc = copies.againstReference(first);
                toGlobalPositions(acc, piece, shape);
                contribution.replicas[k].merge(acc);
                if (first) {
                    firstAgainstReference = acc;
                } else {
                    auto mismatch = copies.againstFirst(false);
                    toGlobalPositions(mismatch, piece, shape);
                    contribution.mismatches[k - 1].merge(mismatch);
                }
            }
        }
        outcome.shards.push_back(std::move(contribution));
    }
    return std::nullopt;
}

std::optional<Diagnostic> BlockComparer::readTrustedHeld(const LogicalTensor& tensor,
                                                         const Block& box, float* memory,
                                                         HeldBox& out, std::int64_t& bytes,
                                                         std::vector<CopyAgreement>* agreement) {
    if (tensor.shards.size() == 1 && tensor.shards.front().replicas.size() == 1) {
        const auto parts = shardPiecesInBox(tensor.shards.front().ranges, box);
        if (parts.size() == 1 && parts.front().count == box.count) {
            return readHeldBox(reader_, tensor.shards.front().replicas.front(), parts.front(),
                               memory, summand_.get(), backend_, capacity_, out, bytes);
        }
    }
    if (auto error = readTrustedBox(reader_, tensor, box, memory, gathered_.get(), other_.get(),
                                    summand_.get(), bytes, &backend_, agreement)) {
        return error;
    }
    holdFloats(memory, box.count, out);
    return std::nullopt;
}

}  // namespace ttrace
