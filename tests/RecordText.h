#pragma once

#include <QStringList>
#include <vector>

#include "trace/TensorRecord.h"

namespace ttrace::test {

// Every field of a record on one line, so that two indexes compare as lists of readable lines.
inline QString recordText(const TensorRecord& r) {
    QString placements;
    for (const auto& p : r.placements) {
        placements += p.axis + QLatin1Char('=') + p.placement.toString() + QLatin1Char(' ');
    }
    const auto join = [](const auto& values) {
        QStringList parts;
        for (const auto v : values) {
            parts << QString::number(v);
        }
        return parts.join(QLatin1Char(','));
    };
    QStringList scaleParts;
    for (const double s : r.scales.scaleInv) {
        scaleParts << QString::number(s, 'g', 17);
    }
    const QString scales =
        join(r.scales.block) + QLatin1Char('/') + scaleParts.join(QLatin1Char(','));
    const QString offset = r.dataOffset ? QString::number(*r.dataOffset) : QStringLiteral("none");
    const QString stamp =
        r.fileStamp ? QStringLiteral("%1@%2").arg(r.fileStamp->size).arg(r.fileStamp->mtimeNs)
                    : QStringLiteral("none");
    return QStringLiteral(
               "rank=%1 file=%2 ds=%3 key=%4 seq=%5 layer=%6 expert=%7 dtype=%8 "
               "scale=%9 global=%10 local=%11 ranges=%12 placements=%13 coords=%14 offset=%15 "
               "stamp=%16")
        .arg(r.rank)
        .arg(r.file, r.dataset, r.key.toString())
        .arg(r.seq)
        .arg(r.layer)
        .arg(r.expert)
        .arg(dtypeName(r.dtype))
        .arg(scales)
        .arg(join(r.globalShape), join(r.localShape), r.ranges.toString(), placements,
             join(r.coords), offset, stamp);
}

inline QStringList recordTexts(const std::vector<TensorRecord>& records) {
    QStringList texts;
    for (const auto& r : records) {
        texts << recordText(r);
    }
    return texts;
}

}  // namespace ttrace::test
