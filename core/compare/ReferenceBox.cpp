#include "compare/ReferenceBox.h"

#include <cstddef>
#include <cstring>

#include "compare/ReplicaSum.h"
#include "trace/BoxCopy.h"

namespace ttrace {

void toGlobalPositions(ErrorAccumulator& acc, const Block& block,
                       const std::vector<std::int64_t>& globalShape) {
    for (auto* pos : {&acc.maxAbsPos, &acc.maxRelPos}) {
        if (*pos >= 0) {
            *pos = linearIndex(blockElementCoord(block, *pos), globalShape);
        }
    }
}

std::optional<Diagnostic> readTrustedBox(Hdf5Reader& reader, const LogicalTensor& tensor,
                                         const Block& box, float* out, float* piece, float* other,
                                         float* summand, std::int64_t& bytes,
                                         const MetricsBackend* backend,
                                         std::vector<CopyAgreement>* agreement) {
    for (std::size_t s = 0; s < tensor.shards.size(); ++s) {
        const Shard& shard = tensor.shards[s];
        for (const Block& part : shardPiecesInBox(shard.ranges, box)) {
            // A shard covering the box (a tensor held whole) is read in place.
            const bool inPlace = part.count == box.count;
            float* first = inPlace ? out : piece;
            if (auto error =
                    readReplicaSum(reader, shard.replicas.front(), part, first, summand, bytes)) {
                return error;
            }
            const auto m = static_cast<std::size_t>(part.elementCount());
            for (std::size_t k = 1; agreement && backend && k < shard.replicas.size(); ++k) {
                if (auto error =
                        readReplicaSum(reader, shard.replicas[k], part, other, summand, bytes)) {
                    return error;
                }
                CopyAgreement copy{s, k, {}};
                copy.difference.count = static_cast<std::int64_t>(m);
                if (std::memcmp(first, other, m * sizeof(float)) != 0) {
                    copy.difference = backend->compare(first, other, m);
                    toGlobalPositions(copy.difference, part, tensor.globalShape);
                }
                agreement->push_back(std::move(copy));
            }
            if (!inPlace) {
                std::vector<std::int64_t> offset(box.count.size());
                for (std::size_t d = 0; d < offset.size(); ++d) {
                    offset[d] = part.globalStart[d] - box.globalStart[d];
                }
                pasteBox(reinterpret_cast<const std::byte*>(piece), box.count, offset, part.count,
                         sizeof(float), reinterpret_cast<std::byte*>(out));
            }
        }
    }
    return std::nullopt;
}

}  // namespace ttrace
