#pragma once

#include <mpi.h>

#include "session/ProcessGroup.h"

namespace ttrace {

// ProcessGroup over MPI_COMM_WORLD (a duplicate, so that nothing else can mix its messages
// in). Errors are returned, not fatal, so that a failed transfer becomes a reported process
// failure instead of an abort of the whole job.
class MpiProcessGroup final : public ProcessGroup {
public:
    MpiProcessGroup();
    ~MpiProcessGroup() override;
    MpiProcessGroup(const MpiProcessGroup&) = delete;
    MpiProcessGroup& operator=(const MpiProcessGroup&) = delete;

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    int sizeOnThisMachine() const override { return sizeOnThisMachine_; }
    QString processName() const override;
    std::optional<std::int64_t> broadcast(std::int64_t value, QString* error) override;
    std::optional<QByteArray> broadcastBytes(const QByteArray& bytes, QString* error) override;
    std::int64_t shareProgress(std::int64_t bytesHere) override;
    std::vector<Received> gatherToRoot(const QByteArray& bytes,
                                       const std::function<void(std::int64_t)>& progress) override;

private:
    // Receives the progress messages that have arrived (rank 0); returns the job's total.
    std::int64_t receiveProgress();
    Received receiveFrom(int source, const std::function<void(std::int64_t)>& progress);

    MPI_Comm comm_ = MPI_COMM_NULL;
    int rank_ = 0;
    int size_ = 1;
    int sizeOnThisMachine_ = 1;
    // Progress: on rank 0 the last value heard from each process; on the others the value in
    // flight (MPI reads it until the send completes) and its request.
    std::vector<std::int64_t> progress_;
    std::int64_t progressInFlight_ = 0;
    MPI_Request progressRequest_ = MPI_REQUEST_NULL;
};

}  // namespace ttrace
