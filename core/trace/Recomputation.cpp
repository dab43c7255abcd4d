#include "trace/Recomputation.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStringList>
#include <limits>

#include "trace/JsonWording.h"
#include "trace/ShapeText.h"

namespace ttrace {

namespace {

// A JSON number that is a whole count, in range: nullopt for anything else.
std::optional<std::int64_t> count(const QJsonValue& value) {
    if (!value.isDouble()) {
        return std::nullopt;
    }
    const double number = value.toDouble();
    if (number < 0 || number > 9.0e15 ||
        number != static_cast<double>(static_cast<std::int64_t>(number))) {
        return std::nullopt;
    }
    return static_cast<std::int64_t>(number);
}

std::optional<int> integer(const QJsonValue& value, int lowest) {
    if (!value.isDouble()) {
        return std::nullopt;
    }
    const double number = value.toDouble();
    if (number < lowest || number > std::numeric_limits<int>::max() ||
        number != static_cast<double>(static_cast<int>(number))) {
        return std::nullopt;
    }
    return static_cast<int>(number);
}

// One entry of `differing`, or nullopt and `problem`.
std::optional<std::pair<TensorKey, RecomputationDifference>> entry(const QJsonValue& value,
                                                                   QString* problem) {
    if (!value.isObject()) {
        *problem = QStringLiteral("is %1, not an object").arg(jsonTypeName(value));
        return std::nullopt;
    }
    const QJsonObject object = value.toObject();
    TensorKey key;
    RecomputationDifference difference;
    const auto kind = tensorKindFromName(object.value(QStringLiteral("kind")).toString());
    const auto index = integer(object.value(QStringLiteral("index")), 0);
    const auto iteration = integer(object.value(QStringLiteral("iteration")), 0);
    const auto microBatch = integer(object.value(QStringLiteral("micro_batch")), 0);
    const auto differing = count(object.value(QStringLiteral("elements_differing")));
    const auto elements = count(object.value(QStringLiteral("elements")));
    const QJsonValue scales = object.value(QStringLiteral("scales_differ"));
    key.name = object.value(QStringLiteral("name")).toString();
    if (key.name.isEmpty() || !kind ||
        (*kind != TensorKind::ForwardInput && *kind != TensorKind::ForwardOutput)) {
        *problem = QStringLiteral(
            "must name a forward tensor ('name', and 'kind' "
            "forward_input or forward_output)");
        return std::nullopt;
    }
    if (!index || !iteration || !microBatch) {
        *problem = QStringLiteral(
            "must give 'index', 'iteration' and 'micro_batch' as "
            "non-negative integers");
        return std::nullopt;
    }
    if (!differing || !elements || *differing > *elements || !scales.isBool()) {
        *problem = QStringLiteral(
            "must give 'elements_differing' of 'elements' as counts, and "
            "'scales_differ' as true or false");
        return std::nullopt;
    }
    key.kind = *kind;
    key.index = *index;
    key.iteration = *iteration;
    key.microBatch = *microBatch;
    difference.elementsDiffering = *differing;
    difference.elements = *elements;
    difference.scalesDiffer = scales.toBool();
    return std::pair{key, difference};
}

}  // namespace

std::optional<Recomputations> parseRecomputations(const QByteArray& json, QString* problem) {
    QJsonParseError parseError;
    const auto document = QJsonDocument::fromJson(json, &parseError);
    if (parseError.error != QJsonParseError::NoError) {
        *problem = QStringLiteral("is not valid JSON: %1 at offset %2")
                       .arg(parseError.errorString(), QString::number(parseError.offset));
        return std::nullopt;
    }
    const QJsonObject object = document.object();
    const auto compared = count(object.value(QStringLiteral("compared")));
    const QJsonValue differing = object.value(QStringLiteral("differing"));
    if (!document.isObject() || !compared || !differing.isArray()) {
        *problem =
            QStringLiteral("must be an object with 'compared' (a count) and 'differing' (a list)");
        return std::nullopt;
    }
    Recomputations recomputations;
    recomputations.compared = *compared;
    const QJsonArray entries = differing.toArray();
    for (qsizetype i = 0; i < entries.size(); ++i) {
        QString entryProblem;
        auto parsed = entry(entries.at(i), &entryProblem);
        if (!parsed) {
            *problem = QStringLiteral("'differing' entry %1 %2").arg(i).arg(entryProblem);
            return std::nullopt;
        }
        recomputations.differing.push_back(std::move(*parsed));
    }
    return recomputations;
}

QString describeDifference(const RecomputationDifference& difference) {
    QString text = QStringLiteral("%1 of %2")
                       .arg(difference.elementsDiffering)
                       .arg(counted(difference.elements, QStringLiteral("element")));
    if (difference.scalesDiffer) {
        text += QStringLiteral(", and in its quantization scales");
    }
    return text;
}

QString differenceText(const RecomputationDifference& difference) {
    return QStringLiteral("%1 %2 %3")
        .arg(difference.elementsDiffering)
        .arg(difference.elements)
        .arg(difference.scalesDiffer ? 1 : 0);
}

std::optional<RecomputationDifference> differenceFromText(const QString& text) {
    const QStringList parts = text.split(QLatin1Char(' '));
    if (parts.size() != 3) {
        return std::nullopt;
    }
    bool ok[3] = {};
    RecomputationDifference difference;
    difference.elementsDiffering = parts[0].toLongLong(&ok[0]);
    difference.elements = parts[1].toLongLong(&ok[1]);
    const int scales = parts[2].toInt(&ok[2]);
    if (!ok[0] || !ok[1] || !ok[2] || (scales != 0 && scales != 1)) {
        return std::nullopt;
    }
    difference.scalesDiffer = scales == 1;
    return difference;
}

}  // namespace ttrace
