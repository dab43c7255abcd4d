#include "store/RunLock.h"

#include <QDir>

namespace ttrace {

namespace {

// How often a waiting check looks at the lock and at its cancel flag.
constexpr int kPollMilliseconds = 100;

}  // namespace

RunLock::RunLock(const QString& path) : file_(path) {
    // Held for as long as a check runs, minutes or hours: never stale by age, only when its
    // holder is gone (QLockFile checks the process).
    file_.setStaleLockTime(0);
}

RunLock::~RunLock() = default;

std::unique_ptr<RunLock> RunLock::acquire(const QString& cacheDir, const QString& fingerprint,
                                          const std::atomic<bool>* cancel,
                                          const std::function<void(const QString& holder)>& waiting,
                                          QString* error) {
    const QDir locks(QDir(cacheDir).filePath(QStringLiteral("locks")));
    if (!QDir().mkpath(locks.path())) {
        if (error) {
            *error = QStringLiteral("cannot create the lock folder %1").arg(locks.path());
        }
        return nullptr;
    }
    const QString path = locks.filePath(fingerprint + QStringLiteral(".lock"));
    std::unique_ptr<RunLock> lock(new RunLock(path));
    bool told = false;
    while (!lock->file_.tryLock(kPollMilliseconds)) {
        if (lock->file_.error() != QLockFile::LockFailedError) {
            if (error) {
                *error = QStringLiteral("cannot create the lock file %1").arg(path);
            }
            return nullptr;
        }
        if (cancel && cancel->load()) {
            return nullptr;
        }
        if (!told && waiting) {
            qint64 pid = 0;
            QString host, application;
            lock->file_.getLockInfo(&pid, &host, &application);
            waiting(QStringLiteral("pid %1 on %2").arg(pid).arg(host));
            told = true;
        }
    }
    return lock;
}

}  // namespace ttrace
