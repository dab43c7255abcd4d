#include "trace/ShapeText.h"

namespace ttrace {

QString formatShape(const std::vector<std::int64_t>& shape) {
    QString text = QStringLiteral("[");
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i) {
            text += QStringLiteral(", ");
        }
        text += QString::number(shape[i]);
    }
    return text + QLatin1Char(']');
}

QString listRanks(const std::vector<int>& ranks, std::size_t limit) {
    QString text;
    for (std::size_t i = 0; i < ranks.size() && i < limit; ++i) {
        if (i) {
            text += QStringLiteral(", ");
        }
        text += QString::number(ranks[i]);
    }
    if (ranks.size() > limit) {
        text += QStringLiteral(" and %1 more").arg(ranks.size() - limit);
    }
    return text;
}

QString rankPhrase(const std::vector<int>& ranks) {
    return (ranks.size() == 1 ? QStringLiteral("rank ") : QStringLiteral("ranks ")) +
           listRanks(ranks);
}

QString counted(std::int64_t count, const QString& noun) {
    return QStringLiteral("%1 %2%3").arg(count).arg(noun,
                                                    count == 1 ? QString() : QStringLiteral("s"));
}

}  // namespace ttrace
