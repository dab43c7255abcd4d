#include "store/DiskProblem.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <QDir>
#include <QFileInfo>
#include <QLocale>
#include <cerrno>
#include <cstring>

namespace ttrace {

namespace {

// Below this much free space a write of a database page batch or a report fails: what "full"
// means here, whatever the file system reserves for root.
constexpr unsigned long long kFullBytes = 1ULL << 20;

}  // namespace

QString diskProblem(const QString& path) {
    // The nearest folder that exists: a cache folder that could not be created has none.
    QFileInfo info(QDir::cleanPath(QFileInfo(path).absoluteFilePath()));
    QString missing;
    while (!info.exists() && !info.isRoot() && info.absolutePath() != info.absoluteFilePath()) {
        missing = info.absoluteFilePath();
        info = QFileInfo(info.absolutePath());
    }
    if (!missing.isEmpty() && !info.isDir()) {
        return QStringLiteral("%1 is not a folder").arg(info.absoluteFilePath());
    }
    const QByteArray folder = QFile::encodeName(info.absoluteFilePath());
    struct statvfs disk {};
    if (::statvfs(folder.constData(), &disk) != 0) {
        return {};
    }
    if ((disk.f_flag & ST_RDONLY) != 0) {
        return QStringLiteral("it is on a read-only file system");
    }
    const unsigned long long available =
        static_cast<unsigned long long>(disk.f_bavail) * disk.f_frsize;
    if (available < kFullBytes) {
        return QStringLiteral("the disk holding it is full (%1 free)")
            .arg(QLocale::c().formattedDataSize(static_cast<qint64>(available)));
    }
    if (::access(folder.constData(), W_OK) != 0) {
        return QStringLiteral("it is not writable (%1)")
            .arg(QString::fromLocal8Bit(std::strerror(errno)));
    }
    return {};
}

}  // namespace ttrace
