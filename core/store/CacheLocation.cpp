#include "store/CacheLocation.h"

#include <QDir>
#include <QFileInfo>

#include "store/DiskProblem.h"
#include "trace/TraceFolderGuard.h"

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

QString CacheLocation::why() const {
    switch (source) {
        case Source::Flag:
            return QStringLiteral("--cache-dir");
        case Source::Variable:
            return QStringLiteral("$TTRACE_CACHE_DIR");
        case Source::Default:
            return QStringLiteral("the default ($XDG_CACHE_HOME/ttrace)");
    }
    return {};
}

CacheLocation resolveCacheLocation(const QString& flagDir, bool wanted,
                                   const QStringList& traceFolders) {
    CacheLocation location;
    location.wanted = wanted;
    location.source = !flagDir.isEmpty() ? CacheLocation::Source::Flag
                      : !qEnvironmentVariable("TTRACE_CACHE_DIR").isEmpty()
                          ? CacheLocation::Source::Variable
                          : CacheLocation::Source::Default;
    location.path = cacheDirectoryPath(flagDir);
    if (!wanted) {
        return location;
    }
    for (const QString& folder : traceFolders) {
        if (!folder.isEmpty() && isInsideFolder(location.path, folder)) {
            location.insideTraceFolder = folder;
            return location;
        }
    }
    location.dir = cacheDirectory(flagDir);
    if (location.dir.isEmpty()) {
        const QFileInfo info(location.path);
        location.problem = info.exists() && !info.isDir()
                               ? QStringLiteral("it exists and is not a folder")
                               : diskProblem(location.path);
    }
    return location;
}

}  // namespace ttrace
