#include "trace/IsolatedHdf5.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "trace/FileStamp.h"
#include "trace/StoredBox.h"

namespace ttrace {

namespace {

// The workers of this process, idle between requests, and the files a worker failed on.
class WorkerPool {
public:
    void configure(const std::optional<Hdf5Isolation>& isolation) {
        const std::lock_guard lock(mutex_);
        isolation_ = isolation;
        idle_.clear();
        failed_.clear();
    }

    bool on() {
        const std::lock_guard lock(mutex_);
        return isolation_.has_value();
    }

    // An idle worker, or a new one.
    std::unique_ptr<Hdf5Worker> acquire(QString* error) {
        {
            const std::lock_guard lock(mutex_);
            while (!idle_.empty()) {
                auto worker = std::move(idle_.back());
                idle_.pop_back();
                if (worker->stillRunning()) {
                    return worker;
                }
            }
        }
        return start(error);
    }

    // A new worker, which has read nothing yet.
    std::unique_ptr<Hdf5Worker> start(QString* error) {
        Hdf5Isolation isolation;
        {
            const std::lock_guard lock(mutex_);
            if (!isolation_) {  // turned off meanwhile
                *error = QStringLiteral("isolation is off");
                return nullptr;
            }
            isolation = *isolation_;
        }
        return Hdf5Worker::start(isolation.workerPath, isolation.limits, error);
    }

    void release(std::unique_ptr<Hdf5Worker> worker) {
        const std::lock_guard lock(mutex_);
        // As many as threads ever read at once are kept; a few more start in milliseconds.
        if (worker->alive() &&
            idle_.size() < 2 * std::max(1u, std::thread::hardware_concurrency())) {
            idle_.push_back(std::move(worker));
        }
    }

    std::optional<QString> failedBefore(const QString& path) {
        const auto stamp = fileStamp(path);
        const std::lock_guard lock(mutex_);
        const auto it = failed_.find(path);
        if (it == failed_.end() || !stamp || it->second.stamp.size != stamp->size ||
            it->second.stamp.mtimeNs != stamp->mtimeNs) {
            return std::nullopt;
        }
        return it->second.message;
    }

    void rememberFailure(const QString& path, const QString& message) {
        const auto stamp = fileStamp(path);
        if (!stamp) {
            return;
        }
        const std::lock_guard lock(mutex_);
        failed_.try_emplace(path, Failed{*stamp, message});
    }

private:
    struct Failed {
        FileStamp stamp;
        QString message;
    };
    std::mutex mutex_;
    std::optional<Hdf5Isolation> isolation_;
    std::vector<std::unique_ptr<Hdf5Worker>> idle_;
    std::map<QString, Failed> failed_;
};

WorkerPool& pool() {
    static WorkerPool workers;
    return workers;
}

// A worker's answer to a request, and the worker that gave it, which the caller hands back.
struct Answer {
    std::variant<QByteArray, WorkerFailure> reply;
    std::unique_ptr<Hdf5Worker> worker;  // null after a failure
};

Answer ask(const WorkerRequest& request, const std::atomic<bool>* cancel) {
    const QByteArray bytes = encodeRequest(request);
    bool fresh = false;
    for (int attempt = 0;; ++attempt) {
        QString error;
        auto worker = fresh ? pool().start(&error) : pool().acquire(&error);
        if (!worker) {
            WorkerFailure failure;
            failure.kind = WorkerFailure::Kind::Unavailable;
            failure.detail = error;
            return {failure, nullptr};
        }
        const bool answeredBefore = worker->answered() > 0;
        auto reply = worker->call(bytes, cancel);
        const auto* failure = std::get_if<WorkerFailure>(&reply);
        if (!failure) {
            return {std::move(reply), std::move(worker)};
        }
        // Two failures say nothing sure about this request, which a fresh worker is asked
        // once more: an idle worker that dies as it is handed the request (killed from
        // outside), and a crash in a worker that answered others before, whose memory an
        // earlier corrupt file may have damaged (libhdf5 then trips on it in a sound one).
        const bool maybeEarlier = failure->beforeRequest ||
                                  (failure->kind == WorkerFailure::Kind::Crashed && answeredBefore);
        if (!maybeEarlier || attempt == 1) {
            return {std::move(reply), nullptr};
        }
        fresh = true;
    }
}

// Hands `worker` back for the next request, unless its request found the file damaged:
// libhdf5's error paths are where a corrupt file damages the library's memory, which could
// crash the worker later, on a sound file that would then be blamed.
void handBack(std::unique_ptr<Hdf5Worker> worker, bool foundDamage) {
    if (worker && !foundDamage) {
        pool().release(std::move(worker));
    }
}

// A limit from the environment, or `fallback` with a warning when it is set but not a whole
// number in [least, most].
std::int64_t limitFromEnvironment(const char* name, std::int64_t fallback, std::int64_t least,
                                  std::int64_t most, QStringList& warnings) {
    if (!qEnvironmentVariableIsSet(name)) {
        return fallback;
    }
    const QString text = qEnvironmentVariable(name);
    bool ok = false;
    const std::int64_t value = text.toLongLong(&ok);
    if (!ok || value < least || value > most) {
        warnings << QStringLiteral("%1 is '%2', not a whole number from %3 to %4: %5 is used")
                        .arg(QLatin1String(name), text)
                        .arg(least)
                        .arg(most)
                        .arg(fallback);
        return fallback;
    }
    return value;
}

std::optional<QString> findWorker(QString* error) {
    const QString name = QStringLiteral("ttrace-hdf5-worker");
    if (qEnvironmentVariableIsSet("TTRACE_HDF5_WORKER")) {
        const QString path = qEnvironmentVariable("TTRACE_HDF5_WORKER");
        if (QFileInfo(path).isExecutable() && QFileInfo(path).isFile()) {
            return QFileInfo(path).absoluteFilePath();
        }
        *error = QStringLiteral("TTRACE_HDF5_WORKER names %1, which is not an executable file")
                     .arg(path);
        return std::nullopt;
    }
    const QDir programs(QCoreApplication::applicationDirPath());
    const QStringList candidates{programs.filePath(name),
                                 programs.filePath(QStringLiteral("../libexec/ttrace/") + name)};
    for (const auto& candidate : candidates) {
        if (QFileInfo(candidate).isExecutable() && QFileInfo(candidate).isFile()) {
            return QDir::cleanPath(QFileInfo(candidate).absoluteFilePath());
        }
    }
    *error = QStringLiteral("%1 was found neither beside %2 nor in %3")
                 .arg(name, QCoreApplication::applicationFilePath(),
                      QDir::cleanPath(programs.filePath(QStringLiteral("../libexec/ttrace"))));
    return std::nullopt;
}

}  // namespace

void isolateHdf5(const std::optional<Hdf5Isolation>& isolation) {
    pool().configure(isolation);
}

bool hdf5Isolated() {
    return pool().on();
}

std::optional<QString> isolateHdf5ForThisProgram() {
    QString error;
    const auto worker = findWorker(&error);
    if (!worker) {
        return error + QStringLiteral(
                           ": rank files are read in this process, where a corrupt "
                           "one can crash it");
    }
    QStringList warnings;
    Hdf5Isolation isolation;
    isolation.workerPath = *worker;
    isolation.limits.stallSeconds = static_cast<int>(limitFromEnvironment(
        "TTRACE_HDF5_STALL_SECONDS", isolation.limits.stallSeconds, 1, 86400, warnings));
    isolation.limits.memoryBytes =
        limitFromEnvironment("TTRACE_HDF5_MEMORY_MB", isolation.limits.memoryBytes >> 20, 64,
                             std::int64_t{1} << 30, warnings)
        << 20;
    isolateHdf5(isolation);
    if (!warnings.isEmpty()) {
        return warnings.join(QStringLiteral("; "));
    }
    return std::nullopt;
}

RankFileIndex indexRankFileIsolated(const QString& path, const std::atomic<bool>* cancel) {
    if (!hdf5Isolated()) {
        return indexRankFile(path, cancel);
    }
    auto [reply, worker] = ask(IndexRequest{path}, cancel);
    if (const auto* bytes = std::get_if<QByteArray>(&reply)) {
        if (auto index = decodeIndexReply(*bytes, path)) {
            handBack(std::move(worker),
                     std::ranges::any_of(index->diagnostics, [](const Diagnostic& d) {
                         return d.severity == Severity::Error;
                     }));
            return std::move(*index);
        }
    }
    RankFileIndex index;
    const auto* failure = std::get_if<WorkerFailure>(&reply);
    if (failure && failure->kind == WorkerFailure::Kind::Cancelled) {
        index.cancelled = true;
        return index;
    }
    Diagnostic d = fileDiagnostic(Severity::Error, path, {});
    if (!failure) {
        d.message = QStringLiteral(
            "cannot be indexed: the HDF5 worker sent a reply that does "
            "not decode");
    } else if (failure->kind == WorkerFailure::Kind::Unavailable ||
               (failure->kind == WorkerFailure::Kind::Crashed && failure->signal == 0)) {
        // The worker itself failed, not the library on this file.
        d.message = QStringLiteral("cannot be indexed: ") + failure->toString();
    } else {
        const bool stalled = failure->kind == WorkerFailure::Kind::Stalled;
        d.message = (stalled ? QStringLiteral("cannot be read (a corrupt file, or a file system "
                                              "that does not answer): ")
                             : QStringLiteral("is corrupt: ")) +
                    failure->toString() + QStringLiteral("; none of its tensors is read");
    }
    index.diagnostics.push_back(std::move(d));
    return index;
}

std::optional<QString> readStoredIsolated(const ReadRequest& request, std::uint8_t* target,
                                          const std::atomic<bool>* cancel) {
    if (auto earlier = pool().failedBefore(request.file)) {
        return QStringLiteral("not read: an earlier read of this file failed: ") + *earlier;
    }
    auto [reply, worker] = ask(request, cancel);
    if (const auto* failure = std::get_if<WorkerFailure>(&reply)) {
        const QString message = failure->toString();
        if (failure->kind != WorkerFailure::Kind::Cancelled &&
            failure->kind != WorkerFailure::Kind::Unavailable) {
            pool().rememberFailure(request.file, message);
            return QStringLiteral("the file is corrupt: ") + message;
        }
        return message;
    }
    const auto decoded = decodeReadReply(std::get<QByteArray>(reply));
    handBack(std::move(worker), !decoded || decoded->problem);
    if (!decoded) {
        return QStringLiteral("the HDF5 worker sent a reply that does not decode");
    }
    if (decoded->problem) {
        return *decoded->problem;
    }
    const std::size_t expected =
        storedBox(request.dtype, request.localShape, request.start, request.count).words() *
        static_cast<std::size_t>(storageBytes(request.dtype));
    if (static_cast<std::size_t>(decoded->words.size()) != expected) {
        return QStringLiteral("the HDF5 worker sent %1 bytes for a box of %2")
            .arg(decoded->words.size())
            .arg(expected);
    }
    std::memcpy(target, decoded->words.constData(), expected);
    return std::nullopt;
}

}  // namespace ttrace
