#pragma once

#include <QLockFile>
#include <QString>
#include <atomic>
#include <functional>
#include <memory>

namespace ttrace {

// One check of a run at a time in a cache directory. The check that looks up, computes and
// stores a run's results, and writes its reports from them, holds the run's lock; another
// check of the same run (a second ttrace-check, the GUI beside a CLI) waits for it and then
// finds the results stored, instead of replacing them under the first one's reports. The lock
// is a file under cacheDir/locks that the system releases when its holder exits or dies.
class RunLock {
public:
    ~RunLock();
    RunLock(const RunLock&) = delete;
    RunLock& operator=(const RunLock&) = delete;

    // Takes the lock of `fingerprint`, waiting while another process holds it; `waiting` is
    // called once, with who holds it ("pid 1234 on host"), when there is a wait. Null when
    // `cancel` was set while waiting (`error` empty) or the lock file cannot be made
    // (`error` says why).
    [[nodiscard]] static std::unique_ptr<RunLock> acquire(
        const QString& cacheDir, const QString& fingerprint, const std::atomic<bool>* cancel,
        const std::function<void(const QString& holder)>& waiting, QString* error);

private:
    explicit RunLock(const QString& path);
    QLockFile file_;
};

}  // namespace ttrace
