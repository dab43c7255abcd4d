// Time to open (index) a distributed trace set as the checker does (TraceCatalog): without the
// cache (every record held in memory), when filling the cache, and when the cache holds every
// rank file (the records stay there), indexing THREADS rank files at once (default: the
// checker's, one); then without the cache again with every HDF5 call in worker processes
// (IsolatedHdf5.h; the worker is $TTRACE_HDF5_WORKER), on THREADS and on every core: what the
// isolation costs, in the same process. Prints one JSON line.
// Usage: bench_index FOLDER CACHE_DIR [THREADS]
#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTextStream>
#include <thread>

#include "store/IndexCache.h"
#include "trace/IsolatedHdf5.h"
#include "trace/TraceCatalog.h"

using namespace ttrace;

int main(int argc, char** argv) {
    QCoreApplication app(argc, argv);
    QTextStream out(stdout);
    QTextStream err(stderr);
    const QStringList args = QCoreApplication::arguments();
    const int threads = args.size() == 4 ? args[3].toInt() : OpenOptions{}.threads;
    if (args.size() < 3 || args.size() > 4 || threads < 0) {
        err << "usage: bench_index FOLDER CACHE_DIR [THREADS]\n";
        return 2;
    }
    QDir(args[2]).removeRecursively();
    QDir().mkpath(args[2]);
    QString error;
    auto cache = IndexCache::open(QDir(args[2]).filePath(QStringLiteral("index.sqlite")), &error);
    if (!cache) {
        err << "bench_index: " << error << '\n';
        return 2;
    }
    auto timeOpenOn = [&](int indexThreads, IndexCache* indexCache, qsizetype* records) {
        QElapsedTimer timer;
        timer.start();
        OpenOptions options;
        options.cache = indexCache;
        options.threads = indexThreads;
        const TraceCatalog catalog = TraceCatalog::open(args[1], options);
        *records = static_cast<qsizetype>(catalog.datasetCount());
        return static_cast<double>(timer.nsecsElapsed()) / 1e9;
    };
    auto timeOpen = [&](IndexCache* indexCache, qsizetype* records) {
        return timeOpenOn(threads, indexCache, records);
    };
    qsizetype records = 0;
    const double uncached = timeOpen(nullptr, &records);
    const double filling = timeOpen(cache.get(), &records);
    const double cached = timeOpen(cache.get(), &records);
    QJsonObject result{{QStringLiteral("datasets"), records},
                       {QStringLiteral("threads"), threads},
                       {QStringLiteral("uncached_s"), uncached},
                       {QStringLiteral("filling_cache_s"), filling},
                       {QStringLiteral("cached_s"), cached}};
    if (const auto problem = isolateHdf5ForThisProgram()) {
        err << "bench_index: not isolated: " << *problem << '\n';
    } else {
        qsizetype isolatedRecords = 0;
        result[QStringLiteral("isolated_uncached_s")] = timeOpen(nullptr, &isolatedRecords);
        const int cores = static_cast<int>(std::thread::hardware_concurrency());
        result[QStringLiteral("cores")] = cores;
        result[QStringLiteral("isolated_uncached_all_cores_s")] =
            timeOpenOn(cores, nullptr, &isolatedRecords);
        if (isolatedRecords != records) {
            err << "bench_index: isolated indexing found " << isolatedRecords << " datasets, not "
                << records << '\n';
            return 1;
        }
    }
    out << QJsonDocument(result).toJson(QJsonDocument::Compact) << '\n';
    return 0;
}
