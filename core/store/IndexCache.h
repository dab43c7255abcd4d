#pragma once

#include <QString>
#include <functional>
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
    // `error` to a message naming the path. A file there that is no sound database is set
    // aside and a new one started; `setAside` then says so.
    static std::unique_ptr<IndexCache> open(const QString& path, QString* error,
                                            QString* setAside = nullptr);
    ~IndexCache();
    IndexCache(const IndexCache&) = delete;
    IndexCache& operator=(const IndexCache&) = delete;

    // The index of `file` as stored before, or nullopt when absent, stale or unreadable.
    std::optional<RankFileIndex> lookup(const QString& file, qint64 size, qint64 mtimeNs);
    // Only the part of that index about the tensor `key` (onlyTensor(), RankFileIndex.h),
    // read without decoding the file's other records.
    std::optional<RankFileIndex> lookupTensor(const QString& file, qint64 size, qint64 mtimeNs,
                                              const TensorKey& key);
    // The entry of `file` without its records: whether HDF5 opened it, its own attributes
    // and the problems found indexing it.
    std::optional<RankFileIndex> lookupFile(const QString& file, qint64 size, qint64 mtimeNs);

    // What the list of a trace folder's tensors needs of one cached record (TraceCatalog),
    // decoded without its ranges.
    struct RecordOutline {
        QString path;
        QString dataset;
        TensorKey key;
        std::int64_t seq = 0;
        std::vector<std::int64_t> globalShape;
        std::int64_t storedBytes = 0;
        std::vector<QString> placementAxes;  // the mesh axis of each placement
    };
    // Calls `visit` with every record cached under `folder` (paths starting with folder + '/'),
    // in (path, ordinal) order, in one read transaction; false when the cache or a row could
    // not be read. Entries are not checked against the files: the caller knows which are
    // current.
    bool forEachRecordUnder(const QString& folder,
                            const std::function<void(const RecordOutline&)>& visit);
    // Every record of the tensor `key` cached under `folder`, in no particular order, each
    // with its file's path in `file`; nullopt when the cache or a row could not be read.
    std::optional<std::vector<TensorRecord>> recordsUnder(const QString& folder,
                                                          const TensorKey& key);

    // Whether `file` has an entry of this size and modification time; reads nothing else.
    bool isCurrent(const QString& file, qint64 size, qint64 mtimeNs);
    // Replaces the entry of `file` (one transaction). False when the database refused it.
    bool store(const QString& file, qint64 size, qint64 mtimeNs, const RankFileIndex& index);

private:
    struct Statements;
    explicit IndexCache(sqlite::Database db);
    // Reads the entry of `file` with `records` (none when null) and `diagnostics`, whose
    // parameters other than the path (?1) are bound. Called with mutex_ held.
    std::optional<RankFileIndex> read(const QString& file, qint64 size, qint64 mtimeNs,
                                      sqlite::Statement* records, sqlite::Statement& diagnostics);
    sqlite::Database db_;
    std::unique_ptr<Statements> statements_;  // declared after db_: finalized before it closes
    std::mutex mutex_;
};

}  // namespace ttrace
