#include "trace/Placement.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QRegularExpression>

namespace ttrace {

bool isDataParallelAxis(QStringView axis) {
    return axis == u"dp" || axis == u"fsdp" || axis.startsWith(u"dp_");
}

std::optional<Placement> Placement::parse(QStringView text) {
    const auto trimmed = text.trimmed();
    if (trimmed == u"Replicate") {
        return Placement{Type::Replicate, -1};
    }
    if (trimmed == u"Partial(sum)" || trimmed == u"Partial") {
        return Placement{Type::Partial, -1};
    }
    static const QRegularExpression shard(QStringLiteral("^Shard\\((\\d{1,9})\\)$"));
    const auto match = shard.match(trimmed.toString());
    if (match.hasMatch()) {
        return Placement{Type::Shard, match.captured(1).toInt()};
    }
    static const QRegularExpression strided(
        QStringLiteral("^_StridedShard\\(dim=(\\d{1,9}), *(?:sf|split_factor)=(\\d{1,9})\\)$"));
    const auto stridedMatch = strided.match(trimmed.toString());
    if (stridedMatch.hasMatch() && stridedMatch.captured(2).toInt() > 0) {
        return Placement{Type::Shard, stridedMatch.captured(1).toInt(),
                         stridedMatch.captured(2).toInt()};
    }
    return std::nullopt;
}

QString Placement::unsupportedReason(QStringView text) {
    static const QRegularExpression partial(QStringLiteral("^Partial\\((\\w+)\\)$"));
    const auto match = partial.match(text.trimmed().toString());
    if (match.hasMatch()) {
        return QStringLiteral(
                   "'%1' is a reduction the checker does not support: it sums the "
                   "pieces of a Partial tensor (Partial(sum)); capture this tensor "
                   "after its reduction")
            .arg(text.trimmed());
    }
    return QStringLiteral(
               "'%1' is not Shard(d), _StridedShard(dim=d, sf=k), Replicate or "
               "Partial(sum)")
        .arg(text);
}

QString Placement::toString() const {
    switch (type) {
        case Type::Replicate:
            return QStringLiteral("Replicate");
        case Type::Shard:
            if (splitFactor != 1) {
                return QStringLiteral("_StridedShard(dim=%1, sf=%2)").arg(dim).arg(splitFactor);
            }
            return QStringLiteral("Shard(%1)").arg(dim);
        case Type::Partial:
            return QStringLiteral("Partial(sum)");
    }
    return {};
}

QString ShardRanges::toJson() const {
    return QString::fromUtf8(QJsonDocument(toJsonArray()).toJson(QJsonDocument::Compact));
}

QJsonArray ShardRanges::toJsonArray() const {
    QJsonArray array;
    for (const auto& dim : dims) {
        QJsonArray pairs;
        for (const auto& range : dim) {
            pairs.append(
                QJsonArray{static_cast<qint64>(range.start), static_cast<qint64>(range.stop)});
        }
        array.append(pairs);
    }
    return array;
}

std::optional<ShardRanges> ShardRanges::fromJson(const QString& text) {
    const QJsonDocument doc = QJsonDocument::fromJson(text.toUtf8());
    if (!doc.isArray()) {
        return std::nullopt;
    }
    ShardRanges ranges;
    for (const auto& dim : doc.array()) {
        if (!dim.isArray()) {
            return std::nullopt;
        }
        auto& out = ranges.dims.emplace_back();
        for (const auto& pair : dim.toArray()) {
            const QJsonArray bounds = pair.toArray();
            if (bounds.size() != 2) {
                return std::nullopt;
            }
            out.push_back({bounds[0].toInteger(), bounds[1].toInteger()});
        }
    }
    return ranges;
}

ShardRanges ShardRanges::whole(const std::vector<std::int64_t>& globalShape) {
    ShardRanges ranges;
    for (const auto extent : globalShape) {
        ranges.dims.push_back({IndexRange{0, extent}});
    }
    return ranges;
}

std::vector<std::int64_t> ShardRanges::localShape() const {
    std::vector<std::int64_t> shape;
    shape.reserve(dims.size());
    for (const auto& dim : dims) {
        std::int64_t extent = 0;
        for (const auto& range : dim) {
            extent += range.size();
        }
        shape.push_back(extent);
    }
    return shape;
}

std::int64_t ShardRanges::elementCount() const {
    std::int64_t count = 1;
    for (const auto extent : localShape()) {
        count *= extent;
    }
    return count;
}

QString ShardRanges::toString() const {
    QString text;
    for (const auto& dim : dims) {
        text += QLatin1Char('[');
        for (std::size_t i = 0; i < dim.size(); ++i) {
            if (i) {
                text += QStringLiteral(", ");
            }
            text += QString::number(dim[i].start) + QLatin1Char(':') + QString::number(dim[i].stop);
        }
        text += QLatin1Char(']');
    }
    return text.isEmpty() ? QStringLiteral("[]") : text;
}

}  // namespace ttrace
