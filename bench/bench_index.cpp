// Time to open (index) a distributed trace set as the checker does (TraceCatalog): without the
// cache (every record held in memory), when filling the cache, and when the cache holds every
// rank file (the records stay there), indexing THREADS rank files at once (default: the
// checker's, one). Prints one JSON line. Usage: bench_index FOLDER CACHE_DIR [THREADS]
#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTextStream>

#include "store/IndexCache.h"
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
    auto timeOpen = [&](IndexCache* indexCache, qsizetype* records) {
        QElapsedTimer timer;
        timer.start();
        OpenOptions options;
        options.cache = indexCache;
        options.threads = threads;
        const TraceCatalog catalog = TraceCatalog::open(args[1], options);
        *records = static_cast<qsizetype>(catalog.datasetCount());
        return static_cast<double>(timer.nsecsElapsed()) / 1e9;
    };
    qsizetype records = 0;
    const double uncached = timeOpen(nullptr, &records);
    const double filling = timeOpen(cache.get(), &records);
    const double cached = timeOpen(cache.get(), &records);
    out << QJsonDocument(QJsonObject{{QStringLiteral("datasets"), records},
                                     {QStringLiteral("threads"), threads},
                                     {QStringLiteral("uncached_s"), uncached},
                                     {QStringLiteral("filling_cache_s"), filling},
                                     {QStringLiteral("cached_s"), cached}})
               .toJson(QJsonDocument::Compact)
        << '\n';
    return 0;
}
