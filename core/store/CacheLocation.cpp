#include "store/CacheLocation.h"

#include <QDir>

namespace ttrace {

QString cacheDirectoryPath(const QString& overrideDir) {
    QString dir = overrideDir;
    if (dir.isEmpty()) {
        dir = qEnvironmentVariable("TTRACE_CACHE_DIR");
    }
    if (dir.isEmpty()) {
        // QStandardPaths would need a QCoreApplication for the application name; the CLI and
        // the tests may have none, so follow the XDG rule directly.
        const QString xdg = qEnvironmentVariable("XDG_CACHE_HOME");
        const QString base =
            QDir::isAbsolutePath(xdg) ? xdg : QDir::homePath() + QStringLiteral("/.cache");
        dir = base + QStringLiteral("/ttrace");
    }
    return QDir(dir).absolutePath();
}

QString cacheDirectory(const QString& overrideDir) {
    const QString absolute = cacheDirectoryPath(overrideDir);
    if (!QDir().mkpath(absolute)) {
        return {};
    }
    return absolute;
}

}  // namespace ttrace
