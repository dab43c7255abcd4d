#pragma once

#include <QJsonValue>
#include <QString>

namespace ttrace {

// "a number", "an object", ...: how a diagnostic names the type of a JSON value it did not
// expect (manifests, threshold configs).
QString jsonTypeName(const QJsonValue& value);

}  // namespace ttrace
