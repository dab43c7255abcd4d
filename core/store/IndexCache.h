#pragma once

#include <QString>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "trace/TensorRecord.h"

struct sqlite3;

namespace ttrace {

// SQLite cache of the per-file tensor index, so that re-opening an unchanged trace set does
// not re-read every HDF5 attribute. An entry is valid while the file's path, size and
// modification time are unchanged. Thread-safe.
class IndexCache {
public:
    // Opens (creating if needed) the database at `path`; on failure returns null and sets
    // `error` to a message naming the path.
    static std::unique_ptr<IndexCache> open(const QString& path, QString* error);
    ~IndexCache();

    // The records of `file` as indexed before, or nullopt when absent or stale.
    std::optional<std::vector<TensorRecord>> lookup(const QString& file, qint64 size,
                                                    qint64 mtimeNs);
    // Replaces the entry of `file` (one transaction).
    bool store(const QString& file, qint64 size, qint64 mtimeNs,
               const std::vector<TensorRecord>& records);

private:
    explicit IndexCache(sqlite3* db);
    sqlite3* db_;
    std::mutex mutex_;
};

}  // namespace ttrace
