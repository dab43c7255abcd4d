#include "trace/Hdf5WorkerProtocol.h"

#include <sys/socket.h>
#include <unistd.h>

#include <QDataStream>
#include <QIODevice>
#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ttrace {

namespace {

constexpr quint32 kMagic = 0x74744831;  // "ttH1"; changes with the layout below
constexpr quint8 kIndex = 1;
constexpr quint8 kRead = 2;
// Caps on counts read back, so that a garbled message cannot ask for a huge allocation.
constexpr quint64 kMaxCount = quint64{1} << 32;

class Writer {
public:
    explicit Writer(QByteArray* bytes) : stream_(bytes, QIODevice::WriteOnly) {
        stream_.setVersion(QDataStream::Qt_6_4);
        stream_ << kMagic;
    }
    template <typename T>
    Writer& operator<<(const T& value) {
        stream_ << value;
        return *this;
    }
    void integers(const std::vector<std::int64_t>& values) {
        stream_ << static_cast<quint64>(values.size());
        for (const auto v : values) {
            stream_ << static_cast<qint64>(v);
        }
    }
    void reals(const std::vector<double>& values) {
        stream_ << static_cast<quint64>(values.size());
        for (const auto v : values) {
            stream_ << v;
        }
    }

private:
    QDataStream stream_;
};

class Reader {
public:
    explicit Reader(const QByteArray& bytes) : stream_(bytes) {
        stream_.setVersion(QDataStream::Qt_6_4);
        quint32 magic = 0;
        stream_ >> magic;
        ok_ = magic == kMagic;
    }
    template <typename T>
    T take() {
        T value{};
        stream_ >> value;
        return value;
    }
    std::optional<std::size_t> count() {
        const auto n = take<quint64>();
        if (n > kMaxCount) {
            ok_ = false;
            return std::nullopt;
        }
        return static_cast<std::size_t>(n);
    }
    std::vector<std::int64_t> integers() {
        std::vector<std::int64_t> values;
        const auto n = count();
        for (std::size_t i = 0; n && i < *n && good(); ++i) {
            values.push_back(take<qint64>());
        }
        return values;
    }
    std::vector<double> reals() {
        std::vector<double> values;
        const auto n = count();
        for (std::size_t i = 0; n && i < *n && good(); ++i) {
            values.push_back(take<double>());
        }
        return values;
    }
    template <typename Enum>
    Enum enumValue(int count) {
        const auto value = take<qint32>();
        if (value < 0 || value >= count) {
            ok_ = false;
            return Enum{};
        }
        return static_cast<Enum>(value);
    }
    void fail() { ok_ = false; }
    bool good() const { return ok_ && stream_.status() == QDataStream::Ok; }
    bool atEnd() const { return stream_.atEnd(); }

private:
    QDataStream stream_;
    bool ok_ = false;
};

constexpr int kSeverityCount = 3;
constexpr int kPlacementTypeCount = 3;
constexpr int kScaleFormatCount = 2;

void writeRecord(Writer& w, const TensorRecord& r) {
    w << static_cast<qint32>(r.rank) << r.dataset << r.key.name << static_cast<qint32>(r.key.kind)
      << static_cast<qint32>(r.key.index) << static_cast<qint32>(r.key.iteration)
      << static_cast<qint32>(r.key.microBatch) << static_cast<qint64>(r.seq)
      << static_cast<qint32>(r.layer) << static_cast<qint32>(r.expert)
      << static_cast<qint32>(r.dtype);
    w.integers(r.scales.block);
    w.reals(r.scales.scaleInv);
    w << r.scales.format.has_value()
      << static_cast<qint32>(r.scales.format.value_or(ScaleFormat::E8M0)) << r.scales.tensorScale;
    w.integers(r.globalShape);
    w.integers(r.localShape);
    w << static_cast<quint64>(r.ranges.dims.size());
    for (const auto& dim : r.ranges.dims) {
        w << static_cast<quint64>(dim.size());
        for (const auto& range : dim) {
            w << static_cast<qint64>(range.start) << static_cast<qint64>(range.stop);
        }
    }
    w << static_cast<quint64>(r.placements.size());
    for (const auto& p : r.placements) {
        w << p.axis << static_cast<qint32>(p.placement.type) << static_cast<qint32>(p.placement.dim)
          << static_cast<qint32>(p.placement.splitFactor);
    }
    w << r.dataOffset.has_value() << static_cast<quint64>(r.dataOffset.value_or(0));
    w << r.fileStamp.has_value() << static_cast<qint64>(r.fileStamp ? r.fileStamp->size : 0)
      << static_cast<qint64>(r.fileStamp ? r.fileStamp->mtimeNs : 0);
    const RecomputationDifference recomputation =
        r.recomputation.value_or(RecomputationDifference{});
    w << r.recomputation.has_value() << static_cast<qint64>(recomputation.elementsDiffering)
      << static_cast<qint64>(recomputation.elements) << recomputation.scalesDiffer;
}

TensorRecord readRecord(Reader& r, const QString& path) {
    TensorRecord record;
    record.file = path;
    record.rank = r.take<qint32>();
    record.dataset = r.take<QString>();
    record.key.name = r.take<QString>();
    record.key.kind = r.enumValue<TensorKind>(kTensorKindCount);
    record.key.index = r.take<qint32>();
    record.key.iteration = r.take<qint32>();
    record.key.microBatch = r.take<qint32>();
    record.seq = r.take<qint64>();
    record.layer = r.take<qint32>();
    record.expert = r.take<qint32>();
    record.dtype = r.enumValue<DType>(kDTypeCount);
    record.scales.block = r.integers();
    record.scales.scaleInv = r.reals();
    const bool formatted = r.take<bool>();
    const auto format = r.enumValue<ScaleFormat>(kScaleFormatCount);
    if (formatted) {
        record.scales.format = format;
    }
    record.scales.tensorScale = r.take<bool>();
    record.globalShape = r.integers();
    record.localShape = r.integers();
    const auto dims = r.count();
    for (std::size_t d = 0; dims && d < *dims && r.good(); ++d) {
        auto& ranges = record.ranges.dims.emplace_back();
        const auto n = r.count();
        for (std::size_t i = 0; n && i < *n && r.good(); ++i) {
            const auto start = r.take<qint64>();
            ranges.push_back({start, r.take<qint64>()});
        }
    }
    const auto placements = r.count();
    for (std::size_t i = 0; placements && i < *placements && r.good(); ++i) {
        AxisPlacement p;
        p.axis = r.take<QString>();
        p.placement.type = r.enumValue<Placement::Type>(kPlacementTypeCount);
        p.placement.dim = r.take<qint32>();
        p.placement.splitFactor = r.take<qint32>();
        record.placements.push_back(std::move(p));
    }
    const bool hasOffset = r.take<bool>();
    const auto offset = r.take<quint64>();
    if (hasOffset) {
        record.dataOffset = offset;
    }
    const bool hasStamp = r.take<bool>();
    FileStamp stamp;
    stamp.size = r.take<qint64>();
    stamp.mtimeNs = r.take<qint64>();
    if (hasStamp) {
        record.fileStamp = stamp;
    }
    const bool recomputed = r.take<bool>();
    RecomputationDifference recomputation;
    recomputation.elementsDiffering = r.take<qint64>();
    recomputation.elements = r.take<qint64>();
    recomputation.scalesDiffer = r.take<bool>();
    if (recomputed) {
        record.recomputation = recomputation;
    }
    return record;
}

void writeDiagnostic(Writer& w, const Diagnostic& d) {
    w << static_cast<qint32>(d.severity) << d.file << d.dataset << d.tensor << d.message
      << d.details;
}

Diagnostic readDiagnostic(Reader& r) {
    Diagnostic d;
    d.severity = r.enumValue<Severity>(kSeverityCount);
    d.file = r.take<QString>();
    d.dataset = r.take<QString>();
    d.tensor = r.take<QString>();
    d.message = r.take<QString>();
    d.details = r.take<QString>();
    return d;
}

}  // namespace

QByteArray encodeRequest(const WorkerRequest& request) {
    QByteArray bytes;
    Writer w(&bytes);
    if (const auto* index = std::get_if<IndexRequest>(&request)) {
        w << kIndex << index->path;
    } else {
        const auto& read = std::get<ReadRequest>(request);
        w << kRead << read.file << read.dataset << static_cast<qint32>(read.dtype);
        w.integers(read.localShape);
        w.integers(read.start);
        w.integers(read.count);
    }
    return bytes;
}

std::optional<WorkerRequest> decodeRequest(const QByteArray& bytes) {
    Reader r(bytes);
    const auto op = r.take<quint8>();
    WorkerRequest request;
    if (op == kIndex) {
        request = IndexRequest{r.take<QString>()};
    } else if (op == kRead) {
        ReadRequest read;
        read.file = r.take<QString>();
        read.dataset = r.take<QString>();
        read.dtype = r.enumValue<DType>(kDTypeCount);
        read.localShape = r.integers();
        read.start = r.integers();
        read.count = r.integers();
        request = std::move(read);
    } else {
        r.fail();
    }
    if (!r.good() || !r.atEnd()) {
        return std::nullopt;
    }
    return request;
}

QByteArray encodeIndexReply(const RankFileIndex& index) {
    QByteArray bytes;
    Writer w(&bytes);
    w << index.opened << index.fileRank.has_value()
      << static_cast<qint32>(index.fileRank.value_or(0)) << index.formatVersion << index.cancelled;
    w << static_cast<quint64>(index.records.size());
    for (const auto& record : index.records) {
        writeRecord(w, record);
    }
    w << static_cast<quint64>(index.diagnostics.size());
    for (const auto& d : index.diagnostics) {
        writeDiagnostic(w, d);
    }
    return bytes;
}

std::optional<RankFileIndex> decodeIndexReply(const QByteArray& bytes, const QString& path) {
    Reader r(bytes);
    RankFileIndex index;
    index.opened = r.take<bool>();
    const bool hasRank = r.take<bool>();
    const auto rank = r.take<qint32>();
    if (hasRank) {
        index.fileRank = rank;
    }
    index.formatVersion = r.take<QString>();
    index.cancelled = r.take<bool>();
    const auto records = r.count();
    for (std::size_t i = 0; records && i < *records && r.good(); ++i) {
        index.records.push_back(readRecord(r, path));
    }
    const auto diagnostics = r.count();
    for (std::size_t i = 0; diagnostics && i < *diagnostics && r.good(); ++i) {
        index.diagnostics.push_back(readDiagnostic(r));
    }
    if (!r.good() || !r.atEnd()) {
        return std::nullopt;
    }
    return index;
}

QByteArray encodeReadReply(const ReadReply& reply) {
    QByteArray bytes;
    Writer w(&bytes);
    w << reply.problem.has_value() << reply.problem.value_or(QString()) << reply.words;
    return bytes;
}

std::optional<ReadReply> decodeReadReply(const QByteArray& bytes) {
    Reader r(bytes);
    ReadReply reply;
    const bool failed = r.take<bool>();
    const auto problem = r.take<QString>();
    if (failed) {
        reply.problem = problem;
    }
    reply.words = r.take<QByteArray>();
    if (!r.good() || !r.atEnd()) {
        return std::nullopt;
    }
    return reply;
}

namespace {

bool readFully(int fd, char* target, std::size_t bytes) {
    while (bytes > 0) {
        const ssize_t got = ::read(fd, target, bytes);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got <= 0) {
            return false;
        }
        target += got;
        bytes -= static_cast<std::size_t>(got);
    }
    return true;
}

// Both ends are a socket: a closed peer is an error here, never SIGPIPE.
bool writeFully(int fd, const char* source, std::size_t bytes) {
    while (bytes > 0) {
        const ssize_t put = ::send(fd, source, bytes, MSG_NOSIGNAL);
        if (put < 0 && errno == EINTR) {
            continue;
        }
        if (put <= 0) {
            return false;
        }
        source += put;
        bytes -= static_cast<std::size_t>(put);
    }
    return true;
}

}  // namespace

void TrailPageWriter::enter(Hdf5Step step, std::string_view dataset) {
    const std::size_t bytes = std::min(dataset.size(), sizeof page_->dataset);
    if (bytes > 0) {  // an empty view's data() may be null, which memcpy must not get
        std::memcpy(page_->dataset, dataset.data(), bytes);
    }
    page_->datasetBytes = static_cast<std::uint32_t>(bytes);
    page_->step.store(static_cast<std::uint32_t>(step), std::memory_order_relaxed);
    page_->beats.fetch_add(1, std::memory_order_release);
}

std::optional<QByteArray> readFrame(int fd) {
    std::uint64_t length = 0;
    if (!readFully(fd, reinterpret_cast<char*>(&length), sizeof length) ||
        length > kMaxFrameBytes) {
        return std::nullopt;
    }
    QByteArray bytes(static_cast<qsizetype>(length), Qt::Uninitialized);
    if (!readFully(fd, bytes.data(), bytes.size())) {
        return std::nullopt;
    }
    return bytes;
}

bool writeFrame(int fd, const QByteArray& bytes) {
    const auto length = static_cast<std::uint64_t>(bytes.size());
    return writeFully(fd, reinterpret_cast<const char*>(&length), sizeof length) &&
           writeFully(fd, bytes.constData(), static_cast<std::size_t>(bytes.size()));
}

}  // namespace ttrace
