#pragma once

#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QString>

namespace ttrace::test {

// The JSON report at `path` without what differs between two reports of the same results:
// when it was made, how long it took and whether the results came from the cache. Empty when
// the file cannot be read.
inline QJsonObject comparableReport(const QString& path) {
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) {
        return {};
    }
    QJsonObject root = QJsonDocument::fromJson(file.readAll()).object();
    root.remove(QStringLiteral("created"));
    QJsonObject comparison = root.value(QStringLiteral("comparison")).toObject();
    comparison.remove(QStringLiteral("seconds"));
    comparison.remove(QStringLiteral("from_cache"));
    root.insert(QStringLiteral("comparison"), comparison);
    return root;
}

}  // namespace ttrace::test
