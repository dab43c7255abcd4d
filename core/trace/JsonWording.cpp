#include "trace/JsonWording.h"

#include <cmath>
#include <limits>

namespace ttrace {

QString jsonTypeName(const QJsonValue& value) {
    switch (value.type()) {
        case QJsonValue::Null:
            return QStringLiteral("null");
        case QJsonValue::Bool:
            return QStringLiteral("a boolean");
        case QJsonValue::Double:
            return QStringLiteral("a number");
        case QJsonValue::String:
            return QStringLiteral("a string");
        case QJsonValue::Array:
            return QStringLiteral("an array");
        case QJsonValue::Object:
            return QStringLiteral("an object");
        case QJsonValue::Undefined:
            break;
    }
    return QStringLiteral("undefined");
}

QString jsonNumberText(const QJsonValue& value) {
    constexpr qint64 kNotAnInteger = std::numeric_limits<qint64>::min();
    if (const qint64 exact = value.toInteger(kNotAnInteger); exact != kNotAnInteger) {
        return QString::number(exact);
    }
    const double number = value.toDouble();
    if (std::isfinite(number) && std::floor(number) == number) {
        return QString::number(number, 'f', 0);  // every digit of the double's integer
    }
    return QString::number(number, 'g', 17);
}

}  // namespace ttrace
