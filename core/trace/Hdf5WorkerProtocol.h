#pragma once

#include <QByteArray>
#include <QString>
#include <atomic>
#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "trace/DType.h"
#include "trace/Hdf5Step.h"
#include "trace/RankFileIndex.h"

namespace ttrace {

// What the HDF5 worker process (ttrace-hdf5-worker, IsolatedHdf5.h) is asked and answers, as
// framed messages on its stdin and stdout: a native 64-bit length, then the bytes. Parent and
// worker are built together; a mismatch is a clear error, never a misread.

// Index one rank file (indexRankFile()).
struct IndexRequest {
    QString path;
};

// Read the stored words of a box of one dataset, undecoded (Hdf5Reader::readStored()).
struct ReadRequest {
    QString file;
    QString dataset;
    DType dtype = DType::F32;
    std::vector<std::int64_t> localShape;
    std::vector<std::int64_t> start;
    std::vector<std::int64_t> count;
};

using WorkerRequest = std::variant<IndexRequest, ReadRequest>;

// The words read, or why not.
struct ReadReply {
    std::optional<QString> problem;
    QByteArray words;
};

QByteArray encodeRequest(const WorkerRequest& request);
std::optional<WorkerRequest> decodeRequest(const QByteArray& bytes);

// The records travel without their file's path: the parent knows it and sets it again.
QByteArray encodeIndexReply(const RankFileIndex& index);
std::optional<RankFileIndex> decodeIndexReply(const QByteArray& bytes, const QString& path);

QByteArray encodeReadReply(const ReadReply& reply);
std::optional<ReadReply> decodeReadReply(const QByteArray& bytes);

// Blocking frame I/O on the socket between parent and worker. readFrame (the worker's side)
// returns nullopt at the end of input (the parent closed it or died) or on a broken frame;
// writeFrame returns false when the other end is gone.
std::optional<QByteArray> readFrame(int fd);
bool writeFrame(int fd, const QByteArray& bytes);

// The page the worker marks its steps on, shared with its parent (a memfd both map). `beats`
// counts the steps, so that the parent sees progress; the last step and its dataset say where
// a crash or a hang happened. The parent reads step and dataset only once the worker is dead.
struct TrailPage {
    std::atomic<std::uint64_t> beats{0};
    std::atomic<std::uint32_t> step{0};
    std::uint32_t datasetBytes = 0;
    char dataset[4080] = {};
};
static_assert(sizeof(TrailPage) == 4096);

// The worker's trail: each step written to its page.
class TrailPageWriter final : public Hdf5Trail {
public:
    explicit TrailPageWriter(TrailPage* page) : page_(page) {}
    void enter(Hdf5Step step, std::string_view dataset) override;

private:
    TrailPage* page_;
};

// Exit status of a worker whose allocation failed (its new-handler), told apart from a crash.
inline constexpr int kWorkerOutOfMemoryExit = 3;
// Exit status of a worker handed a message it cannot decode.
inline constexpr int kWorkerProtocolExit = 4;

// Frames larger than this are refused: no request or reply comes near it.
inline constexpr std::uint64_t kMaxFrameBytes = std::uint64_t{1} << 34;

}  // namespace ttrace
