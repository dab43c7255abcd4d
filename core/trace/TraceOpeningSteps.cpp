#include "trace/TraceOpeningSteps.h"

#include <hdf5.h>
#include <sys/stat.h>

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QStringList>
#include <algorithm>
#include <cerrno>
#include <mutex>
#include <thread>

#include "trace/IsolatedHdf5.h"

namespace ttrace {

TraceSet openManifestOnly(const QString& folder) {
    TraceSet set;
    set.folder = QDir(folder).absolutePath();
    if (const QFileInfo info(set.folder); !info.isDir()) {
        set.diagnostics.push_back(fileDiagnostic(
            Severity::Error, set.folder,
            info.exists() ? QStringLiteral("is not a folder") : QStringLiteral("does not exist")));
        return set;
    }
    auto manifestResult = readManifest(set.folder);
    set.diagnostics = std::move(manifestResult.diagnostics);
    if (manifestResult.manifest) {
        set.manifest = std::move(*manifestResult.manifest);
    }
    return set;
}

void warnAboutUnlistedFiles(TraceSet& set) {
    for (const auto& file : unlistedRankFiles(set.folder, set.manifest)) {
        set.diagnostics.push_back(
            fileDiagnostic(Severity::Warning, QDir(set.folder).absoluteFilePath(file),
                           QStringLiteral("is not listed in manifest.json and is ignored")));
    }
}

QString rankFilePath(const TraceSet& set, const RankEntry& entry) {
    return QDir(set.folder).absoluteFilePath(entry.file);
}

bool forEachRankFile(const TraceSet& set, const OpenOptions& options,
                     const std::function<void(std::size_t i, const QString& path)>& indexFile) {
    const auto& ranks = set.manifest.ranks;
    std::mutex progressMutex;
    std::size_t next = 0;
    std::size_t done = 0;
    bool stop = false;
    // The next file to index, or nullopt when there is none or the open was cancelled.
    const auto take = [&]() -> std::optional<std::size_t> {
        const std::lock_guard lock(progressMutex);
        if (stop || next >= ranks.size()) {
            return std::nullopt;
        }
        if ((options.cancel && options.cancel->load()) ||
            (options.progress && !options.progress(static_cast<double>(done) / ranks.size()))) {
            stop = true;
            return std::nullopt;
        }
        return next++;
    };
    const auto work = [&] {
        while (const auto i = take()) {
            const QString path = rankFilePath(set, ranks[*i]);
            if (isRegularFile(path)) {
                indexFile(*i, path);
            }
            const std::lock_guard lock(progressMutex);
            ++done;
        }
    };
    std::size_t threads = options.threads > 0 ? static_cast<std::size_t>(options.threads)
                          : hdf5Isolated()    ? std::thread::hardware_concurrency()
                                              : 1;
    // In this process, a library built without thread safety gets one thread.
    hbool_t threadSafe = false;
    if (!hdf5Isolated() && (H5is_library_threadsafe(&threadSafe) < 0 || !threadSafe)) {
        threads = 1;
    }
    threads = std::clamp<std::size_t>(threads, 1, std::max<std::size_t>(1, ranks.size()));
    std::vector<std::thread> workers;
    for (std::size_t t = 1; t < threads; ++t) {
        workers.emplace_back(work);
    }
    work();
    for (auto& worker : workers) {
        worker.join();
    }
    // Cancelled inside the last files too: their indexes are partial.
    return !stop && !(options.cancel && options.cancel->load());
}

namespace {

// Why `path` is no rank file to read, in words: missing, a loop of symbolic links, a directory,
// a FIFO (which HDF5 would wait on forever), ...
QString whyNotARankFile(const QString& path) {
    const QByteArray native = QFile::encodeName(path);
    struct stat target {};
    if (::stat(native.constData(), &target) != 0) {
        const int error = errno;
        struct stat link {};
        if (error == ELOOP) {
            return QStringLiteral("is a loop of symbolic links");
        }
        if (::lstat(native.constData(), &link) == 0 && S_ISLNK(link.st_mode)) {
            return QStringLiteral("is a symbolic link to %1, which does not exist")
                .arg(QFileInfo(path).symLinkTarget());
        }
        if (error == EACCES) {
            return QStringLiteral("cannot be reached: permission denied");
        }
        return QStringLiteral("is missing");
    }
    if (S_ISDIR(target.st_mode)) {
        return QStringLiteral("is a directory, not a rank file");
    }
    if (S_ISFIFO(target.st_mode)) {
        return QStringLiteral("is a FIFO (named pipe), not a rank file");
    }
    return QStringLiteral("is not a regular file (a socket or a device), not a rank file");
}

}  // namespace

bool isRegularFile(const QString& path) {
    struct stat target {};
    return ::stat(QFile::encodeName(path).constData(), &target) == 0 && S_ISREG(target.st_mode);
}

Diagnostic unusableRankFile(const TraceSet& set, const RankEntry& entry) {
    const QString path = rankFilePath(set, entry);
    return fileDiagnostic(Severity::Error, path,
                          QStringLiteral("rank %1: file %2 %3")
                              .arg(QString::number(entry.rank), entry.file, whyNotARankFile(path)));
}

std::optional<Diagnostic> rankAttributeProblem(const QString& path, const RankEntry& entry,
                                               const RankFileIndex& index) {
    if (!index.fileRank || *index.fileRank == entry.rank) {
        return std::nullopt;
    }
    return fileDiagnostic(Severity::Error, path,
                          QStringLiteral("file attribute 'rank' is %1 but the manifest lists this "
                                         "file as rank %2; its tensors are ignored")
                              .arg(*index.fileRank)
                              .arg(entry.rank));
}

Diagnostics offMeshPlacements(const std::vector<QString>& placementAxes, const Manifest& manifest,
                              const QString& path, const QString& dataset, const TensorKey& key) {
    const auto& axes = manifest.meshAxes;
    QStringList offMesh;
    for (const auto& axis : placementAxes) {
        if (std::find(axes.begin(), axes.end(), axis) == axes.end()) {
            offMesh << QLatin1Char('\'') + axis + QLatin1Char('\'');
        }
    }
    if (offMesh.isEmpty()) {
        return {};
    }
    // One line however many: a damaged attribute can name thousands.
    constexpr qsizetype kNamed = 5;
    const qsizetype count = offMesh.size();
    QString named = offMesh.mid(0, kNamed).join(QStringLiteral(", "));
    if (count > kNamed) {
        named += QStringLiteral(" and %1 more").arg(count - kNamed);
    }
    Diagnostic d = fileDiagnostic(
        Severity::Error, path,
        count == 1 ? QStringLiteral("attribute 'placements' names the axis %1, which is not an "
                                    "axis of the manifest's mesh")
                         .arg(named)
                   : QStringLiteral("attribute 'placements' names the axes %1, which are not "
                                    "axes of the manifest's mesh")
                         .arg(named));
    d.dataset = dataset;
    d.tensor = key.toString();
    return {d};
}

Diagnostic noReadableTensor(const QString& folder) {
    return fileDiagnostic(Severity::Error, folder,
                          QStringLiteral("the trace set holds no readable tensor (no rank file "
                                         "could be indexed, or their /tensors groups are empty)"));
}

void sortByRankAndSeq(std::vector<TensorRecord>& records) {
    std::stable_sort(records.begin(), records.end(),
                     [](const TensorRecord& a, const TensorRecord& b) {
                         return a.rank != b.rank ? a.rank < b.rank : a.seq < b.seq;
                     });
}

}  // namespace ttrace
