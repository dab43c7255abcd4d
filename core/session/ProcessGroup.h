#pragma once

#include <QByteArray>
#include <QString>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace ttrace {

// The processes that share one check: the ranks of an MPI job under mpirun or srun. Core only
// sees this interface; the MPI implementation lives in mpi/ and is linked by the checker when
// MPI is found at build time. Rank 0 opens and writes the caches and writes the reports.
class ProcessGroup {
public:
    virtual ~ProcessGroup() = default;

    virtual int rank() const = 0;
    virtual int size() const = 0;
    // How many of the processes run on this machine (they share its cores).
    virtual int sizeOnThisMachine() const = 0;
    // Where this process runs ("host (pid)"), to name a process that failed.
    virtual QString processName() const = 0;

    // Rank 0's value, on every process; nullopt (and `error` set) when the call failed.
    [[nodiscard]] virtual std::optional<std::int64_t> broadcast(std::int64_t value,
                                                                QString* error) = 0;

    // Rank 0's `bytes`, on every process; nullopt (and `error` set) when the call failed.
    [[nodiscard]] virtual std::optional<QByteArray> broadcastBytes(const QByteArray& bytes,
                                                                   QString* error) = 0;

    // What rank 0 receives from one process.
    struct Received {
        std::optional<QByteArray> bytes;  // nullopt when it could not be received
        QString error;                    // why, then
    };
    // Progress of a comparison, passed on while it runs, without waiting for anyone: every
    // process calls it now and then with the bytes it has compared so far. Returns, on rank 0,
    // the bytes compared by the whole job as last heard from each process; on the others,
    // `bytesHere`.
    virtual std::int64_t shareProgress(std::int64_t bytesHere) = 0;

    // Every process's `bytes`, on rank 0, in rank order (its own first); empty on the others.
    // While rank 0 waits for the others, it passes the job's progress (shareProgress) to
    // `progress` a few times a second, when given.
    [[nodiscard]] virtual std::vector<Received> gatherToRoot(
        const QByteArray& bytes, const std::function<void(std::int64_t jobBytes)>& progress) = 0;
};

}  // namespace ttrace
