#include "compare/HeldBox.h"

#include <algorithm>
#include <cstring>

#include "compare/ReplicaSum.h"
#include "trace/StoredBox.h"

namespace ttrace {

namespace {

std::size_t product(std::span<const std::int64_t> extents) {
    std::size_t n = 1;
    for (const auto e : extents) {
        n *= static_cast<std::size_t>(e);
    }
    return n;
}

std::size_t rowLengthOf(std::span<const std::int64_t> count) {
    return count.empty() ? 1 : static_cast<std::size_t>(count.back());
}

// `words` from the element (row, column) of its box on.
StoredWords advancedTo(StoredWords words, std::size_t row, std::size_t column) {
    words.origin += row * words.stride + column;
    return words;
}

void shiftPositions(ErrorAccumulator& acc, std::size_t offset) {
    for (auto* pos : {&acc.maxAbsPos, &acc.maxRelPos}) {
        if (*pos >= 0) {
            *pos += static_cast<std::int64_t>(offset);
        }
    }
}

}  // namespace

namespace {

// The stored words of `piece` of one dataset into `memory`, described with their scales.
std::optional<Diagnostic> readSummand(Hdf5Reader& reader, const TensorRecord& record,
                                      const Block& piece, void* memory, std::vector<float>& table,
                                      StoredWords& out, std::int64_t& bytes) {
    if (auto error = reader.readWords(record, piece.localStart, piece.count,
                                      static_cast<std::uint8_t*>(memory))) {
        return error;
    }
    bytes += datasetBytes(record.dtype, piece.count);
    const StoredBox box = storedBox(record.dtype, record.localShape, piece.localStart, piece.count);
    out = StoredWords{};
    out.data = memory;
    out.dtype = record.dtype;
    out.origin = box.skip;
    out.stride = box.count.empty()
                     ? 1
                     : static_cast<std::size_t>(box.count.back() * elementsPerWord(record.dtype));
    table.clear();
    if (isScaled(record.dtype)) {
        out.scales = record.scales.boxScales(record.dtype, record.localShape, piece.localStart,
                                             piece.count, table);
    }
    return std::nullopt;
}

}  // namespace

std::optional<Diagnostic> readHeldBox(Hdf5Reader& reader, const Replica& replica,
                                      const Block& piece, void* memory, float* summand,
                                      const MetricsBackend& backend, std::size_t capacity,
                                      HeldBox& out, std::int64_t& bytes) {
    out.count = piece.count;
    out.more.clear();
    const std::size_t summands = replica.summands.size();
    if (summands > backend.summandsPerSide()) {
        if (auto error = readReplicaSum(reader, replica, piece, static_cast<float*>(memory),
                                        summand, bytes)) {
            return error;
        }
        holdFloats(static_cast<const float*>(memory), piece.count, out);
        return std::nullopt;
    }
    if (auto error = readSummand(reader, *replica.summands.front(), piece, memory, out.table,
                                 out.words, bytes)) {
        return error;
    }
    for (std::size_t s = 1; s < summands; ++s) {
        if (out.moreMemory.size() < s) {
            out.moreMemory.push_back(backend.allocateHostBuffer(capacity));
            out.moreTables.emplace_back();
        }
        StoredWords words;
        if (auto error =
                readSummand(reader, *replica.summands[s], piece, out.moreMemory[s - 1].get(),
                            out.moreTables[s - 1], words, bytes)) {
            return error;
        }
        out.more.push_back(words);
    }
    return std::nullopt;
}

void holdFloats(const float* values, std::span<const std::int64_t> count, HeldBox& out) {
    out.count.assign(count.begin(), count.end());
    out.table.clear();
    out.more.clear();
    out.words = StoredWords{};
    out.words.data = values;
    out.words.stride = rowLengthOf(count);
}

namespace {

// Whether two boxes of `count` elements hold the same stored words and the same scales
// (`xt`, `yt` their tables), laid out alike: the same values, known without decoding them.
bool sameWords(const StoredWords& x, std::span<const float> xt, const StoredWords& y,
               std::span<const float> yt, const std::vector<std::int64_t>& count) {
    const StoredScales& s = x.scales;
    const StoredScales& t = y.scales;
    // Scales bit for bit (a scale of -0 is not one of +0), laid out alike.
    if (x.dtype != y.dtype || x.origin != y.origin || x.stride != y.stride ||
        xt.size() != yt.size() || s.pitch != t.pitch || s.rowEntries != t.rowEntries ||
        s.blockColumns != t.blockColumns || s.columnShift != t.columnShift ||
        std::memcmp(&s.scaleInv, &t.scaleInv, sizeof s.scaleInv) != 0 ||
        (!xt.empty() && std::memcmp(xt.data(), yt.data(), xt.size() * sizeof(float)) != 0)) {
        return false;
    }
    // Whole stored rows: a nibble beside an fp4 box can make equal boxes look different (they
    // are then compared), never different ones look equal.
    const std::size_t rows = product(count) / std::max<std::size_t>(rowLengthOf(count), 1);
    const auto perWord = static_cast<std::size_t>(elementsPerWord(x.dtype));
    const std::size_t bytes = rows * ((x.stride + perWord - 1) / perWord) *
                              static_cast<std::size_t>(storageBytes(x.dtype));
    return std::memcmp(x.data, y.data, bytes) == 0;
}

}  // namespace

bool sameStoredValues(const HeldBox& a, const HeldBox& b) {
    // Partial sums: the same summands added in the same order are the same sum.
    if (a.count != b.count || a.more.size() != b.more.size() ||
        !sameWords(a.words, a.table, b.words, b.table, a.count)) {
        return false;
    }
    for (std::size_t s = 0; s < a.more.size(); ++s) {
        if (!sameWords(a.more[s], a.moreTables[s], b.more[s], b.moreTables[s], a.count)) {
            return false;
        }
    }
    return true;
}

ErrorAccumulator compareHeld(const MetricsBackend& backend, const HeldBox& reference,
                             std::span<const std::int64_t> offset, const HeldBox& distributed) {
    const auto& r = reference.count;
    const auto& d = distributed.count;
    const std::size_t rank = d.size();
    const std::size_t rowLength = rowLengthOf(d);
    std::vector<StoredWords> moreReference(reference.more.size());
    std::vector<StoredWords> moreDistributed(distributed.more.size());
    // The run of `rows` rows from R's row `row`, `rowStride` rows apart, and D's `dRow`.
    const auto runAt = [&](std::size_t row, std::size_t column, std::size_t rowStride,
                           std::size_t dRow, std::size_t rows) {
        StoredRun run;
        run.reference = advancedTo(reference.words, row, column);
        run.distributed = advancedTo(distributed.words, dRow, 0);
        run.rowLength = rowLength;
        run.rows = rows;
        run.reference.stride *= rowStride;
        for (std::size_t s = 0; s < moreReference.size(); ++s) {
            moreReference[s] = advancedTo(reference.more[s], row, column);
            moreReference[s].stride *= rowStride;
        }
        for (std::size_t s = 0; s < moreDistributed.size(); ++s) {
            moreDistributed[s] = advancedTo(distributed.more[s], dRow, 0);
        }
        run.moreReference = moreReference;
        run.moreDistributed = moreDistributed;
        return backend.compareStored(run);
    };
    if (rank <= 1) {
        return runAt(0, rank == 1 ? static_cast<std::size_t>(offset[0]) : 0, 1, 0, 1);
    }
    // D's rows over its leading dimensions [group, rank - 1) are equally spaced rows of R, one
    // run: from the innermost leading dimension out, a dimension D holds one index of is
    // passed over, and one it steps through joins while a step in it is a step past every
    // row joined so far (R's rows between are D's too). What is left are the groups.
    const std::size_t leading = rank - 1;
    std::vector<std::size_t> rowsInside(leading, 1);  // R's rows a step of dimension k skips
    for (std::size_t k = leading - 1; k-- > 0;) {
        rowsInside[k] = rowsInside[k + 1] * static_cast<std::size_t>(r[k + 1]);
    }
    std::size_t group = leading, groupRows = 1, rowStride = 1;
    for (std::size_t k = leading; k-- > 0;) {
        if (d[k] == 1) {
            group = k;
            continue;
        }
        if (groupRows > 1 && rowsInside[k] != rowStride * groupRows) {
            break;
        }
        if (groupRows == 1) {
            rowStride = rowsInside[k];
        }
        groupRows *= static_cast<std::size_t>(d[k]);
        group = k;
    }
    const std::size_t groups = product(std::span(d).first(group));
    const auto column = static_cast<std::size_t>(offset[rank - 1]);
    ErrorAccumulator total;
    std::vector<std::int64_t> at(group, 0);  // the group's coordinates in D, outer dimensions
    for (std::size_t g = 0; g < groups; ++g) {
        // R's row of the group's first row: its leading coordinates flattened over R's box.
        std::size_t row = 0;
        for (std::size_t k = 0; k < leading; ++k) {
            const std::int64_t coordinate = offset[k] + (k < group ? at[k] : 0);
            row += static_cast<std::size_t>(coordinate) * rowsInside[k];
        }
        const std::size_t distributedRow = g * groupRows;
        ErrorAccumulator part = runAt(row, column, rowStride, distributedRow, groupRows);
        shiftPositions(part, distributedRow * rowLength);
        total.merge(part);
        for (std::size_t k = group; k-- > 0;) {
            if (++at[k] < d[k]) {
                break;
            }
            at[k] = 0;
        }
    }
    return total;
}

}  // namespace ttrace
