#include "mapping/CanonicalMapping.h"

#include <QStringList>
#include <algorithm>
#include <map>
#include <utility>

#include "mapping/TilingCheck.h"
#include "trace/ShapeText.h"

namespace ttrace {

namespace {

using Pieces = std::vector<const TensorRecord*>;

Diagnostic errorAt(const TensorRecord& record, const QString& message) {
    Diagnostic diagnostic;
    diagnostic.severity = Severity::Error;
    diagnostic.file = record.file;
    diagnostic.dataset = record.dataset;
    diagnostic.tensor = record.key.toString();
    diagnostic.message = message;
    return diagnostic;
}

// "twice", "3 times"
QString timesWord(std::size_t n) {
    return n == 2 ? QStringLiteral("twice") : QStringLiteral("%1 times").arg(n);
}

// A rank writes each logical tensor once: two datasets of one key in one rank file are not
// shards or replicas (those come from different ranks) but the same tensor captured again,
// most often a forward recomputed under activation checkpointing. Said here, for the
// distributed run and the references alike, rather than kept as a replica or dropped.
void checkOncePerRank(const Pieces& pieces, Diagnostics& errors) {
    Pieces byRank = pieces;
    std::stable_sort(
        byRank.begin(), byRank.end(),
        [](const TensorRecord* a, const TensorRecord* b) { return a->rank < b->rank; });
    for (auto begin = byRank.begin(); begin != byRank.end();) {
        const auto end = std::find_if(begin, byRank.end(), [begin](const TensorRecord* piece) {
            return piece->rank != (*begin)->rank;
        });
        const auto count = static_cast<std::size_t>(end - begin);
        if (count > 1) {
            QStringList datasets;
            for (auto it = begin; it != end; ++it) {
                datasets << (*it)->dataset;
            }
            const QString listed =
                count == 2 ? datasets.join(QStringLiteral(" and "))
                           : datasets.mid(0, datasets.size() - 1).join(QStringLiteral(", ")) +
                                 QStringLiteral(" and ") + datasets.back();
            errors.push_back(errorAt(
                **(begin + 1),
                QStringLiteral("rank %1 holds this tensor %2 (datasets %3): each rank writes "
                               "a tensor once; was a forward recomputed under activation "
                               "checkpointing captured again?")
                    .arg(QString::number((*begin)->rank), timesWord(count), listed)));
        }
        begin = end;
    }
}

// Every piece must describe the same global tensor and place itself inside it.
void checkPieces(const Pieces& pieces, Diagnostics& errors) {
    checkOncePerRank(pieces, errors);
    const auto& first = *pieces.front();
    for (const auto* piece : pieces) {
        if (piece->globalShape != first.globalShape) {
            errors.push_back(errorAt(*piece, QStringLiteral("shards disagree on global shape: %1 "
                                                            "on rank %2, %3 on rank %4")
                                                 .arg(formatShape(first.globalShape))
                                                 .arg(first.rank)
                                                 .arg(formatShape(piece->globalShape))
                                                 .arg(piece->rank)));
            continue;
        }
        if (piece->dtype != first.dtype) {
            errors.push_back(errorAt(
                *piece, QStringLiteral("shards disagree on dtype: %1 on rank %2, %3 on rank %4")
                            .arg(dtypeName(first.dtype))
                            .arg(first.rank)
                            .arg(dtypeName(piece->dtype))
                            .arg(piece->rank)));
        }
        const auto& shape = piece->globalShape;
        if (piece->ranges.dims.size() != shape.size()) {
            errors.push_back(errorAt(
                *piece, QStringLiteral("ranges %1 have %2, global shape %3 has %4")
                            .arg(piece->ranges.toString(),
                                 counted(static_cast<std::int64_t>(piece->ranges.dims.size()),
                                         QStringLiteral("dimension")),
                                 formatShape(shape))
                            .arg(shape.size())));
            continue;
        }
        bool inside = true;
        for (std::size_t d = 0; d < shape.size(); ++d) {
            for (const auto& range : piece->ranges.dims[d]) {
                inside = inside && range.start >= 0 && range.start <= range.stop &&
                         range.stop <= shape[d];
            }
        }
        if (!inside) {
            errors.push_back(
                errorAt(*piece, QStringLiteral("ranges %1 fall outside the global shape %2")
                                    .arg(piece->ranges.toString(), formatShape(shape))));
            continue;
        }
        if (piece->localShape != piece->ranges.localShape()) {
            errors.push_back(errorAt(
                *piece, QStringLiteral("local shape %1 does not match ranges %2 (which hold %3)")
                            .arg(formatShape(piece->localShape), piece->ranges.toString(),
                                 formatShape(piece->ranges.localShape()))));
        }
    }
}

// Mesh axes (indices into the manifest mesh) along which `piece` is Partial(sum).
std::vector<std::size_t> partialAxes(const TensorRecord& piece, const Manifest& manifest,
                                     Diagnostics& errors) {
    std::vector<std::size_t> axes;
    for (const auto& placement : piece.placements) {
        if (placement.placement.type != Placement::Type::Partial) {
            continue;
        }
        const auto it =
            std::find(manifest.meshAxes.begin(), manifest.meshAxes.end(), placement.axis);
        const auto axis = static_cast<std::size_t>(it - manifest.meshAxes.begin());
        if (it == manifest.meshAxes.end() || axis >= piece.coords.size() ||
            axis >= manifest.meshShape.size()) {
            errors.push_back(errorAt(
                piece, QStringLiteral("Partial(sum) on mesh axis '%1', which the manifest's "
                                      "mesh or this rank's coordinates do not have")
                           .arg(placement.axis)));
            continue;
        }
        axes.push_back(axis);
    }
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    return axes;
}

// Splits the pieces of one shard into replicas: pieces that differ only in their coordinates
// on Partial(sum) axes are the summands of one replica; any other piece is a replica alone.
std::vector<Replica> buildReplicas(const Pieces& pieces, const Manifest& manifest,
                                   Diagnostics& errors) {
    // (partial axes, coordinates with those axes masked) -> summands
    std::map<std::pair<std::vector<std::size_t>, std::vector<int>>, Pieces> groups;
    std::vector<Replica> replicas;
    for (const auto* piece : pieces) {
        auto axes = partialAxes(*piece, manifest, errors);
        if (axes.empty()) {
            replicas.push_back(Replica{{piece}});
            continue;
        }
        auto masked = piece->coords;
        for (const auto axis : axes) {
            masked[axis] = -1;
        }
        groups[{std::move(axes), std::move(masked)}].push_back(piece);
    }
    for (auto& [group, summands] : groups) {
        std::sort(summands.begin(), summands.end(),
                  [](const TensorRecord* a, const TensorRecord* b) { return a->rank < b->rank; });
        std::int64_t expected = 1;
        QString axisNames;
        for (const auto axis : group.first) {
            expected *= manifest.meshShape[axis];
            axisNames +=
                (axisNames.isEmpty() ? QString() : QStringLiteral(", ")) + manifest.meshAxes[axis];
        }
        // Each summand must sit at a different coordinate on the partial axes.
        std::vector<std::vector<int>> seen;
        for (const auto* summand : summands) {
            std::vector<int> at;
            for (const auto axis : group.first) {
                at.push_back(summand->coords[axis]);
            }
            seen.push_back(std::move(at));
        }
        std::sort(seen.begin(), seen.end());
        const bool distinct = std::adjacent_find(seen.begin(), seen.end()) == seen.end();
        if (!distinct || static_cast<std::int64_t>(summands.size()) != expected) {
            std::vector<int> ranks;
            for (const auto* summand : summands) {
                ranks.push_back(summand->rank);
            }
            errors.push_back(errorAt(
                *summands.front(),
                QStringLiteral("Partial(sum) over mesh axis %1 is incomplete: %2 on %3, the mesh "
                               "needs %4 distinct ones")
                    .arg(axisNames,
                         counted(static_cast<std::int64_t>(summands.size()),
                                 QStringLiteral("summand")),
                         rankPhrase(ranks))
                    .arg(expected)));
            continue;
        }
        replicas.push_back(Replica{std::move(summands)});
    }
    std::sort(replicas.begin(), replicas.end(), [](const Replica& a, const Replica& b) {
        return a.summands.front()->rank < b.summands.front()->rank;
    });
    return replicas;
}

// Assembles one logical tensor from its pieces, or explains in `errors` why it cannot.
std::optional<LogicalTensor> assemble(const TensorKey& key, const Pieces& pieces,
                                      const Manifest& manifest, Diagnostics& errors) {
    checkPieces(pieces, errors);
    if (!errors.empty()) {
        return std::nullopt;
    }
    // A rank whose shard is empty (DTensor's torch.chunk gives the last ranks nothing when a
    // dimension is shorter than the mesh axis) holds no part of the tensor.
    const bool anyElements = std::any_of(pieces.begin(), pieces.end(), [](const auto* piece) {
        return piece->ranges.elementCount() > 0;
    });
    std::map<ShardRanges, Pieces> byRanges;
    for (const auto* piece : pieces) {
        if (piece->ranges.elementCount() > 0 || !anyElements) {
            byRanges[piece->ranges].push_back(piece);
        }
    }
    LogicalTensor tensor;
    tensor.key = key;
    tensor.globalShape = pieces.front()->globalShape;
    tensor.dtype = pieces.front()->dtype;
    tensor.layer = pieces.front()->layer;
    tensor.expert = pieces.front()->expert;
    for (const auto& [ranges, shardPieces] : byRanges) {
        Shard shard;
        shard.ranges = ranges;
        shard.replicas = buildReplicas(shardPieces, manifest, errors);
        tensor.shards.push_back(std::move(shard));
    }
    if (!errors.empty()) {
        return std::nullopt;
    }
    std::vector<TilingShard> tiling;
    for (const auto& shard : tensor.shards) {
        TilingShard entry;
        entry.ranges = &shard.ranges;
        for (const auto& replica : shard.replicas) {
            const auto ranks = replica.ranks();
            entry.ranks.insert(entry.ranks.end(), ranks.begin(), ranks.end());
        }
        std::sort(entry.ranks.begin(), entry.ranks.end());
        entry.record = shard.replicas.front().summands.front();
        tiling.push_back(std::move(entry));
    }
    for (const auto& problem : checkTiling(tensor.globalShape, tiling)) {
        errors.push_back(
            errorAt(problem.record ? *problem.record : *pieces.front(), problem.message));
    }
    if (!errors.empty()) {
        return std::nullopt;
    }
    return tensor;
}

}  // namespace

MappingResult buildLogicalTensors(const Manifest& manifest,
                                  const std::vector<TensorRecord>& records) {
    std::map<TensorKey, Pieces> byKey;
    for (const auto& record : records) {
        byKey[record.key].push_back(&record);
    }
    MappingResult result;
    for (const auto& [key, pieces] : byKey) {
        Diagnostics errors;
        auto tensor = assemble(key, pieces, manifest, errors);
        if (tensor) {
            result.tensors.push_back(std::move(*tensor));
        } else {
            result.refused.push_back(key);
        }
        result.diagnostics.insert(result.diagnostics.end(), errors.begin(), errors.end());
    }
    return result;
}

MappingResult buildLogicalTensors(const TraceSet& traceSet) {
    return buildLogicalTensors(traceSet.manifest, traceSet.records);
}

}  // namespace ttrace
