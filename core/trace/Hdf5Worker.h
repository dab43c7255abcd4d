#pragma once

#include <QByteArray>
#include <QString>
#include <atomic>
#include <cstdint>
#include <memory>
#include <variant>

#include "trace/Hdf5Step.h"

namespace ttrace {

struct TrailPage;

// What a worker may spend on one step before its parent stops it.
struct WorkerLimits {
    int stallSeconds = 20;                             // with no new step
    std::int64_t memoryBytes = std::int64_t{4} << 30;  // resident
};

// Why a request got no answer. The worker is gone afterwards.
struct WorkerFailure {
    enum class Kind {
        Crashed,      // killed by a signal, or exited without answering
        Stalled,      // no new step within the limit: stopped
        OutOfMemory,  // over the memory limit, or an allocation failed: stopped
        Cancelled,    // the caller's cancel flag was set: stopped
        Unavailable,  // could not be started, or did not speak the protocol
    };
    Kind kind = Kind::Crashed;
    int signal = 0;     // Crashed by a signal
    int exitCode = -1;  // Crashed by exiting
    Hdf5Step step = Hdf5Step::Idle;
    QString dataset;  // of `step`
    QString detail;   // the worker's last line on stderr, or why it could not start
    int stalledSeconds = 0;
    bool beforeRequest = false;    // gone before it could read the request: not the file's doing
    std::int64_t memoryBytes = 0;  // the limit it went over

    // "the HDF5 library crashed (signal 11, Segmentation fault) while opening dataset X"
    QString toString() const;
};

// One ttrace-hdf5-worker process and its parent's end of it: a socket for requests and
// replies, a shared page where it marks its steps, a file that keeps its stderr. It runs in a
// process group of its own (Ctrl-C at the terminal reaches the parent only, which decides) and
// ends itself when its parent is gone. Used by one thread at a time.
class Hdf5Worker {
public:
    static std::unique_ptr<Hdf5Worker> start(const QString& executable, const WorkerLimits& limits,
                                             QString* error);
    ~Hdf5Worker();  // kills the process if it still runs
    Hdf5Worker(const Hdf5Worker&) = delete;
    Hdf5Worker& operator=(const Hdf5Worker&) = delete;

    // Sends `request` and waits for the reply, watching progress, memory and `cancel` (polled
    // every 50 ms) meanwhile.
    std::variant<QByteArray, WorkerFailure> call(const QByteArray& request,
                                                 const std::atomic<bool>* cancel);
    bool alive() const { return pid_ > 0; }
    // How many requests it has answered: a crash in a worker that answered none is the
    // request's own doing; in one that did, earlier files may have damaged its memory.
    int answered() const { return answered_; }
    // Whether the process still runs; reaps it if not (an idle worker killed from outside).
    bool stillRunning();

private:
    Hdf5Worker() = default;
    WorkerFailure stop(WorkerFailure failure);  // kills, reaps, fills in where it was
    WorkerFailure reapDead();                   // after the socket closed under it
    std::int64_t residentBytes() const;

    int pid_ = -1;
    int socket_ = -1;
    int stderrFd_ = -1;
    int trailFd_ = -1;
    TrailPage* trail_ = nullptr;
    WorkerLimits limits_;
    int answered_ = 0;
};

}  // namespace ttrace
