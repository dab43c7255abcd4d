#pragma once

#include <QByteArray>
#include <QString>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

// A thin RAII layer over the sqlite3 C API: owned handles, prepared statements and
// transactions that roll back unless committed. Errors are returned as text, never thrown.
namespace ttrace::sqlite {

struct DatabaseCloser {
    void operator()(sqlite3* db) const;
};
using Database = std::unique_ptr<sqlite3, DatabaseCloser>;

// Opens (creating) the database at `path` in WAL mode with a busy timeout and foreign keys on,
// and checks that it really is a database. Null and `error` naming the path on failure. With
// `setAside`, a file that is not a database or whose header is damaged is renamed
// `<path>.damaged-<UTC time>` (with its -wal and -shm files) and a new database is started
// in its place; `setAside` then says so, once, for the caller to warn about.
Database openDatabase(const QString& path, QString* error, QString* setAside = nullptr);

QString lastError(sqlite3* db);
// Runs one or more statements without results.
bool exec(sqlite3* db, const char* sql, QString* error);

class Statement {
public:
    Statement(sqlite3* db, const char* sql);
    ~Statement();
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;

    bool ok() const { return stmt_ != nullptr; }
    // True after a failed bind or step, until reset().
    bool failed() const { return failed_; }
    // The last failure's message; kept after reset() so that callers can report it.
    QString error() const { return error_; }

    // Parameters are 1-based, as in SQLite.
    void bindNull(int index);
    void bindInt(int index, std::int64_t value);
    // Every double comes back bit for bit: finite values and infinities as REAL, NaN (which
    // SQLite would turn into NULL) as its 8-byte pattern. Columns must have no type affinity.
    void bindDouble(int index, double value);
    void bindOptionalDouble(int index, const std::optional<double>& value);
    void bindText(int index, const QString& value);
    // An array of doubles as one BLOB of their little-endian patterns, read back by doubles().
    void bindDoubles(int index, std::span<const double> values);

    // Steps once: true while a row is available; false when done or on error (see error()).
    bool step();
    // Steps to the end and resets for the next binding; false on error (see error()).
    bool run();
    void reset();

    // Columns are 0-based, as in SQLite.
    bool isNull(int column) const;
    std::int64_t integer(int column) const;
    double real(int column) const;
    std::optional<double> optionalReal(int column) const;
    QString text(int column) const;
    // A bindDoubles() column; nullopt when it is not a whole number of doubles.
    std::optional<std::vector<double>> doubles(int column) const;

private:
    void fail();

    sqlite3* db_;
    sqlite3_stmt* stmt_ = nullptr;
    bool failed_ = false;
    QString error_;
};

// Begins on construction; rolls back on destruction unless commit() succeeded. A write
// transaction (BEGIN IMMEDIATE) takes the write lock at once, so that it never fails halfway
// on a lock another writer holds; a read transaction (BEGIN) takes none and, in WAL mode,
// runs beside writers and other readers.
class Transaction {
public:
    enum class Kind { Read, Write };
    explicit Transaction(sqlite3* db, Kind kind = Kind::Write);
    ~Transaction();
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;

    bool ok() const { return active_; }
    QString error() const { return error_; }
    bool commit();

private:
    sqlite3* db_;
    bool active_ = false;
    QString error_;
};

}  // namespace ttrace::sqlite
