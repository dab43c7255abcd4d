#pragma once

#include <QDir>
#include <QFile>
#include <QString>

namespace ttrace::test {

// Copies the files of `from` (not its subfolders) into `to`, created if needed: a trace
// folder a test may change without touching the shared fixtures.
inline bool copyFolder(const QString& from, const QString& to) {
    QDir().mkpath(to);
    const auto entries = QDir(from).entryList(QDir::Files);
    for (const auto& name : entries) {
        if (!QFile::copy(from + QLatin1Char('/') + name, to + QLatin1Char('/') + name)) {
            return false;
        }
    }
    return true;
}

}  // namespace ttrace::test
