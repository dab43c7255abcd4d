#include "compare/ReplicaSum.h"

#include <cstddef>

#include "trace/StoredBox.h"

namespace ttrace {

std::optional<Diagnostic> readReplicaSum(Hdf5Reader& reader, const Replica& replica,
                                         const Block& piece, float* out, float* scratch,
                                         std::int64_t& bytes) {
    const auto n = static_cast<std::size_t>(piece.elementCount());
    for (std::size_t s = 0; s < replica.summands.size(); ++s) {
        const auto& record = *replica.summands[s];
        float* target = s == 0 ? out : scratch;
        if (auto error = reader.read(record, piece.localStart, piece.count, target)) {
            return error;
        }
        bytes += datasetBytes(record.dtype, piece.count);
        if (s > 0) {
            for (std::size_t i = 0; i < n; ++i) {
                out[i] += target[i];
            }
        }
    }
    return std::nullopt;
}

}  // namespace ttrace
