#include "trace/Hdf5Reader.h"

#include <QStringList>
#include <list>
#include <mutex>
#include <utility>
#include <vector>

#include "trace/Hdf5Handles.h"

namespace ttrace {

namespace {

QString boxText(std::span<const std::int64_t> start, std::span<const std::int64_t> count) {
    QStringList parts;
    for (std::size_t d = 0; d < start.size() && d < count.size(); ++d) {
        parts << QStringLiteral("%1:%2").arg(start[d]).arg(start[d] + count[d]);
    }
    return QLatin1Char('[') + parts.join(QStringLiteral(", ")) + QLatin1Char(']');
}

hid_t memoryType(DType dtype) {
    switch (storageBytes(dtype)) {
        case 4:
            return H5T_NATIVE_FLOAT;
        case 2:
            return H5T_NATIVE_UINT16;
        default:
            return H5T_NATIVE_UINT8;
    }
}

}  // namespace

struct Hdf5Reader::Impl {
    using SharedFile = std::shared_ptr<hdf5::File>;

    std::size_t maxOpenFiles;
    std::mutex mutex;
    // Most recently used first. Files are shared so that evicting one that another thread is
    // still reading from only closes it once that read is done.
    std::list<std::pair<QString, SharedFile>> open;

    SharedFile file(const QString& path, QString* problem) {
        const std::lock_guard lock(mutex);
        for (auto it = open.begin(); it != open.end(); ++it) {
            if (it->first == path) {
                open.splice(open.begin(), open, it);
                return open.front().second;
            }
        }
        QString error;
        auto handle = std::make_shared<hdf5::File>(hdf5::openReadOnly(path, &error));
        if (!handle->valid()) {
            *problem = QStringLiteral("cannot open the file: ") + error;
            return nullptr;
        }
        open.emplace_front(path, handle);
        while (open.size() > maxOpenFiles) {
            open.pop_back();
        }
        return handle;
    }
};

Hdf5Reader::Hdf5Reader(int maxOpenFiles) : impl_(std::make_unique<Impl>()) {
    impl_->maxOpenFiles = static_cast<std::size_t>(std::max(1, maxOpenFiles));
}

Hdf5Reader::~Hdf5Reader() = default;

std::optional<Diagnostic> Hdf5Reader::read(const TensorRecord& record,
                                           std::span<const std::int64_t> localStart,
                                           std::span<const std::int64_t> count, float* out) {
    hdf5::silenceErrors();
    const auto fail = [&record, &localStart, &count](const QString& problem) {
        Diagnostic d;
        d.severity = Severity::Error;
        d.file = record.file;
        d.dataset = record.dataset;
        d.tensor = record.key.toString();
        d.message =
            QStringLiteral("cannot read box %1: %2").arg(boxText(localStart, count), problem);
        return std::optional(d);
    };

    const std::size_t rank = record.localShape.size();
    if (localStart.size() != rank || count.size() != rank) {
        return fail(QStringLiteral("the box has %1 dimensions but the dataset has %2")
                        .arg(std::max(localStart.size(), count.size()))
                        .arg(rank));
    }
    std::size_t elements = 1;
    for (std::size_t d = 0; d < rank; ++d) {
        if (localStart[d] < 0 || count[d] < 0 || localStart[d] + count[d] > record.localShape[d]) {
            return fail(QStringLiteral("outside the dataset's shape in dimension %1 (extent %2)")
                            .arg(d)
                            .arg(record.localShape[d]));
        }
        elements *= static_cast<std::size_t>(count[d]);
    }
    if (elements == 0) {
        return std::nullopt;
    }

    QString problem;
    const auto file = impl_->file(record.file, &problem);
    if (!file) {
        return fail(problem);
    }
    const QByteArray datasetPath = record.dataset.toUtf8();
    const hdf5::Dataset dataset(H5Dopen2(file->get(), datasetPath.constData(), H5P_DEFAULT));
    if (!dataset) {
        return fail(QStringLiteral("cannot open the dataset: ") + hdf5::takeErrorText());
    }
    const hdf5::Dataspace fileSpace(H5Dget_space(dataset.get()));
    if (!fileSpace || H5Sget_simple_extent_ndims(fileSpace.get()) != static_cast<int>(rank)) {
        return fail(QStringLiteral("the dataset's shape changed since it was indexed"));
    }
    std::vector<hsize_t> dims(rank);
    H5Sget_simple_extent_dims(fileSpace.get(), dims.data(), nullptr);
    for (std::size_t d = 0; d < rank; ++d) {
        if (static_cast<std::int64_t>(dims[d]) != record.localShape[d]) {
            return fail(QStringLiteral("the dataset's shape changed since it was indexed"));
        }
    }

    hdf5::Dataspace memorySpace;
    if (rank == 0) {
        memorySpace = hdf5::Dataspace(H5Screate(H5S_SCALAR));
    } else {
        const std::vector<hsize_t> start(localStart.begin(), localStart.end());
        const std::vector<hsize_t> extent(count.begin(), count.end());
        if (H5Sselect_hyperslab(fileSpace.get(), H5S_SELECT_SET, start.data(), nullptr,
                                extent.data(), nullptr) < 0) {
            return fail(QStringLiteral("cannot select the box: ") + hdf5::takeErrorText());
        }
        memorySpace =
            hdf5::Dataspace(H5Screate_simple(static_cast<int>(rank), extent.data(), nullptr));
    }
    if (!memorySpace) {
        return fail(QStringLiteral("cannot describe the box: ") + hdf5::takeErrorText());
    }

    if (record.dtype == DType::F32) {
        if (H5Dread(dataset.get(), H5T_NATIVE_FLOAT, memorySpace.get(), fileSpace.get(),
                    H5P_DEFAULT, out) < 0) {
            return fail(hdf5::takeErrorText());
        }
        return std::nullopt;
    }
    // Half-precision and fp8 words are read as integers and decoded here, exactly.
    // A per-thread buffer that only grows: allocating (and zeroing) one per block cost more
    // than decoding it.
    thread_local std::vector<std::uint8_t> stored;
    const std::size_t storedBytes = elements * static_cast<std::size_t>(storageBytes(record.dtype));
    if (stored.size() < storedBytes) {
        stored.resize(storedBytes);
    }
    if (H5Dread(dataset.get(), memoryType(record.dtype), memorySpace.get(), fileSpace.get(),
                H5P_DEFAULT, stored.data()) < 0) {
        return fail(hdf5::takeErrorText());
    }
    decode(record.dtype, stored.data(), out, elements, record.scaleInv);
    return std::nullopt;
}

}  // namespace ttrace
