#include <QSaveFile>

#include "report/ReportWriters.h"
#include "store/DiskProblem.h"

namespace ttrace {

bool writeReportFile(const QString& path, const std::function<bool(QIODevice& file)>& write,
                     QString* error) {
    const auto fail = [&](QString reason) {
        // Qt words a full disk "Unknown error" at times: the file system says what it is.
        if (const QString cause = path.isEmpty() ? QString() : diskProblem(path);
            !cause.isEmpty()) {
            reason = reason == QStringLiteral("Unknown error")
                         ? cause
                         : cause + QStringLiteral(": ") + reason;
        }
        if (error) {
            *error = QStringLiteral("Cannot write report %1: %2").arg(path, reason);
        }
        return false;
    };
    if (path.isEmpty()) {
        return fail(QStringLiteral("no path given"));
    }
    // A reader never sees half a report: the file appears complete or not at all.
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly)) {
        return fail(file.errorString());
    }
    if (!write(file)) {
        const QString reason = file.errorString();
        file.cancelWriting();
        return fail(reason);
    }
    if (!file.commit()) {
        return fail(file.errorString());
    }
    return true;
}

bool writeReportFile(const QString& path, const QByteArray& contents, QString* error) {
    return writeReportFile(
        path, [&contents](QIODevice& file) { return file.write(contents) == contents.size(); },
        error);
}

}  // namespace ttrace
