#pragma once

#include <QJsonArray>
#include <QString>
#include <QStringView>
#include <cstdint>
#include <optional>
#include <vector>

namespace ttrace {

// DTensor placement of a tensor along one mesh axis.
struct Placement {
    enum class Type { Replicate, Shard, Partial };
    Type type = Type::Replicate;
    int dim = -1;         // Shard only
    int splitFactor = 1;  // Shard only: DTensor's _StridedShard (FSDP2 over tensor parallelism)

    // Parses "Replicate", "Shard(d)", "_StridedShard(dim=d, sf=k)" or "Partial(sum)"; nullopt
    // for anything else. Where a shard sits is the dataset's `ranges`; the placement names it.
    static std::optional<Placement> parse(QStringView text);
    // Why `text` is not a placement the checker can use, for the diagnostic.
    static QString unsupportedReason(QStringView text);
    QString toString() const;
    friend bool operator==(const Placement&, const Placement&) = default;
};

struct AxisPlacement {
    QString axis;  // mesh axis name from the manifest
    Placement placement;
    friend bool operator==(const AxisPlacement&, const AxisPlacement&) = default;
};

// Whether mesh axis `axis` is a data-parallel one by the capture's naming (trace-format.md):
// dp, fsdp, and dp_* (torchtitan's dp_replicate and dp_shard). Its ranks hold different
// samples, which a recipe quantizes each with its own scales.
[[nodiscard]] bool isDataParallelAxis(QStringView axis);

// Half-open index range [start, stop) along one dimension of the global tensor.
struct IndexRange {
    std::int64_t start = 0;
    std::int64_t stop = 0;
    std::int64_t size() const { return stop - start; }
    friend bool operator==(const IndexRange&, const IndexRange&) = default;
    friend bool operator<(const IndexRange& a, const IndexRange& b) {
        return a.start < b.start || (a.start == b.start && a.stop < b.stop);
    }
};

// Where one shard sits in the global tensor: per dimension, the global ranges that the local
// index enumerates in order (several per dimension for zig-zag or strided layouts).
struct ShardRanges {
    std::vector<std::vector<IndexRange>> dims;

    static ShardRanges whole(const std::vector<std::int64_t>& globalShape);
    // Local extent along each dimension (sum of that dimension's range sizes).
    std::vector<std::int64_t> localShape() const;
    std::int64_t elementCount() const;
    // "[0:32, 64:96][0:128]"
    QString toString() const;
    // The trace format's `ranges` JSON: one list per dimension of [start, stop) pairs, compact.
    // Caches and reports use it too; fromJson returns nullopt for malformed text.
    QString toJson() const;
    QJsonArray toJsonArray() const;
    static std::optional<ShardRanges> fromJson(const QString& text);
    friend bool operator==(const ShardRanges&, const ShardRanges&) = default;
    friend bool operator<(const ShardRanges& a, const ShardRanges& b) { return a.dims < b.dims; }
};

}  // namespace ttrace
