#include "compare/BlockComparer.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <numeric>
#include <optional>
#include <vector>

#include "compare/PastedScales.h"
#include "compare/ReferenceBox.h"
#include "compare/ReplicaSum.h"
#include "trace/BoxCopy.h"
#include "trace/StoredBox.h"

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

namespace {

// The pieces of a trusted run's shards inside `box`, shard by shard (empty where a shard has
// none).
std::vector<std::vector<Block>> piecesInBox(const LogicalTensor& tensor, const Block& box) {
    std::vector<std::vector<Block>> pieces;
    pieces.reserve(tensor.shards.size());
    for (const Shard& shard : tensor.shards) {
        pieces.push_back(shardPiecesInBox(shard.ranges, box));
    }
    return pieces;
}

// Whether the box of those pieces may be their first copies' stored words pasted side by
// side: each piece holds as many summands (at most `maxSummands`), and its summand k has the
// same dtype as every other piece's, and a scale per tensor where theirs is one
// (PastedScales then says whether their scales paste). Pieces that differ in these are
// assembled in fp32 instead.
bool pastesAsWords(const LogicalTensor& tensor, const std::vector<std::vector<Block>>& pieces,
                   std::size_t maxSummands) {
    const std::vector<const TensorRecord*>* first = nullptr;
    for (std::size_t s = 0; s < tensor.shards.size(); ++s) {
        if (pieces[s].empty()) {
            continue;
        }
        const auto& summands = tensor.shards[s].replicas.front().summands;
        first = first ? first : &summands;
        if (summands.empty() || summands.size() > maxSummands || summands.size() != first->size()) {
            return false;
        }
        for (std::size_t k = 0; k < summands.size(); ++k) {
            const TensorRecord& a = *summands[k];
            const TensorRecord& b = *(*first)[k];
            if (a.dtype != b.dtype ||
                (isScaled(a.dtype) && a.scales.perTensor() != b.scales.perTensor())) {
                return false;
            }
        }
    }
    return first != nullptr;
}

// The widest run of the box's columns that every piece starts and ends on a multiple of (or
// ends at the box's end): where their per-tensor scales differ, one table entry per run says
// them.
std::int64_t columnGridOf(const Block& box, const std::vector<std::vector<Block>>& pieces) {
    if (box.count.empty()) {
        return 1;
    }
    std::int64_t grid = box.count.back();
    for (const auto& shardPieces : pieces) {
        for (const Block& part : shardPieces) {
            grid = std::gcd(grid, part.globalStart.back() - box.globalStart.back());
            grid = std::gcd(grid, part.count.back());
        }
    }
    return std::max<std::int64_t>(grid, 1);
}

// How many stored elements apart the rows of a box of `count` elements of `dtype` are,
// packed from stored column `origin` (fp4: whole bytes, two elements each).
std::size_t storedPitch(DType dtype, std::span<const std::int64_t> count, std::size_t origin) {
    if (count.empty()) {
        return 1;
    }
    const auto perWord = static_cast<std::size_t>(elementsPerWord(dtype));
    return (origin + static_cast<std::size_t>(count.back()) + perWord - 1) / perWord * perWord;
}

// The stored column the rows of a box start at, so that its stored words hold `words`, a
// piece at `column` of the box, at the same place in a byte as the piece's do: 0 but for fp4.
std::size_t boxOrigin(const StoredWords& words, std::int64_t column) {
    const int perWord = elementsPerWord(words.dtype);
    const std::int64_t r = (static_cast<std::int64_t>(words.origin) - column) % perWord;
    return static_cast<std::size_t>(r < 0 ? r + perWord : r);
}

// Pastes the stored words of a piece of `pieceCount` elements at `offset` in a box of
// `count`, whose rows start at stored column `origin`, into the box's words at `into`. False
// where fp4's piece shares a byte with another piece, or lies at the other nibble of its
// bytes than the box's.
bool pasteWords(const StoredWords& words, std::span<const std::int64_t> count, std::size_t origin,
                std::span<const std::int64_t> offset, std::span<const std::int64_t> pieceCount,
                void* into) {
    const int perWord = elementsPerWord(words.dtype);
    std::vector<std::int64_t> at(offset.begin(), offset.end());
    std::vector<std::int64_t> stored = storedShape(words.dtype, pieceCount);
    if (perWord > 1 && !at.empty()) {
        const auto skip = static_cast<std::int64_t>(words.origin);
        const std::int64_t start = static_cast<std::int64_t>(origin) + at.back();
        const std::int64_t end = start + pieceCount.back();
        if ((start - skip) % perWord != 0 || (skip != 0 && at.back() != 0) ||
            (end % perWord != 0 && at.back() + pieceCount.back() != count.back())) {
            return false;
        }
        at.back() = (start - skip) / perWord;
        stored.back() = (skip + pieceCount.back() + perWord - 1) / perWord;
    }
    std::vector<std::int64_t> boxStored(count.begin(), count.end());
    if (!boxStored.empty()) {
        boxStored.back() =
            static_cast<std::int64_t>(storedPitch(words.dtype, count, origin)) / perWord;
    }
    pasteBox(static_cast<const std::byte*>(words.data), boxStored, at, stored,
             static_cast<std::size_t>(storageBytes(words.dtype)), static_cast<std::byte*>(into));
    return true;
}

// `words`, a description of some piece's summand, as the same summand of the whole box of
// `count` at `data`: its stored rows from `origin`, the piece's dtype, the box's `scales`.
StoredWords wordsOfBox(const StoredWords& words, const void* data,
                       std::span<const std::int64_t> count, std::size_t origin,
                       const StoredScales& scales) {
    StoredWords box;
    box.data = data;
    box.dtype = words.dtype;
    box.origin = origin;
    box.stride = storedPitch(words.dtype, count, origin);
    box.scales = scales;
    return box;
}

}  // namespace

std::optional<Diagnostic> BlockComparer::readTrustedHeld(const LogicalTensor& tensor,
                                                         const Block& box, float* memory,
                                                         HeldBox& out, std::int64_t& bytes,
                                                         std::vector<CopyAgreement>* agreement) {
    const auto pieces = piecesInBox(tensor, box);
    if (tensor.shards.size() == 1 && tensor.shards.front().replicas.size() == 1 &&
        pieces.front().size() == 1 && pieces.front().front().count == box.count) {
        return readHeldBox(reader_, tensor.shards.front().replicas.front(), pieces.front().front(),
                           memory, summand_.get(), backend_, capacity_, out, bytes);
    }
    if (pastesAsWords(tensor, pieces, backend_.summandsPerSide())) {
        bool pasted = false;
        if (auto error =
                pasteTrustedWords(tensor, box, pieces, memory, out, bytes, agreement, pasted)) {
            return error;
        }
        if (pasted) {
            return std::nullopt;
        }
    }
    if (auto error = readTrustedBox(reader_, tensor, box, memory, gathered_.get(), other_.get(),
                                    summand_.get(), bytes, &backend_, agreement)) {
        return error;
    }
    holdFloats(memory, box.count, out);
    return std::nullopt;
}

std::optional<Diagnostic> BlockComparer::pasteTrustedWords(
    const LogicalTensor& tensor, const Block& box, const std::vector<std::vector<Block>>& pieces,
    float* memory, HeldBox& out, std::int64_t& bytes, std::vector<CopyAgreement>* agreement,
    bool& pasted) {
    // firstHeld_ and otherHeld_ serve the shards' copies later; until then they hold a piece's
    // first copy and each other copy, as read.
    pasted = false;
    const std::int64_t bytesBefore = bytes;
    const std::size_t agreementsBefore = agreement ? agreement->size() : 0;
    const std::vector<std::int64_t> atStart(box.count.size(), 0);
    std::vector<std::int64_t> offset(box.count.size());
    const std::int64_t columnGrid = columnGridOf(box, pieces);
    std::vector<PastedScales> scales;  // of each summand
    std::vector<std::size_t> origins;  // the stored column each summand's rows start at
    for (std::size_t s = 0; s < tensor.shards.size(); ++s) {
        const Shard& shard = tensor.shards[s];
        for (const Block& part : pieces[s]) {
            if (auto error = readHeldBox(reader_, shard.replicas.front(), part, gathered_.get(),
                                         summand_.get(), backend_, capacity_, firstHeld_, bytes)) {
                return error;
            }
            for (std::size_t d = 0; d < offset.size(); ++d) {
                offset[d] = part.globalStart[d] - box.globalStart[d];
            }
            while (out.moreMemory.size() < firstHeld_.more.size()) {
                out.moreMemory.push_back(backend_.allocateHostBuffer(capacity_));
                out.moreTables.emplace_back();
            }
            if (scales.empty()) {
                // fp4's box keeps the first piece's nibble of a byte, so that pieces paste
                // as whole bytes.
                scales.resize(1 + firstHeld_.more.size());
                origins.resize(scales.size());
                for (std::size_t k = 0; k < scales.size(); ++k) {
                    const StoredWords& words = k == 0 ? firstHeld_.words : firstHeld_.more[k - 1];
                    origins[k] = boxOrigin(words, offset.empty() ? 0 : offset.back());
                    scales[k].start(box.count, storedPitch(words.dtype, box.count, origins[k]),
                                    origins[k], columnGrid,
                                    k == 0 ? out.table : out.moreTables[k - 1]);
                }
            }
            const auto paste = [&](std::size_t k, const StoredWords& words, void* into) {
                return pasteWords(words, box.count, origins[k], offset, part.count, into) &&
                       scales[k].add(words, offset, part.count);
            };
            bool fits = paste(0, firstHeld_.words, memory);
            for (std::size_t k = 0; fits && k < firstHeld_.more.size(); ++k) {
                fits = paste(k + 1, firstHeld_.more[k], out.moreMemory[k].get());
            }
            if (!fits) {  // the floats of readTrustedBox instead, the bytes counted there
                bytes = bytesBefore;
                if (agreement) {
                    agreement->resize(agreementsBefore);
                }
                return std::nullopt;
            }
            for (std::size_t k = 1; agreement && k < shard.replicas.size(); ++k) {
                if (auto error =
                        readHeldBox(reader_, shard.replicas[k], part, other_.get(), summand_.get(),
                                    backend_, capacity_, otherHeld_, bytes)) {
                    return error;
                }
                CopyAgreement copy{s, k, {}};
                copy.difference.count = part.elementCount();
                if (!sameStoredValues(firstHeld_, otherHeld_)) {
                    copy.difference = compareHeld(backend_, firstHeld_, atStart, otherHeld_);
                    toGlobalPositions(copy.difference, part, tensor.globalShape);
                }
                agreement->push_back(std::move(copy));
            }
        }
    }
    // Every piece's summands are alike (pastesAsWords): the last one read describes the box's.
    out.count = box.count;
    out.words = wordsOfBox(firstHeld_.words, memory, box.count, origins[0], scales[0].scales());
    out.more.clear();
    for (std::size_t k = 0; k < firstHeld_.more.size(); ++k) {
        out.more.push_back(wordsOfBox(firstHeld_.more[k], out.moreMemory[k].get(), box.count,
                                      origins[k + 1], scales[k + 1].scales()));
    }
    pasted = true;
    return std::nullopt;
}

}  // namespace ttrace
