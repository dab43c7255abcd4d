#pragma once

#include <QString>
#include <memory>
#include <mutex>
#include <optional>

#include "store/Sqlite.h"
#include "trace/RankFileIndex.h"

namespace ttrace {

// SQLite cache of the per-file tensor index, so that re-opening an unchanged trace set does
// not re-read every HDF5 attribute. An entry holds the file's records and the diagnostics
// found while indexing it (a cached re-open must report the same problems), and is valid
// while the file's path, size and modification time are unchanged. Thread-safe; several
// processes may share one database (WAL journal, busy timeout).
class IndexCache {
public:
    // Opens (creating if needed) the database at `path`; on failure returns null and sets
    // `error` to a message naming the path.
    static std::unique_ptr<IndexCache> open(const QString& path, QString* error);
    ~IndexCache();
    IndexCache(const IndexCache&) = delete;
    IndexCache& operator=(const IndexCache&) = delete;

    // The index of `file` as stored before, or nullopt when absent, stale or unreadable.
    std::optional<RankFileIndex> lookup(const QString& file, qint64 size, qint64 mtimeNs);
    // Only the part of that index about the tensor `key` (onlyTensor(), RankFileIndex.h),
    // read without decoding the file's other records.
    std::optional<RankFileIndex> lookupTensor(const QString& file, qint64 size, qint64 mtimeNs,
                                              const TensorKey& key);
    // Whether `file` has an entry of this size and modification time; reads nothing else.
    bool isCurrent(const QString& file, qint64 size, qint64 mtimeNs);
    // Replaces the entry of `file` (one transaction). False when the database refused it.
    bool store(const QString& file, qint64 size, qint64 mtimeNs, const RankFileIndex& index);

private:
    struct Statements;
    explicit IndexCache(sqlite::Database db);
    // Reads the entry of `file` with `records` and `diagnostics`, whose parameters other than
    // the path (?1) are bound. Called with mutex_ held.
    std::optional<RankFileIndex> read(const QString& file, qint64 size, qint64 mtimeNs,
                                      sqlite::Statement& records, sqlite::Statement& diagnostics);
    sqlite::Database db_;
    std::unique_ptr<Statements> statements_;  // declared after db_: finalized before it closes
    std::mutex mutex_;
};

}  // namespace ttrace
