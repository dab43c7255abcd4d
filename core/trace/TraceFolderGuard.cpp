#include "trace/TraceFolderGuard.h"

#include <QDir>
#include <QFileInfo>

namespace ttrace {

namespace {

// The canonical form of the longest existing prefix of `path`, plus the rest as written.
QString resolve(const QString& path) {
    QString existing = QDir::cleanPath(QFileInfo(path).absoluteFilePath());
    QString rest;
    while (!QFileInfo::exists(existing)) {
        const QFileInfo info(existing);
        rest = QLatin1Char('/') + info.fileName() + rest;
        const QString parent = info.absolutePath();
        if (parent == existing) {
            break;
        }
        existing = parent;
    }
    const QString canonical = QFileInfo(existing).canonicalFilePath();
    return (canonical.isEmpty() ? existing : canonical) + rest;
}

}  // namespace

bool isInsideFolder(const QString& path, const QString& folder) {
    if (path.isEmpty() || folder.isEmpty()) {
        return false;
    }
    const QString p = resolve(path);
    const QString f = resolve(folder);
    return p == f || p.startsWith(f.endsWith(QLatin1Char('/')) ? f : f + QLatin1Char('/'));
}

}  // namespace ttrace
