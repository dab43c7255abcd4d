#pragma once

#include <QJsonValue>
#include <QString>

namespace ttrace {

// "a number", "an object", ...: how a diagnostic names the type of a JSON value it did not
// expect (manifests, threshold configs).
QString jsonTypeName(const QJsonValue& value);
// A JSON number as the file most likely wrote it: integers exactly (past 2^53 too, as far as
// a double holds them: 2^63 is "9223372036854775808"), fractions to 17 digits.
QString jsonNumberText(const QJsonValue& value);

}  // namespace ttrace
