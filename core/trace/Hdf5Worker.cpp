#include "trace/Hdf5Worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QFile>
#include <chrono>
#include <cstring>
#include <new>

#include "trace/Hdf5WorkerProtocol.h"

extern char** environ;

namespace ttrace {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kPollMs = 50;

QString systemError() {
    return QString::fromLocal8Bit(std::strerror(errno));
}

// Moves `fd` above the standard streams and the trail's slot (3), so that the dup2 calls of
// the spawn cannot overwrite one descriptor with another. Keeps close-on-exec.
int aboveStandardSlots(int fd) {
    if (fd < 0 || fd > 3) {
        return fd;
    }
    const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 4);
    ::close(fd);
    return moved;
}

// The last non-empty line the worker wrote to stderr (glibc's "free(): invalid pointer",
// say), at most 200 characters.
QString lastLine(int fd) {
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0 || st.st_size <= 0) {
        return {};
    }
    constexpr off_t kTail = 1024;
    const off_t from = st.st_size > kTail ? st.st_size - kTail : 0;
    QByteArray tail(static_cast<qsizetype>(st.st_size - from), '\0');
    const ssize_t got = ::pread(fd, tail.data(), static_cast<std::size_t>(tail.size()), from);
    if (got <= 0) {
        return {};
    }
    tail.truncate(got);
    const auto lines = QString::fromUtf8(tail).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
        const QString line = it->trimmed();
        if (!line.isEmpty()) {
            return line.left(200);
        }
    }
    return {};
}

}  // namespace

QString WorkerFailure::toString() const {
    QString what;
    switch (kind) {
        case Kind::Crashed:
            if (signal > 0) {
                what =
                    QStringLiteral("the HDF5 library crashed (signal %1, %2%3)")
                        .arg(signal)
                        .arg(QString::fromLocal8Bit(::strsignal(signal)),
                             detail.isEmpty() ? QString() : QStringLiteral(": \"%1\"").arg(detail));
            } else {
                what =
                    QStringLiteral("the HDF5 worker exited (status %1%2) without answering")
                        .arg(exitCode)
                        .arg(detail.isEmpty() ? QString() : QStringLiteral(": \"%1\"").arg(detail));
            }
            break;
        case Kind::Stalled:
            what =
                QStringLiteral("the HDF5 library stopped responding for %1 s").arg(stalledSeconds);
            break;
        case Kind::OutOfMemory:
            what = memoryBytes > 0
                       ? QStringLiteral("the HDF5 library used more than %1 MiB of memory")
                             .arg(memoryBytes >> 20)
                       : QStringLiteral("the HDF5 library ran out of memory");
            break;
        case Kind::Cancelled:
            return QStringLiteral("cancelled");
        case Kind::Unavailable:
            return QStringLiteral("the HDF5 worker could not be used: ") + detail;
    }
    const QString where = hdf5StepText(step, dataset);
    return where.isEmpty() ? what : what + QLatin1Char(' ') + where;
}

std::unique_ptr<Hdf5Worker> Hdf5Worker::start(const QString& executable, const WorkerLimits& limits,
                                              QString* error) {
    std::unique_ptr<Hdf5Worker> worker(new Hdf5Worker);
    worker->limits_ = limits;
    int ends[2] = {-1, -1};
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) {
        *error = QStringLiteral("cannot create a socket: ") + systemError();
        return nullptr;
    }
    worker->socket_ = aboveStandardSlots(ends[0]);
    const int childEnd = aboveStandardSlots(ends[1]);
    worker->trailFd_ = aboveStandardSlots(::memfd_create("ttrace-hdf5-trail", MFD_CLOEXEC));
    worker->stderrFd_ = aboveStandardSlots(::memfd_create("ttrace-hdf5-stderr", MFD_CLOEXEC));
    if (worker->trailFd_ < 0 || worker->stderrFd_ < 0 ||
        ::ftruncate(worker->trailFd_, sizeof(TrailPage)) != 0) {
        *error = QStringLiteral("cannot create its shared page: ") + systemError();
        ::close(childEnd);
        return nullptr;
    }
    void* page =
        ::mmap(nullptr, sizeof(TrailPage), PROT_READ | PROT_WRITE, MAP_SHARED, worker->trailFd_, 0);
    if (page == MAP_FAILED) {
        *error = QStringLiteral("cannot map its shared page: ") + systemError();
        ::close(childEnd);
        return nullptr;
    }
    worker->trail_ = new (page) TrailPage;

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, childEnd, STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, childEnd, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, worker->stderrFd_, STDERR_FILENO);
    posix_spawn_file_actions_adddup2(&actions, worker->trailFd_, 3);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    // A process group of its own: Ctrl-C at the terminal goes to the parent, which decides.
    posix_spawnattr_setpgroup(&attributes, 0);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attributes, &none);
    sigset_t defaults;
    sigemptyset(&defaults);
    for (const int s : {SIGINT, SIGTERM, SIGPIPE, SIGCHLD}) {
        sigaddset(&defaults, s);
    }
    posix_spawnattr_setsigdefault(&attributes, &defaults);
    posix_spawnattr_setflags(
        &attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

    const QByteArray program = QFile::encodeName(executable);
    const QByteArray memory = QByteArray::number(static_cast<qint64>(limits.memoryBytes));
    const char* argv[] = {program.constData(), "--trail-fd",       "3",
                          "--memory-bytes",    memory.constData(), nullptr};
    pid_t pid = -1;
    const int spawned = ::posix_spawn(&pid, program.constData(), &actions, &attributes,
                                      const_cast<char* const*>(argv), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    ::close(childEnd);
    if (spawned != 0) {
        *error = QStringLiteral("cannot start %1: %2")
                     .arg(executable, QString::fromLocal8Bit(std::strerror(spawned)));
        return nullptr;
    }
    worker->pid_ = pid;
    return worker;
}

Hdf5Worker::~Hdf5Worker() {
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
    for (const int fd : {socket_, stderrFd_, trailFd_}) {
        if (fd >= 0) {
            ::close(fd);
        }
    }
    if (trail_) {
        ::munmap(trail_, sizeof(TrailPage));
    }
}

bool Hdf5Worker::stillRunning() {
    if (pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
    }
    return alive();
}

std::int64_t Hdf5Worker::residentBytes() const {
    const QByteArray path = "/proc/" + QByteArray::number(pid_) + "/statm";
    const int fd = ::open(path.constData(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    char text[128] = {};
    const ssize_t got = ::read(fd, text, sizeof text - 1);
    ::close(fd);
    if (got <= 0) {
        return 0;
    }
    const QList<QByteArray> fields = QByteArray(text, got).split(' ');
    return fields.size() > 1 ? fields[1].toLongLong() * ::sysconf(_SC_PAGESIZE) : 0;
}

WorkerFailure Hdf5Worker::stop(WorkerFailure failure) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    failure.step = static_cast<Hdf5Step>(trail_->step.load(std::memory_order_acquire));
    failure.dataset = QString::fromUtf8(
        trail_->dataset, std::min<qsizetype>(trail_->datasetBytes, sizeof trail_->dataset));
    return failure;
}

WorkerFailure Hdf5Worker::reapDead() {
    // Its socket closed because it died, or is dying: a second at most, then it is killed.
    int status = 0;
    pid_t reaped = 0;
    for (int wait = 0; reaped == 0 && wait < 20; ++wait) {
        reaped = ::waitpid(pid_, &status, WNOHANG);
        if (reaped == 0) {
            ::usleep(50000);
        }
    }
    if (reaped == 0) {
        ::kill(pid_, SIGKILL);
        reaped = ::waitpid(pid_, &status, 0);
    }
    WorkerFailure failure;
    if (reaped == pid_ && WIFSIGNALED(status)) {
        failure.signal = WTERMSIG(status);
    } else if (reaped == pid_ && WIFEXITED(status)) {
        failure.exitCode = WEXITSTATUS(status);
        if (failure.exitCode == kWorkerOutOfMemoryExit) {
            failure.kind = WorkerFailure::Kind::OutOfMemory;
        } else if (failure.exitCode == kWorkerProtocolExit) {
            failure.kind = WorkerFailure::Kind::Unavailable;
            failure.detail = QStringLiteral("it did not understand the request (another version?)");
        }
    }
    if (failure.detail.isEmpty()) {
        failure.detail = lastLine(stderrFd_);
    }
    pid_ = -1;
    failure.step = static_cast<Hdf5Step>(trail_->step.load(std::memory_order_acquire));
    failure.dataset = QString::fromUtf8(
        trail_->dataset, std::min<qsizetype>(trail_->datasetBytes, sizeof trail_->dataset));
    return failure;
}

std::variant<QByteArray, WorkerFailure> Hdf5Worker::call(const QByteArray& request,
                                                         const std::atomic<bool>* cancel) {
    if (!alive()) {
        WorkerFailure failure;
        failure.kind = WorkerFailure::Kind::Unavailable;
        failure.detail = QStringLiteral("it is not running");
        return failure;
    }
    if (!writeFrame(socket_, request)) {
        WorkerFailure failure = reapDead();
        failure.beforeRequest = true;  // it died idle (say, killed from outside)
        return failure;
    }

    std::uint64_t replyLength = 0;
    std::size_t headerGot = 0;
    QByteArray reply;
    qsizetype replyGot = 0;
    std::uint64_t beats = trail_->beats.load(std::memory_order_acquire);
    Clock::time_point progressed = Clock::now();
    Clock::time_point checked = progressed;
    for (;;) {
        pollfd ready{socket_, POLLIN, 0};
        const int polled = ::poll(&ready, 1, kPollMs);
        if (polled < 0 && errno != EINTR) {
            WorkerFailure failure;
            failure.kind = WorkerFailure::Kind::Unavailable;
            failure.detail = QStringLiteral("waiting for it failed: ") + systemError();
            return stop(failure);
        }
        if (polled > 0) {
            char* target = headerGot < sizeof replyLength
                               ? reinterpret_cast<char*>(&replyLength) + headerGot
                               : reply.data() + replyGot;
            const std::size_t wanted = headerGot < sizeof replyLength
                                           ? sizeof replyLength - headerGot
                                           : static_cast<std::size_t>(reply.size() - replyGot);
            const ssize_t got = ::recv(socket_, target, wanted, 0);
            if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) {
                return reapDead();
            }
            if (got > 0) {
                progressed = Clock::now();
                if (headerGot < sizeof replyLength) {
                    headerGot += static_cast<std::size_t>(got);
                    if (headerGot == sizeof replyLength) {
                        if (replyLength > kMaxFrameBytes) {
                            WorkerFailure failure;
                            failure.kind = WorkerFailure::Kind::Unavailable;
                            failure.detail = QStringLiteral("it sent a broken reply");
                            return stop(failure);
                        }
                        reply.resize(static_cast<qsizetype>(replyLength));
                    }
                } else {
                    replyGot += got;
                }
                if (headerGot == sizeof replyLength && replyGot == reply.size()) {
                    ++answered_;
                    return reply;
                }
            }
        }
        const auto now = Clock::now();
        if (now - checked < std::chrono::milliseconds(kPollMs)) {
            continue;
        }
        checked = now;
        if (cancel && cancel->load(std::memory_order_relaxed)) {
            WorkerFailure failure;
            failure.kind = WorkerFailure::Kind::Cancelled;
            return stop(failure);
        }
        if (const auto latest = trail_->beats.load(std::memory_order_acquire); latest != beats) {
            beats = latest;
            progressed = now;
        } else if (now - progressed >= std::chrono::seconds(limits_.stallSeconds)) {
            WorkerFailure failure;
            failure.kind = WorkerFailure::Kind::Stalled;
            failure.stalledSeconds = limits_.stallSeconds;
            return stop(failure);
        }
        if (limits_.memoryBytes > 0 && residentBytes() > limits_.memoryBytes) {
            WorkerFailure failure;
            failure.kind = WorkerFailure::Kind::OutOfMemory;
            failure.memoryBytes = limits_.memoryBytes;
            return stop(failure);
        }
    }
}

}  // namespace ttrace
