// libFuzzer: any bytes as the index cache's SQLite database. Opening it keeps it or sets it
// aside; every record read from it decodes or is refused, never crashes.
#include <QDir>
#include <QTemporaryDir>
#include <cstdint>
#include <set>

#include "FuzzInput.h"
#include "store/IndexCache.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // A new folder each time: a database that is set aside is renamed beside it.
    const QTemporaryDir folder;
    const QString path = folder.filePath(QStringLiteral("index.sqlite"));
    ttrace::fuzz::writeFile(path, data, size);
    QString error;
    const auto cache = ttrace::IndexCache::open(path, &error);
    if (!cache) {
        return 0;
    }
    std::set<std::pair<QString, ttrace::TensorKey>> tensors;
    static_cast<void>(
        cache->forEachRecordUnder(QString(), [&](const ttrace::IndexCache::RecordOutline& r) {
            if (tensors.size() < 64) {
                tensors.emplace(QFileInfo(r.path).path(), r.key);
            }
        }));
    for (const auto& [where, key] : tensors) {
        static_cast<void>(cache->recordsUnder(where, key));
    }
    return 0;
}
