#include "MpiProcessGroup.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <thread>

namespace ttrace {

namespace {

constexpr int kSizeTag = 1;
constexpr int kBytesTag = 2;
constexpr int kProgressTag = 3;
// How often rank 0, waiting for the others' results, passes on their progress.
constexpr auto kProgressInterval = std::chrono::milliseconds(200);
// MPI counts are ints: large payloads travel in pieces.
constexpr qint64 kPiece = 1 << 30;

QString errorText(int code) {
    char text[MPI_MAX_ERROR_STRING] = {};
    int length = 0;
    MPI_Error_string(code, text, &length);
    return QString::fromLocal8Bit(text, length);
}

// Sends `bytes` to rank 0: its size, then the bytes in pieces.
int sendToRoot(const QByteArray& bytes, MPI_Comm comm) {
    const qint64 size = bytes.size();
    int code = MPI_Send(&size, 1, MPI_INT64_T, 0, kSizeTag, comm);
    for (qint64 offset = 0; code == MPI_SUCCESS && offset < size; offset += kPiece) {
        const int piece = static_cast<int>(std::min(kPiece, size - offset));
        code = MPI_Send(bytes.constData() + offset, piece, MPI_BYTE, 0, kBytesTag, comm);
    }
    return code;
}

}  // namespace

ProcessGroup::Received MpiProcessGroup::receiveFrom(
    int source, const std::function<void(std::int64_t)>& progress) {
    // Until the results start to arrive, the progress of the others is passed on.
    int arrived = 0;
    while (progress &&
           MPI_Iprobe(source, kSizeTag, comm_, &arrived, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
           !arrived) {
        progress(receiveProgress());
        std::this_thread::sleep_for(kProgressInterval);
    }
    ProcessGroup::Received received;
    qint64 size = 0;
    int code = MPI_Recv(&size, 1, MPI_INT64_T, source, kSizeTag, comm_, MPI_STATUS_IGNORE);
    if (code == MPI_SUCCESS && size < 0) {
        received.error = QStringLiteral("it announced %1 bytes").arg(size);
        return received;
    }
    QByteArray bytes(code == MPI_SUCCESS ? size : 0, Qt::Uninitialized);
    for (qint64 offset = 0; code == MPI_SUCCESS && offset < size; offset += kPiece) {
        const int piece = static_cast<int>(std::min(kPiece, size - offset));
        code = MPI_Recv(bytes.data() + offset, piece, MPI_BYTE, source, kBytesTag, comm_,
                        MPI_STATUS_IGNORE);
    }
    if (code != MPI_SUCCESS) {
        received.error = errorText(code);
        return received;
    }
    received.bytes = std::move(bytes);
    return received;
}

MpiProcessGroup::MpiProcessGroup() {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    progress_.assign(static_cast<std::size_t>(size_), 0);
    MPI_Comm machine = MPI_COMM_NULL;
    if (MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &machine) ==
        MPI_SUCCESS) {
        MPI_Comm_size(machine, &sizeOnThisMachine_);
        MPI_Comm_free(&machine);
    }
}

MpiProcessGroup::~MpiProcessGroup() {
    if (comm_ != MPI_COMM_NULL) {
        MPI_Comm_free(&comm_);
    }
}

QString MpiProcessGroup::processName() const {
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int length = 0;
    MPI_Get_processor_name(name, &length);
    return QStringLiteral("%1, pid %2").arg(QString::fromLocal8Bit(name, length)).arg(getpid());
}

std::optional<std::int64_t> MpiProcessGroup::broadcast(std::int64_t value, QString* error) {
    const int code = MPI_Bcast(&value, 1, MPI_INT64_T, 0, comm_);
    if (code != MPI_SUCCESS) {
        if (error) {
            *error = QStringLiteral("MPI broadcast failed: ") + errorText(code);
        }
        return std::nullopt;
    }
    return value;
}

std::optional<QByteArray> MpiProcessGroup::broadcastBytes(const QByteArray& bytes, QString* error) {
    const auto size = broadcast(bytes.size(), error);
    if (!size) {
        return std::nullopt;
    }
    QByteArray all = rank_ == 0 ? bytes : QByteArray(*size, Qt::Uninitialized);
    int code = MPI_SUCCESS;
    for (qint64 offset = 0; code == MPI_SUCCESS && offset < *size; offset += kPiece) {
        const int piece = static_cast<int>(std::min(kPiece, *size - offset));
        code = MPI_Bcast(all.data() + offset, piece, MPI_BYTE, 0, comm_);
    }
    if (code != MPI_SUCCESS) {
        if (error) {
            *error = QStringLiteral("MPI broadcast failed: ") + errorText(code);
        }
        return std::nullopt;
    }
    return all;
}

std::int64_t MpiProcessGroup::shareProgress(std::int64_t bytesHere) {
    if (rank_ != 0) {
        // One message in flight at most: a newer value waits for the older one to leave.
        int sent = 1;
        if (progressRequest_ != MPI_REQUEST_NULL) {
            MPI_Test(&progressRequest_, &sent, MPI_STATUS_IGNORE);
        }
        if (sent) {
            progressInFlight_ = bytesHere;
            MPI_Isend(&progressInFlight_, 1, MPI_INT64_T, 0, kProgressTag, comm_,
                      &progressRequest_);
        }
        return bytesHere;
    }
    progress_[0] = bytesHere;
    return receiveProgress();
}

std::int64_t MpiProcessGroup::receiveProgress() {
    int arrived = 0;
    MPI_Status status;
    while (MPI_Iprobe(MPI_ANY_SOURCE, kProgressTag, comm_, &arrived, &status) == MPI_SUCCESS &&
           arrived) {
        std::int64_t bytes = 0;
        if (MPI_Recv(&bytes, 1, MPI_INT64_T, status.MPI_SOURCE, kProgressTag, comm_,
                     MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            break;
        }
        progress_[static_cast<std::size_t>(status.MPI_SOURCE)] = bytes;
    }
    return std::accumulate(progress_.begin(), progress_.end(), std::int64_t{0});
}

std::vector<ProcessGroup::Received> MpiProcessGroup::gatherToRoot(
    const QByteArray& bytes, const std::function<void(std::int64_t)>& progress) {
    if (rank_ != 0) {
        // The last progress message leaves before the results, which rank 0 waits for while
        // it receives progress: nothing is left unreceived.
        if (progressRequest_ != MPI_REQUEST_NULL) {
            MPI_Wait(&progressRequest_, MPI_STATUS_IGNORE);
        }
        // A failed send is rank 0's to report: it then lacks this process's share.
        static_cast<void>(sendToRoot(bytes, comm_));
        return {};
    }
    std::vector<Received> all;
    all.push_back(Received{bytes, {}});
    for (int source = 1; source < size_; ++source) {
        all.push_back(receiveFrom(source, progress));
    }
    // Progress messages sent before the results, not received yet.
    static_cast<void>(receiveProgress());
    return all;
}

}  // namespace ttrace
