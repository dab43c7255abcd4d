#include "MpiProcessGroup.h"

#include <unistd.h>

#include <algorithm>

namespace ttrace {

namespace {

constexpr int kSizeTag = 1;
constexpr int kBytesTag = 2;
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

ProcessGroup::Received receiveFrom(int source, MPI_Comm comm) {
    ProcessGroup::Received received;
    qint64 size = 0;
    int code = MPI_Recv(&size, 1, MPI_INT64_T, source, kSizeTag, comm, MPI_STATUS_IGNORE);
    if (code == MPI_SUCCESS && size < 0) {
        received.error = QStringLiteral("it announced %1 bytes").arg(size);
        return received;
    }
    QByteArray bytes(code == MPI_SUCCESS ? size : 0, Qt::Uninitialized);
    for (qint64 offset = 0; code == MPI_SUCCESS && offset < size; offset += kPiece) {
        const int piece = static_cast<int>(std::min(kPiece, size - offset));
        code = MPI_Recv(bytes.data() + offset, piece, MPI_BYTE, source, kBytesTag, comm,
                        MPI_STATUS_IGNORE);
    }
    if (code != MPI_SUCCESS) {
        received.error = errorText(code);
        return received;
    }
    received.bytes = std::move(bytes);
    return received;
}

}  // namespace

MpiProcessGroup::MpiProcessGroup() {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
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

std::vector<ProcessGroup::Received> MpiProcessGroup::gatherToRoot(const QByteArray& bytes) {
    if (rank_ != 0) {
        // A failed send is rank 0's to report: it then lacks this process's share.
        static_cast<void>(sendToRoot(bytes, comm_));
        return {};
    }
    std::vector<Received> all;
    all.push_back(Received{bytes, {}});
    for (int source = 1; source < size_; ++source) {
        all.push_back(receiveFrom(source, comm_));
    }
    return all;
}

}  // namespace ttrace
