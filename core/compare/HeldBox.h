#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "compare/MetricsBackend.h"
#include "compare/StoredRun.h"
#include "mapping/BlockPlan.h"
#include "mapping/LogicalTensor.h"
#include "trace/Diagnostic.h"
#include "trace/Hdf5Reader.h"

namespace ttrace {

// A box of one copy's values in host memory, as a backend that decodes stored words is given
// them (MetricsBackend::comparesStoredWords): the stored words and scale table of each of its
// summands (one, or its partial sums where the backend adds that many), else the fp32 sum of
// its partial sums. Rows of the box (its leading dimensions flattened) are `words.stride`
// stored elements apart, the first at words.origin; each further summand says its own.
struct HeldBox {
    StoredWords words;
    std::vector<std::int64_t> count;  // the box's extent, in elements
    std::vector<float> table;         // what words.scales.table points into
    // The further summands, added to the first in order, their tables and their words'
    // memory (the backend's host buffers, kept from box to box).
    std::vector<StoredWords> more;
    std::vector<std::vector<float>> moreTables;
    std::vector<HostBuffer> moreMemory;

    HeldBox() = default;
    HeldBox(const HeldBox&) = delete;
    HeldBox& operator=(const HeldBox&) = delete;
};

// Reads `piece` of one copy of a shard into `memory` (`capacity` elements of 4 bytes): its
// summands as stored words with their scales where `backend` adds that many
// (summandsPerSide), else its partial sums added as readReplicaSum adds them, `summand` holding
// the one being added. Adds the bytes read to `bytes`.
[[nodiscard]] std::optional<Diagnostic> readHeldBox(Hdf5Reader& reader, const Replica& replica,
                                                    const Block& piece, void* memory,
                                                    float* summand, const MetricsBackend& backend,
                                                    std::size_t capacity, HeldBox& out,
                                                    std::int64_t& bytes);

// fp32 values of a box already in memory, packed row-major, as a HeldBox.
void holdFloats(const float* values, std::span<const std::int64_t> count, HeldBox& out);

// Whether `a` and `b`, boxes of the same extent, hold the same words and scales: the same
// values, known without decoding them.
bool sameStoredValues(const HeldBox& a, const HeldBox& b);

// R's elements at `offset` (per dimension) in its box `reference` against the whole box
// `distributed`, through backend.compareStored. Positions are offsets into D's box.
[[nodiscard]] ErrorAccumulator compareHeld(const MetricsBackend& backend, const HeldBox& reference,
                                           std::span<const std::int64_t> offset,
                                           const HeldBox& distributed);

}  // namespace ttrace
