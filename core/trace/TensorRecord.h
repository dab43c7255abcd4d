#pragma once

#include <QString>
#include <cstdint>
#include <optional>
#include <vector>

#include "trace/BlockScales.h"
#include "trace/DType.h"
#include "trace/FileStamp.h"
#include "trace/Placement.h"
#include "trace/Recomputation.h"
#include "trace/TensorKey.h"

namespace ttrace {

// One captured dataset in one rank file, with everything its attributes say. Records are
// what the index stores; reading the data goes through Hdf5Reader.
struct TensorRecord {
    int rank = 0;
    QString file;     // absolute path of the rank file
    QString dataset;  // HDF5 path inside it, e.g. "/tensors/000042"
    TensorKey key;
    std::int64_t seq = 0;  // execution sequence number on this rank
    int layer = -1;        // global layer number, -1 outside the layers
    int expert = -1;       // global expert id, -1 when not an expert tensor
    DType dtype = DType::F32;
    BlockScales scales;                     // fp8 and fp4: how the stored values decode
    std::vector<std::int64_t> globalShape;  // whole tensor
    std::vector<std::int64_t> localShape;   // this dataset
    ShardRanges ranges;                     // always filled; whole tensor when not sharded
    std::vector<AxisPlacement> placements;  // empty in reference runs
    std::vector<int> coords;                // mesh coordinates of `rank`
    // Where its bytes lie in `file` when they can be read as stored, without opening the file
    // through HDF5 (rawDataOffset()), and the file's size and modification time when that was
    // found: the offset is used only while the file still has them.
    std::optional<std::uint64_t> dataOffset;
    std::optional<FileStamp> fileStamp;
    // Forward tensors: how activation checkpointing's recomputation of it differed from this,
    // the first forward, when the rank file says it did (its `recomputations` attribute).
    std::optional<RecomputationDifference> recomputation;

    std::int64_t storedBytes() const;
};

}  // namespace ttrace
