#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "compare/HeldBox.h"
#include "compare/MetricsBackend.h"
#include "compare/ReferenceBox.h"
#include "compare/TensorPairing.h"
#include "mapping/BlockPlan.h"
#include "trace/Hdf5Reader.h"

namespace ttrace {

// What one shard contributes inside one block of the reference; positions are global linear
// indices.
struct ShardContribution {
    std::size_t shard = 0;
    std::vector<ErrorAccumulator> replicas;    // replica k vs the reference
    std::vector<ErrorAccumulator> mismatches;  // replica k+1 vs replica 0, bit for bit
};

// What one block of the reference contributes: every shard piece inside it, in shard order.
struct BlockOutcome {
    std::vector<ShardContribution> shards;
    std::optional<ErrorAccumulator> perturbation;
    // The trusted runs' own copies of their shards inside the block, against their first.
    std::vector<CopyAgreement> referenceCopies, perturbedCopies;
    std::int64_t bytes = 0;  // trace bytes read
};

// One worker's reading and comparing of blocks. Owns fixed buffers of `chunkElements` floats,
// so a worker's memory never depends on the size of the tensors.
//
// Work goes by blocks of the whole tensor, not of the shards: a block of a reference held
// whole is contiguous in its dataset and is read once, and every shard piece inside it is
// compared against values gathered from memory. Reading the reference shard by shard instead
// would read strided boxes (one short run per row, and tp times over for column-parallel
// shards). A reference laid out over ranks is assembled into the block from its own pieces.
class BlockComparer {
public:
    BlockComparer(Hdf5Reader& reader, const MetricsBackend& backend, std::int64_t chunkElements);

    // Reads `referenceBlock` (a block of the whole tensor, planBlocks order) from the
    // reference and the perturbed reference (each copy of their shards, checked against the
    // first), then every replica of every shard piece inside it, and compares them. A failed
    // read returns its diagnostic.
    [[nodiscard]] std::optional<Diagnostic> compare(const ComparisonTask& task,
                                                    const Block& referenceBlock,
                                                    BlockOutcome& outcome);

private:
    // How a piece's copies are read and compared: decoded floats, or stored words for a
    // backend that decodes them (MetricsBackend::comparesStoredWords), whose words and scales go
    // to it as read wherever they are not partial sums.
    struct FloatCopies;
    struct WordCopies;
    // Every copy of every shard piece inside the block against the reference and the first
    // copy, R and P already read.
    template <class Copies>
    [[nodiscard]] std::optional<Diagnostic> compareShards(const ComparisonTask& task,
                                                          const Block& referenceBlock,
                                                          BlockOutcome& outcome, Copies& copies);
    // A trusted run's box: the stored words of a tensor held whole in one copy, or of its
    // shards' pieces pasted together where their words and scales allow, else the floats
    // readTrustedBox assembles.
    [[nodiscard]] std::optional<Diagnostic> readTrustedHeld(const LogicalTensor& tensor,
                                                            const Block& box, float* memory,
                                                            HeldBox& out, std::int64_t& bytes,
                                                            std::vector<CopyAgreement>* agreement);
    // The box as its shards' first copies' words (each summand pasted into a box of its own)
    // and scales (PastedScales), every other copy checked against the first on words, as
    // readTrustedBox checks floats. `pasted` false, and nothing counted, where the pieces'
    // scales do not paste into one table.
    [[nodiscard]] std::optional<Diagnostic> pasteTrustedWords(
        const LogicalTensor& tensor, const Block& box,
        const std::vector<std::vector<Block>>& pieces, float* memory, HeldBox& out,
        std::int64_t& bytes, std::vector<CopyAgreement>* agreement, bool& pasted);

    Hdf5Reader& reader_;
    const MetricsBackend& backend_;
    // Uninitialised on purpose: every block overwrites what it uses, and zeroing the chunks
    // of every worker showed up in profiles of small traces. What the backend compares is in
    // its host buffers (page-locked for a GPU); summand_ is where the CPU path adds partial
    // sums, never compared itself.
    std::size_t capacity_;
    HostBuffer reference_, perturbed_, gathered_, first_, other_;
    std::unique_ptr<float[]> summand_;
    // What those buffers hold in stored words, for a backend that decodes them.
    HeldBox referenceHeld_, perturbedHeld_, firstHeld_, otherHeld_;
};

}  // namespace ttrace
