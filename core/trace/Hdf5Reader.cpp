#include "trace/Hdf5Reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <QFile>
#include <QStringList>
#include <cerrno>
#include <cstring>
#include <limits>
#include <list>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "trace/FileStamp.h"
#include "trace/Hdf5Containment.h"
#include "trace/Hdf5Handles.h"
#include "trace/IsolatedHdf5.h"
#include "trace/RawDataOffset.h"
#include "trace/StoredBox.h"

namespace ttrace {

namespace {

QString boxText(std::span<const std::int64_t> start, std::span<const std::int64_t> count) {
    QStringList parts;
    for (std::size_t d = 0; d < start.size() && d < count.size(); ++d) {
        parts << QStringLiteral("%1:%2").arg(start[d]).arg(start[d] + count[d]);
    }
    return QLatin1Char('[') + parts.join(QStringLiteral(", ")) + QLatin1Char(']');
}

// Opens a dataset to read it as indexing accepted it: not through a link out of the rank
// file, and only when its data are in the rank file (a file changed since it was indexed may
// say otherwise). Invalid, with the reason in `problem`, otherwise.
hdf5::Dataset openInsideTheFile(hid_t file, const QByteArray& path, QString* problem) {
    hdf5::ExternalLinkGuard guard;
    if (auto outside = hdf5::linkProblem(file, path.constData(), guard)) {
        *problem = QStringLiteral("the dataset ") + *outside;
        return {};
    }
    hdf5::Dataset dataset(H5Dopen2(file, path.constData(), guard.datasets()));
    if (!dataset) {
        const QString refused = guard.takeRefused();
        *problem = refused.isEmpty()
                       ? QStringLiteral("cannot open the dataset: ") + hdf5::takeErrorText()
                       : QStringLiteral("the dataset ") + hdf5::leavesTheFile(refused);
        return {};
    }
    if (auto outside = hdf5::storageProblem(dataset.get())) {
        *problem = QStringLiteral("the dataset ") + *outside;
        return {};
    }
    return dataset;
}

// Runs shorter than this go through HDF5, whose sieve buffer merges them into fewer reads.
constexpr std::size_t kMinDirectRunBytes = 4096;

// Where a dataset's raw bytes are, learned once per dataset.
struct DatasetLayout {
    std::vector<hsize_t> dims;
    // The file offset of the data when it can be read with pread: contiguous (hence
    // unfiltered), allocated, not external, stored exactly as its memory type.
    std::optional<std::uint64_t> rawOffset;
};

// One row-major box as runs of consecutive elements: `runs` runs of `runLength` elements;
// outer dimensions [0, innerDim) are iterated, the rest is contiguous in the file.
struct BoxRuns {
    std::size_t innerDim = 0;
    std::size_t runLength = 1;
    std::size_t runs = 1;
};

// The size of the file open as `fd` (0 when unknown: nothing is then read directly).
std::uint64_t descriptorBytes(int fd) {
    struct stat st {};
    return fd >= 0 && ::fstat(fd, &st) == 0 && st.st_size > 0
               ? static_cast<std::uint64_t>(st.st_size)
               : 0;
}

BoxRuns boxRuns(const std::vector<hsize_t>& dims, std::span<const std::int64_t> count) {
    BoxRuns box;
    std::size_t d = dims.size();
    while (d > 0) {
        --d;
        box.runLength *= static_cast<std::size_t>(count[d]);
        box.innerDim = d;
        if (static_cast<hsize_t>(count[d]) != dims[d]) {
            break;  // a partial dimension ends the contiguous span
        }
    }
    for (std::size_t o = 0; o < box.innerDim; ++o) {
        box.runs *= static_cast<std::size_t>(count[o]);
    }
    return box;
}

}  // namespace

struct Hdf5Reader::Impl {
    struct OpenFile {
        hdf5::File file;
        int fd = -1;
        std::uint64_t bytes = 0;  // of the file when `fd` was opened
        std::mutex mutex;
        std::unordered_map<QString, DatasetLayout> layouts;
        ~OpenFile() {
            if (fd >= 0) {
                ::close(fd);
            }
        }
    };
    using SharedFile = std::shared_ptr<OpenFile>;

    std::size_t maxOpenFiles;
    const std::atomic<bool>* cancel = nullptr;  // stops a read that waits on a worker
    std::mutex mutex;
    // Most recently used first. Files are shared so that evicting one that another thread is
    // still reading from only closes it once that read is done.
    std::list<std::pair<QString, SharedFile>> open;

    // A plain descriptor of a rank file whose datasets are read at the offsets its index
    // found, without opening it through HDF5: what a check of thousands of rank files spends
    // most of its time on otherwise (each open clears a 512 KiB table).
    struct PlainFile {
        int fd = -1;
        std::uint64_t bytes = 0;  // of the file when `fd` was opened
        bool asIndexed = false;   // the file still has the size and time its index was made at
        ~PlainFile() {
            if (fd >= 0) {
                ::close(fd);
            }
        }
    };
    using SharedPlainFile = std::shared_ptr<PlainFile>;
    // Descriptors are cheap: many more stay open than HDF5 files.
    static constexpr std::size_t kMaxPlainFiles = 512;
    std::list<std::pair<QString, SharedPlainFile>> plain;  // most recently used first
    std::unordered_map<QString, decltype(plain)::iterator> plainByPath;

    // Null when the file cannot be opened (the HDF5 path then says why).
    SharedPlainFile plainFile(const QString& path, const FileStamp& indexed) {
        const std::lock_guard lock(mutex);
        if (const auto known = plainByPath.find(path); known != plainByPath.end()) {
            plain.splice(plain.begin(), plain, known->second);
            return plain.front().second;
        }
        auto handle = std::make_shared<PlainFile>();
        handle->fd = ::open(QFile::encodeName(path).constData(), O_RDONLY | O_CLOEXEC);
        if (handle->fd < 0) {
            return nullptr;
        }
        // Opened first, compared second: a file replaced in between is not the one indexed.
        const auto now = fileStamp(path);
        handle->asIndexed = now && now->size == indexed.size && now->mtimeNs == indexed.mtimeNs;
        handle->bytes = descriptorBytes(handle->fd);
        plain.emplace_front(path, handle);
        plainByPath[path] = plain.begin();
        while (plain.size() > kMaxPlainFiles) {
            plainByPath.erase(plain.back().first);
            plain.pop_back();
        }
        return handle;
    }

    SharedFile file(const QString& path, QString* problem) {
        const std::lock_guard lock(mutex);
        for (auto it = open.begin(); it != open.end(); ++it) {
            if (it->first == path) {
                open.splice(open.begin(), open, it);
                return open.front().second;
            }
        }
        QString error;
        auto handle = std::make_shared<OpenFile>();
        handle->file = hdf5::openReadOnly(path, &error);
        if (!handle->file.valid()) {
            *problem = QStringLiteral("cannot open the file: ") + error;
            return nullptr;
        }
        // A second, plain descriptor for direct reads; read-only like the HDF5 one.
        handle->fd = ::open(QFile::encodeName(path).constData(), O_RDONLY | O_CLOEXEC);
        handle->bytes = descriptorBytes(handle->fd);
        open.emplace_front(path, handle);
        while (open.size() > maxOpenFiles) {
            open.pop_back();
        }
        return handle;
    }
};

namespace {

// The half-precision and fp8 words of a box, before decoding. A per-thread buffer that only
// grows: allocating (and zeroing) one per block cost more than decoding it.
std::uint8_t* storedWords(std::size_t bytes) {
    thread_local std::vector<std::uint8_t> stored;
    if (stored.size() < bytes) {
        stored.resize(bytes);
    }
    return stored.data();
}

std::optional<QString> preadFully(int fd, std::uint8_t* target, std::size_t bytes,
                                  std::uint64_t offset) {
    while (bytes > 0) {
        const ssize_t got = ::pread(fd, target, bytes, static_cast<off_t>(offset));
        if (got < 0) {
            if (errno == EINTR) {
                continue;
            }
            return QString::fromLocal8Bit(std::strerror(errno));
        }
        if (got == 0) {
            return QStringLiteral("the file ends inside the dataset's data (truncated?)");
        }
        target += got;
        bytes -= static_cast<std::size_t>(got);
        offset += static_cast<std::uint64_t>(got);
    }
    return std::nullopt;
}

// Blocks are read in order through a dataset, from several files in turn: a box of the next
// span of the same size, asked of the kernel now, is on its way while this one is compared.
// (On a disk the interleaved reads otherwise defeat the kernel's per-file read-ahead.)
void prefetchNext(int fd, const DatasetLayout& layout, std::size_t elementBytes,
                  std::span<const std::int64_t> localStart, std::span<const std::int64_t> count) {
    std::uint64_t first = 0, last = 0, total = 1;  // elements, row-major
    for (std::size_t d = 0; d < layout.dims.size(); ++d) {
        first = first * layout.dims[d] + static_cast<std::uint64_t>(localStart[d]);
        last = last * layout.dims[d] + static_cast<std::uint64_t>(localStart[d] + count[d] - 1);
        total *= layout.dims[d];
    }
    const std::uint64_t begin = last + 1;
    const std::uint64_t span = std::min(last + 1 - first, total - begin);
    if (span > 0) {
        ::posix_fadvise(fd, static_cast<off_t>(*layout.rawOffset + begin * elementBytes),
                        static_cast<off_t>(span * elementBytes), POSIX_FADV_WILLNEED);
    }
}

// Reads the box with one pread per run, outside HDF5 (and its global lock, so that reads on
// several threads overlap). `target` receives the stored bytes, row-major.
std::optional<QString> readDirect(int fd, std::uint64_t fileBytes, const DatasetLayout& layout,
                                  std::size_t elementBytes,
                                  std::span<const std::int64_t> localStart,
                                  std::span<const std::int64_t> count, const BoxRuns& box,
                                  std::uint8_t* target) {
    // The whole dataset must lie inside the file: an offset from a damaged file (or its
    // index) is refused here rather than read past the end or wrapped around.
    std::uint64_t dataBytes = elementBytes;
    for (const auto extent : layout.dims) {
        if (extent != 0 && dataBytes > std::numeric_limits<std::uint64_t>::max() / extent) {
            dataBytes = std::numeric_limits<std::uint64_t>::max();
            break;
        }
        dataBytes *= extent;
    }
    if (*layout.rawOffset > fileBytes || dataBytes > fileBytes - *layout.rawOffset) {
        return QStringLiteral(
                   "the dataset's data (%1 bytes at offset %2) lies beyond the end of "
                   "the file (%3 bytes; truncated?)")
            .arg(dataBytes)
            .arg(*layout.rawOffset)
            .arg(fileBytes);
    }
    const std::size_t rank = layout.dims.size();
    std::vector<std::uint64_t> stride(rank, 1);
    for (std::size_t d = rank; d-- > 1;) {
        stride[d - 1] = stride[d] * layout.dims[d];
    }
    std::vector<std::int64_t> index(box.innerDim, 0);  // position among the outer runs
    const std::size_t runBytes = box.runLength * elementBytes;
    for (std::size_t run = 0; run < box.runs; ++run) {
        std::uint64_t element = 0;
        for (std::size_t d = 0; d < rank; ++d) {
            const std::int64_t within = d < box.innerDim ? index[d] : 0;
            element += static_cast<std::uint64_t>(localStart[d] + within) * stride[d];
        }
        if (auto problem = preadFully(fd, target + run * runBytes, runBytes,
                                      *layout.rawOffset + element * elementBytes)) {
            return problem;
        }
        for (std::size_t d = box.innerDim; d-- > 0;) {  // odometer over the outer dimensions
            if (++index[d] < static_cast<std::int64_t>(count[d])) {
                break;
            }
            index[d] = 0;
        }
    }
    prefetchNext(fd, layout, elementBytes, localStart, count);
    return std::nullopt;
}

}  // namespace

namespace {

// The general path: HDF5 selects the box (any layout, filters, byte order) into `target`.
std::optional<QString> readThroughHdf5(hid_t dataset, hid_t type, std::size_t rank,
                                       std::span<const std::int64_t> localStart,
                                       std::span<const std::int64_t> count, void* target) {
    const hdf5::Dataspace fileSpace(H5Dget_space(dataset));
    if (!fileSpace) {
        return QStringLiteral("cannot read the dataset's shape: ") + hdf5::takeErrorText();
    }
    hdf5::Dataspace memorySpace;
    if (rank == 0) {
        memorySpace = hdf5::Dataspace(H5Screate(H5S_SCALAR));
    } else {
        const std::vector<hsize_t> start(localStart.begin(), localStart.end());
        const std::vector<hsize_t> extent(count.begin(), count.end());
        if (H5Sselect_hyperslab(fileSpace.get(), H5S_SELECT_SET, start.data(), nullptr,
                                extent.data(), nullptr) < 0) {
            return QStringLiteral("cannot select the box: ") + hdf5::takeErrorText();
        }
        memorySpace =
            hdf5::Dataspace(H5Screate_simple(static_cast<int>(rank), extent.data(), nullptr));
    }
    if (!memorySpace) {
        return QStringLiteral("cannot describe the box: ") + hdf5::takeErrorText();
    }
    if (H5Dread(dataset, type, memorySpace.get(), fileSpace.get(), H5P_DEFAULT, target) < 0) {
        return hdf5::takeErrorText();
    }
    return std::nullopt;
}

}  // namespace

Hdf5Reader::Hdf5Reader(const std::atomic<bool>* cancel, int maxOpenFiles)
    : impl_(std::make_unique<Impl>()) {
    impl_->maxOpenFiles = static_cast<std::size_t>(std::max(1, maxOpenFiles));
    impl_->cancel = cancel;
}

Hdf5Reader::~Hdf5Reader() = default;

namespace {

// Why the box [start, start + count) does not fit a dataset of `shape`, if it does not.
std::optional<QString> boxProblem(std::span<const std::int64_t> shape,
                                  std::span<const std::int64_t> start,
                                  std::span<const std::int64_t> count) {
    if (start.size() != shape.size() || count.size() != shape.size()) {
        return QStringLiteral("the box has %1 dimensions but the dataset has %2")
            .arg(std::max(start.size(), count.size()))
            .arg(shape.size());
    }
    for (std::size_t d = 0; d < shape.size(); ++d) {
        if (start[d] < 0 || count[d] < 0 || start[d] > shape[d] || count[d] > shape[d] - start[d]) {
            return QStringLiteral("outside the dataset's shape in dimension %1 (extent %2)")
                .arg(d)
                .arg(shape[d]);
        }
    }
    return std::nullopt;
}

}  // namespace

std::optional<Diagnostic> Hdf5Reader::read(const TensorRecord& record,
                                           std::span<const std::int64_t> localStart,
                                           std::span<const std::int64_t> count, float* out) {
    // fp32 lands in `out` as it is, and a box outside the dataset is refused there;
    // half-precision, fp8 and fp4 words are decoded here, exactly.
    if (record.dtype == DType::F32 || boxProblem(record.localShape, localStart, count)) {
        return readWords(record, localStart, count, reinterpret_cast<std::uint8_t*>(out));
    }
    const StoredBox words = storedBox(record.dtype, record.localShape, localStart, count);
    auto* target =
        storedWords(words.words() * static_cast<std::size_t>(storageBytes(record.dtype)));
    if (auto error = readWords(record, localStart, count, target)) {
        return error;
    }
    decodeBox(record.dtype, words, count, target, out);
    if (isScaled(record.dtype)) {
        record.scales.apply(record.localShape, localStart, count, out);
    }
    return std::nullopt;
}

std::optional<Diagnostic> Hdf5Reader::readWords(const TensorRecord& record,
                                                std::span<const std::int64_t> localStart,
                                                std::span<const std::int64_t> count,
                                                std::uint8_t* target) {
    const auto fail = [&record, &localStart, &count](const QString& problem) {
        Diagnostic d;
        d.severity = Severity::Error;
        d.file = record.file;
        d.dataset = record.dataset;
        d.tensor = record.key.toString();
        d.message =
            QStringLiteral("cannot read box %1: %2").arg(boxText(localStart, count), problem);
        hdf5::separateLibraryWords(d);
        return std::optional(d);
    };
    if (auto problem = boxProblem(record.localShape, localStart, count)) {
        return fail(*problem);
    }
    std::size_t elements = 1;
    for (const auto c : count) {
        elements *= static_cast<std::size_t>(c);
    }
    if (elements == 0) {
        return std::nullopt;
    }

    const auto wordBytes = static_cast<std::size_t>(storageBytes(record.dtype));
    const StoredBox words = storedBox(record.dtype, record.localShape, localStart, count);
    std::optional<QString> problem;
    bool done = false;
    // At the offset the index found, while the file is as it was indexed: no HDF5 at all.
    if (record.dataOffset && record.fileStamp) {
        DatasetLayout layout;
        layout.dims.assign(words.shape.begin(), words.shape.end());
        layout.rawOffset = record.dataOffset;
        const BoxRuns box = boxRuns(layout.dims, words.count);
        if (box.runs == 1 || box.runLength * wordBytes >= kMinDirectRunBytes) {
            const auto plain = impl_->plainFile(record.file, *record.fileStamp);
            if (plain && plain->asIndexed) {
                problem = readDirect(plain->fd, plain->bytes, layout, wordBytes, words.start,
                                     words.count, box, target);
                done = true;
            }
        }
    }
    if (!done && hdf5Isolated()) {
        ReadRequest request;
        request.file = record.file;
        request.dataset = record.dataset;
        request.dtype = record.dtype;
        request.localShape = record.localShape;
        request.start.assign(localStart.begin(), localStart.end());
        request.count.assign(count.begin(), count.end());
        problem = readStoredIsolated(request, target, impl_->cancel);
    } else if (!done) {
        problem = readStored(record, localStart, count, target);
    }
    if (problem) {
        return fail(*problem);
    }
    return std::nullopt;
}

std::optional<QString> Hdf5Reader::readStored(const TensorRecord& record,
                                              std::span<const std::int64_t> localStart,
                                              std::span<const std::int64_t> count,
                                              std::uint8_t* target, Hdf5Trail* trail) {
    hdf5::silenceErrors();
    if (auto problem = boxProblem(record.localShape, localStart, count)) {
        return problem;
    }
    const std::size_t rank = record.localShape.size();
    const auto wordBytes = static_cast<std::size_t>(storageBytes(record.dtype));
    const StoredBox words = storedBox(record.dtype, record.localShape, localStart, count);
    const QByteArray datasetPath = record.dataset.toUtf8();
    const std::string_view datasetName(datasetPath.constData(), datasetPath.size());
    QString problem;
    markStep(trail, Hdf5Step::OpeningFile);
    const auto file = impl_->file(record.file, &problem);
    if (!file) {
        return problem;
    }
    hdf5::Dataset dataset;
    const DatasetLayout* layout = nullptr;
    {
        const std::lock_guard lock(file->mutex);
        auto known = file->layouts.find(record.dataset);
        if (known == file->layouts.end()) {
            markStep(trail, Hdf5Step::OpeningDataset, datasetName);
            dataset = openInsideTheFile(file->file.get(), datasetPath, &problem);
            if (!dataset) {
                return problem;
            }
            markStep(trail, Hdf5Step::LocatingData, datasetName);
            DatasetLayout learned;
            const hdf5::Dataspace space(H5Dget_space(dataset.get()));
            const int ndims = space ? H5Sget_simple_extent_ndims(space.get()) : -1;
            if (ndims >= 0) {
                learned.dims.resize(static_cast<std::size_t>(ndims));
                H5Sget_simple_extent_dims(space.get(), learned.dims.data(), nullptr);
            }
            learned.rawOffset = rawDataOffset(dataset.get(), record.dtype);
            known = file->layouts.emplace(record.dataset, std::move(learned)).first;
        }
        layout = &known->second;  // nodes of an unordered_map stay put
    }
    bool sameShape = layout->dims.size() == rank;
    for (std::size_t d = 0; sameShape && d < rank; ++d) {
        sameShape = static_cast<std::int64_t>(layout->dims[d]) == words.shape[d];
    }
    if (!sameShape) {
        return QStringLiteral("the dataset's shape changed since it was indexed");
    }

    markStep(trail, Hdf5Step::ReadingData, datasetName);
    const BoxRuns box = boxRuns(layout->dims, words.count);
    if (layout->rawOffset && file->fd >= 0 &&
        (box.runs == 1 || box.runLength * wordBytes >= kMinDirectRunBytes)) {
        return readDirect(file->fd, file->bytes, *layout, wordBytes, words.start, words.count, box,
                          target);
    }
    if (!dataset) {
        markStep(trail, Hdf5Step::OpeningDataset, datasetName);
        dataset = openInsideTheFile(file->file.get(), datasetPath, &problem);
        if (!dataset) {
            return problem;
        }
        markStep(trail, Hdf5Step::ReadingData, datasetName);
    }
    return readThroughHdf5(dataset.get(), storedMemoryType(record.dtype), rank, words.start,
                           words.count, target);
}

}  // namespace ttrace
