#include "compare/ElementErrorProfile.h"

#include <algorithm>
#include <cstddef>
#include <memory>

#include "compare/ComparisonJob.h"
#include "compare/ReferenceBox.h"
#include "compare/ReplicaSum.h"
#include "compare/TensorPairing.h"
#include "mapping/BlockPlan.h"
#include "mapping/CanonicalMapping.h"
#include "trace/BoxCopy.h"
#include "trace/Hdf5Reader.h"

namespace ttrace {

namespace {

// Rows and columns of the 2-D view of `shape`.
std::pair<std::int64_t, std::int64_t> viewShape(const std::vector<std::int64_t>& shape) {
    if (shape.empty()) {
        return {1, 1};
    }
    std::int64_t rows = 1;
    for (std::size_t d = 0; d + 1 < shape.size(); ++d) {
        rows *= shape[d];
    }
    return {rows, shape.back()};
}

// The rows of the 2-D view a shard covers, as half-open runs in ascending order. Runs are
// contiguous from the innermost leading dimension that is not taken whole. Stops early (and
// returns false) past `maxRuns`.
bool shardRowRuns(const ShardRanges& ranges, const std::vector<std::int64_t>& shape,
                  std::size_t maxRuns, std::vector<std::pair<std::int64_t, std::int64_t>>& runs) {
    const std::size_t leading = shape.size() - 1;
    if (leading == 0) {
        runs.emplace_back(0, 1);
        return true;
    }
    std::size_t split = leading - 1;  // the dimension whose ranges start the runs
    while (split > 0 && ranges.dims[split].size() == 1 && ranges.dims[split][0].start == 0 &&
           ranges.dims[split][0].stop == shape[split]) {
        --split;
    }
    std::int64_t runLength = 1;  // rows per index of `split`
    for (std::size_t d = split + 1; d < leading; ++d) {
        runLength *= shape[d];
    }
    std::vector<std::int64_t> prefix(split, 0);  // indices along the dimensions before split
    std::vector<std::size_t> which(split, 0);    // the range each index lies in
    for (std::size_t d = 0; d < split; ++d) {
        prefix[d] = ranges.dims[d][0].start;
    }
    while (true) {
        std::int64_t base = 0;
        for (std::size_t d = 0; d < split; ++d) {
            base = base * shape[d] + prefix[d];
        }
        for (const IndexRange& range : ranges.dims[split]) {
            if (runs.size() >= maxRuns) {
                return false;
            }
            const std::int64_t start = (base * shape[split] + range.start) * runLength;
            runs.emplace_back(start, start + range.size() * runLength);
        }
        // Next prefix, row-major, walking through every index of every range.
        std::size_t d = split;
        while (true) {
            if (d == 0) {
                return true;
            }
            --d;
            if (++prefix[d] < ranges.dims[d][which[d]].stop) {
                break;
            }
            if (++which[d] < ranges.dims[d].size()) {
                prefix[d] = ranges.dims[d][which[d]].start;
                break;
            }
            which[d] = 0;
            prefix[d] = ranges.dims[d][0].start;
        }
    }
}

ShardFootprint footprint(const Shard& shard, const std::vector<std::int64_t>& shape) {
    ShardFootprint result;
    result.ranges = shard.ranges;
    for (const Replica& replica : shard.replicas) {
        const auto ranks = replica.ranks();
        result.ranks.insert(result.ranks.end(), ranks.begin(), ranks.end());
    }
    std::sort(result.ranks.begin(), result.ranks.end());
    result.ranks.erase(std::unique(result.ranks.begin(), result.ranks.end()), result.ranks.end());
    if (shape.empty()) {
        result.rects.push_back({0, 1, 0, 1});
        return result;
    }
    const auto& columnRanges = shard.ranges.dims.back();
    std::vector<std::pair<std::int64_t, std::int64_t>> runs;
    const std::size_t maxRuns =
        ShardFootprint::kMaxRects / std::max<std::size_t>(1, columnRanges.size());
    const bool exact = shardRowRuns(shard.ranges, shape, maxRuns, runs);
    std::sort(runs.begin(), runs.end());
    std::vector<std::pair<std::int64_t, std::int64_t>> merged;
    for (const auto& run : runs) {
        if (!merged.empty() && merged.back().second == run.first) {
            merged.back().second = run.second;
        } else {
            merged.push_back(run);
        }
    }
    if (!exact) {
        // Every row between the first and the last covered one: rows grow with the first
        // leading index, whose ranges bound them.
        const auto [rows, columns] = viewShape(shape);
        const std::int64_t rowsPerFirst = rows / std::max<std::int64_t>(1, shape[0]);
        const auto& first = shard.ranges.dims[0];
        std::int64_t lo = rows, hi = 0;
        for (const IndexRange& range : first) {
            lo = std::min(lo, range.start * rowsPerFirst);
            hi = std::max(hi, range.stop * rowsPerFirst);
        }
        std::int64_t left = columns, right = 0;
        for (const IndexRange& range : columnRanges) {
            left = std::min(left, range.start);
            right = std::max(right, range.stop);
        }
        result.rects.push_back({lo, hi, left, right});
        result.bounding = true;
        return result;
    }
    for (const auto& [start, stop] : merged) {
        for (const IndexRange& range : columnRanges) {
            result.rects.push_back({start, stop, range.start, range.stop});
        }
    }
    return result;
}

// Only the records of one key: mapping and pairing then touch nothing else.
TraceSet subsetOf(const TraceSet& set, const TensorKey& key) {
    TraceSet subset;
    subset.folder = set.folder;
    subset.manifest = set.manifest;
    for (const TensorRecord& record : set.records) {
        if (record.key == key) {
            subset.records.push_back(record);
        }
    }
    return subset;
}

// Streams blocks and fills the histogram and the image.
class Profiler {
public:
    Profiler(const ComparisonTask& task, const ProfileOptions& options,
             const MetricsBackend& backend, ElementErrorProfile& out)
        : task_(task),
          shape_(task.distributed->globalShape),
          chunk_(std::max<std::int64_t>(1, options.chunkElements)),
          backend_(backend),
          reference_(std::make_unique_for_overwrite<float[]>(static_cast<std::size_t>(chunk_))),
          gathered_(backend.allocateHostBuffer(static_cast<std::size_t>(chunk_))),
          values_(backend.allocateHostBuffer(static_cast<std::size_t>(chunk_))),
          summand_(std::make_unique_for_overwrite<float[]>(static_cast<std::size_t>(chunk_))),
          preferredRanks_(options.preferredRanks),
          out_(out) {}

    std::optional<Diagnostic> run(const std::atomic<bool>* cancel, bool& cancelled) {
        const TensorBlocks blocks(shape_, chunk_);
        for (std::size_t b = 0; b < blocks.size(); ++b) {
            if (cancel && cancel->load(std::memory_order_relaxed)) {
                cancelled = true;
                return std::nullopt;
            }
            if (auto error = profileBlock(blocks.at(b))) {
                return error;
            }
        }
        return std::nullopt;
    }

private:
    // The copy held by one of the preferred ranks, else the first.
    const Replica& copyToProfile(const Shard& shard) const {
        for (const Replica& copy : shard.replicas) {
            for (const int rank : copy.ranks()) {
                if (std::find(preferredRanks_.begin(), preferredRanks_.end(), rank) !=
                    preferredRanks_.end()) {
                    return copy;
                }
            }
        }
        return shard.replicas.front();
    }

    std::optional<Diagnostic> profileBlock(const Block& block) {
        // values_ is free until the distributed pieces are read.
        std::int64_t referenceBytes = 0;
        if (auto error =
                readTrustedBox(reader_, *task_.reference, block, reference_.get(), values_.get(),
                               values_.get(), summand_.get(), referenceBytes, nullptr, nullptr)) {
            return error;
        }
        for (const Shard& shard : task_.distributed->shards) {
            if (shard.replicas.empty()) {
                continue;
            }
            for (const Block& piece : shardPiecesInBox(shard.ranges, block)) {
                std::vector<std::int64_t> offset(piece.globalStart.size());
                for (std::size_t d = 0; d < offset.size(); ++d) {
                    offset[d] = piece.globalStart[d] - block.globalStart[d];
                }
                copyBox(reinterpret_cast<const std::byte*>(reference_.get()), block.count, offset,
                        piece.count, sizeof(float), reinterpret_cast<std::byte*>(gathered_.get()));
                std::int64_t bytes = 0;
                if (auto error = readReplicaSum(reader_, copyToProfile(shard), piece, values_.get(),
                                                summand_.get(), bytes)) {
                    return error;
                }
                addPiece(piece);
            }
        }
        return std::nullopt;
    }

    // Where each run and column of the piece lies on the image, then the backend.
    void addPiece(const Block& piece) {
        const ErrorImage& image = out_.image;
        const std::size_t nd = piece.count.size();
        const std::int64_t runLength = nd == 0 ? 1 : piece.count.back();
        const std::int64_t firstColumn = nd == 0 ? 0 : piece.globalStart.back();
        const std::int64_t runs = runLength > 0 ? piece.elementCount() / runLength : 0;
        pixelRows_.resize(static_cast<std::size_t>(runs));
        pixelColumns_.resize(static_cast<std::size_t>(runLength));
        std::vector<std::int64_t> index(nd > 0 ? nd - 1 : 0, 0);  // within the piece, leading
        for (std::int64_t run = 0; run < runs; ++run) {
            std::int64_t row = 0;
            for (std::size_t d = 0; d < index.size(); ++d) {
                row = row * shape_[d] + piece.globalStart[d] + index[d];
            }
            pixelRows_[static_cast<std::size_t>(run)] = image.pixelRowOf(row);
            for (std::size_t d = index.size(); d-- > 0;) {
                if (++index[d] < piece.count[d]) {
                    break;
                }
                index[d] = 0;
            }
        }
        for (std::int64_t j = 0; j < runLength; ++j) {
            pixelColumns_[static_cast<std::size_t>(j)] = image.pixelColumnOf(firstColumn + j);
        }
        ProfilePiece profiled;
        profiled.reference = gathered_.get();
        profiled.values = values_.get();
        profiled.rowLength = static_cast<std::size_t>(runLength);
        profiled.rows = static_cast<std::size_t>(runs);
        profiled.pixelRows = pixelRows_.data();
        profiled.pixelColumns = pixelColumns_.data();
        backend_.profile(profiled, out_.histogram, out_.image);
    }

    const ComparisonTask& task_;
    const std::vector<std::int64_t>& shape_;
    const std::int64_t chunk_;
    Hdf5Reader reader_;
    const MetricsBackend& backend_;
    std::unique_ptr<float[]> reference_;
    HostBuffer gathered_, values_;  // what the backend profiles
    std::unique_ptr<float[]> summand_;
    std::vector<int> pixelRows_, pixelColumns_;
    std::vector<int> preferredRanks_;
    ElementErrorProfile& out_;
};

}  // namespace

ProfileOutcome profileElementErrors(const TraceSet& distributed, const TraceSet& reference,
                                    const TensorKey& key, const ProfileOptions& options) {
    ProfileOutcome outcome;
    const TraceCatalog dist = TraceCatalog::of(subsetOf(distributed, key));
    const TraceCatalog ref = TraceCatalog::of(subsetOf(reference, key));
    const ComparisonPlan plan = planComparison(dist, ref, nullptr);
    outcome.diagnostics = plan.diagnostics;
    std::unique_ptr<LoadedTask> loaded;
    if (!plan.tasks.empty()) {
        loaded = loadTask(plan, 0);
        outcome.diagnostics.insert(outcome.diagnostics.end(), loaded->problems.begin(),
                                   loaded->problems.end());
    }
    if (!loaded || !loaded->ready()) {
        Diagnostic missing;
        missing.file = distributed.folder;
        missing.tensor = key.toString();
        missing.message = QStringLiteral(
            "the tensor cannot be profiled: it is not in both runs or does not assemble");
        outcome.diagnostics.push_back(missing);
        return outcome;
    }
    const ComparisonTask& task = loaded->task;

    ElementErrorProfile profile;
    profile.key = key;
    profile.globalShape = task.distributed->globalShape;
    ErrorImage& image = profile.image;
    std::tie(image.rows, image.columns) = viewShape(profile.globalShape);
    image.height =
        static_cast<int>(std::min<std::int64_t>(std::max(1, options.maxHeight), image.rows));
    image.width =
        static_cast<int>(std::min<std::int64_t>(std::max(1, options.maxWidth), image.columns));
    image.maxError.assign(
        static_cast<std::size_t>(image.height) * static_cast<std::size_t>(image.width), 0.0F);
    for (const Shard& shard : task.distributed->shards) {
        profile.shards.push_back(footprint(shard, profile.globalShape));
    }
    const auto& referenceShards = task.reference->shards;
    const bool cutAlike =
        std::equal(referenceShards.begin(), referenceShards.end(), task.distributed->shards.begin(),
                   task.distributed->shards.end(),
                   [](const Shard& a, const Shard& b) { return a.ranges == b.ranges; });
    if (referenceShards.size() > 1 && !cutAlike) {
        for (const Shard& shard : referenceShards) {
            profile.referenceShards.push_back(footprint(shard, profile.globalShape));
        }
    }

    std::unique_ptr<MetricsBackend> cpuBackend;
    const MetricsBackend* backend = options.backend;
    if (!backend) {
        cpuBackend = makeCpuBackend();
        backend = cpuBackend.get();
    }
    Profiler profiler(task, options, *backend, profile);
    auto error = profiler.run(options.cancel, outcome.cancelled);
    if (error) {
        if (error->tensor.isEmpty()) {
            error->tensor = key.toString();
        }
        outcome.diagnostics.push_back(*error);
        return outcome;
    }
    if (!outcome.cancelled) {
        outcome.profile = std::move(profile);
    }
    return outcome;
}

}  // namespace ttrace
