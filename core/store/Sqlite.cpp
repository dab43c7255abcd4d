#include "store/Sqlite.h"

#include <sqlite3.h>

#include <QDateTime>
#include <QFile>
#include <bit>
#include <cmath>
#include <cstring>

namespace ttrace::sqlite {

namespace {

// SQLITE_TRANSIENT without the old-style cast of its macro: SQLite copies the bound bytes.
const sqlite3_destructor_type kTransient =
    reinterpret_cast<sqlite3_destructor_type>(static_cast<std::intptr_t>(-1));

constexpr int kBusyTimeoutMs = 10000;

}  // namespace

void DatabaseCloser::operator()(sqlite3* db) const {
    sqlite3_close_v2(db);
}

QString lastError(sqlite3* db) {
    return db ? QString::fromUtf8(sqlite3_errmsg(db)) : QStringLiteral("out of memory");
}

namespace {

// Whether SQLite's last error on `db` says the file is not a (sound) database.
bool damaged(sqlite3* db) {
    const int code = db ? (sqlite3_errcode(db) & 0xff) : SQLITE_OK;
    return code == SQLITE_NOTADB || code == SQLITE_CORRUPT;
}

// Renames the database at `path` and its -wal and -shm files out of the way; the new name,
// or empty when the rename failed.
QString setDatabaseAside(const QString& path) {
    const QString aside =
        path + QStringLiteral(".damaged-") +
        QDateTime::currentDateTimeUtc().toString(QStringLiteral("yyyyMMddThhmmss"));
    if (!QFile::rename(path, aside)) {
        return {};
    }
    for (const char* suffix : {"-wal", "-shm"}) {
        const QString companion = path + QLatin1String(suffix);
        if (QFile::exists(companion)) {
            QFile::rename(companion, aside + QLatin1String(suffix));
        }
    }
    return aside;
}

// openDatabase() without setting aside; `isDamaged` says whether a failure was SQLite finding
// no sound database in the file.
Database openOnce(const QString& path, QString* error, bool* isDamaged) {
    const auto fail = [&](const QString& reason) {
        if (error) {
            *error = QStringLiteral("Cannot open database %1: %2").arg(path, reason);
        }
        return Database();
    };
    if (path.isEmpty()) {
        return fail(QStringLiteral("no path given"));
    }
    sqlite3* raw = nullptr;
    const int rc = sqlite3_open_v2(
        path.toUtf8().constData(), &raw,
        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
    Database db(raw);
    // Set from SQLite's last error before any failure closes the connection.
    const auto failHere = [&](const QString& reason) {
        *isDamaged = damaged(raw);
        return fail(reason);
    };
    if (rc != SQLITE_OK) {
        return failHere(lastError(raw));
    }
    sqlite3_busy_timeout(raw, kBusyTimeoutMs);
    sqlite3_extended_result_codes(raw, 1);

    // The first statement that reads the file is where a non-database file is noticed.
    Statement wal(raw, "PRAGMA journal_mode=WAL");
    if (!wal.ok()) {
        return failHere(wal.error());
    }
    if (!wal.step()) {
        return failHere(wal.error().isEmpty() ? QStringLiteral("cannot set the journal mode")
                                              : wal.error());
    }
    const QString mode = wal.text(0);
    if (mode.compare(QLatin1String("wal"), Qt::CaseInsensitive) != 0) {
        return failHere(QStringLiteral("cannot switch to WAL mode (journal mode is %1)").arg(mode));
    }
    QString pragmaError;
    if (!exec(raw, "PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL;", &pragmaError)) {
        return failHere(pragmaError);
    }
    return db;
}

}  // namespace

Database openDatabase(const QString& path, QString* error, QString* setAside) {
    bool isDamaged = false;
    QString reason;
    Database db = openOnce(path, &reason, &isDamaged);
    if (db || !isDamaged || !setAside) {
        if (!db && error) {
            *error = reason;
        }
        return db;
    }
    // Not a database, or a damaged one: kept for a look, out of the way, and started anew.
    const QString aside = setDatabaseAside(path);
    if (aside.isEmpty()) {
        if (error) {
            *error = reason;
        }
        return {};
    }
    *setAside = QStringLiteral(
                    "%1 is not a sound database; it was set aside as %2 and a new "
                    "one started")
                    .arg(path, aside);
    return openOnce(path, error, &isDamaged);
}

bool exec(sqlite3* db, const char* sql, QString* error) {
    char* message = nullptr;
    const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &message);
    if (rc == SQLITE_OK) {
        return true;
    }
    if (error) {
        *error = message ? QString::fromUtf8(message) : lastError(db);
    }
    sqlite3_free(message);
    return false;
}

Statement::Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) {
        fail();
        sqlite3_finalize(stmt_);
        stmt_ = nullptr;
    }
}

Statement::~Statement() {
    sqlite3_finalize(stmt_);
}

void Statement::bindNull(int index) {
    if (sqlite3_bind_null(stmt_, index) != SQLITE_OK) {
        fail();
    }
}

void Statement::bindInt(int index, std::int64_t value) {
    if (sqlite3_bind_int64(stmt_, index, value) != SQLITE_OK) {
        fail();
    }
}

void Statement::bindDouble(int index, double value) {
    int rc;
    if (std::isnan(value)) {
        // Little-endian bytes of the pattern, so that the file reads the same everywhere.
        const auto bits = std::bit_cast<std::uint64_t>(value);
        unsigned char bytes[8];
        for (int i = 0; i < 8; ++i) {
            bytes[i] = static_cast<unsigned char>(bits >> (8 * i));
        }
        rc = sqlite3_bind_blob(stmt_, index, bytes, 8, kTransient);
    } else {
        rc = sqlite3_bind_double(stmt_, index, value);
    }
    if (rc != SQLITE_OK) {
        fail();
    }
}

void Statement::bindOptionalDouble(int index, const std::optional<double>& value) {
    if (value) {
        bindDouble(index, *value);
    } else {
        bindNull(index);
    }
}

void Statement::bindDoubles(int index, std::span<const double> values) {
    std::vector<unsigned char> bytes(values.size() * 8);
    for (std::size_t i = 0; i < values.size(); ++i) {
        const auto bits = std::bit_cast<std::uint64_t>(values[i]);
        for (int b = 0; b < 8; ++b) {
            bytes[i * 8 + static_cast<std::size_t>(b)] =
                static_cast<unsigned char>(bits >> (8 * b));
        }
    }
    if (sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), kTransient) != SQLITE_OK) {
        fail();
    }
}

void Statement::bindText(int index, const QString& value) {
    const QByteArray utf8 = value.toUtf8();
    if (sqlite3_bind_text(stmt_, index, utf8.constData(), static_cast<int>(utf8.size()),
                          kTransient) != SQLITE_OK) {
        fail();
    }
}

bool Statement::step() {
    if (!stmt_ || failed_) {
        return false;
    }
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) {
        return true;
    }
    if (rc != SQLITE_DONE) {
        fail();
    }
    return false;
}

bool Statement::run() {
    while (step()) {
    }
    const bool succeeded = !failed_;
    reset();
    return succeeded;
}

void Statement::reset() {
    sqlite3_reset(stmt_);
    failed_ = !stmt_;
}

void Statement::fail() {
    failed_ = true;
    error_ = lastError(db_);
}

bool Statement::isNull(int column) const {
    return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

std::int64_t Statement::integer(int column) const {
    return sqlite3_column_int64(stmt_, column);
}

double Statement::real(int column) const {
    switch (sqlite3_column_type(stmt_, column)) {
        case SQLITE_BLOB: {
            if (sqlite3_column_bytes(stmt_, column) != 8) {
                return std::nan("");
            }
            const auto* bytes =
                static_cast<const unsigned char*>(sqlite3_column_blob(stmt_, column));
            std::uint64_t bits = 0;
            for (int i = 0; i < 8; ++i) {
                bits |= static_cast<std::uint64_t>(bytes[i]) << (8 * i);
            }
            return std::bit_cast<double>(bits);
        }
        case SQLITE_NULL:
            return std::nan("");
        default:
            return sqlite3_column_double(stmt_, column);
    }
}

std::optional<double> Statement::optionalReal(int column) const {
    if (isNull(column)) {
        return std::nullopt;
    }
    return real(column);
}

QString Statement::text(int column) const {
    const auto* data = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
    return QString::fromUtf8(data, sqlite3_column_bytes(stmt_, column));
}

std::optional<std::vector<double>> Statement::doubles(int column) const {
    const auto size = static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column));
    const auto* bytes = static_cast<const unsigned char*>(sqlite3_column_blob(stmt_, column));
    if (size % 8 != 0 || (size > 0 && bytes == nullptr)) {
        return std::nullopt;
    }
    std::vector<double> values(size / 8);
    for (std::size_t i = 0; i < values.size(); ++i) {
        std::uint64_t bits = 0;
        for (std::size_t b = 0; b < 8; ++b) {
            bits |= static_cast<std::uint64_t>(bytes[i * 8 + b]) << (8 * b);
        }
        values[i] = std::bit_cast<double>(bits);
    }
    return values;
}

Transaction::Transaction(sqlite3* db, Kind kind) : db_(db) {
    active_ = exec(db, kind == Kind::Write ? "BEGIN IMMEDIATE" : "BEGIN", &error_);
}

Transaction::~Transaction() {
    if (active_) {
        exec(db_, "ROLLBACK", nullptr);
    }
}

bool Transaction::commit() {
    if (!active_) {
        return false;
    }
    if (!exec(db_, "COMMIT", &error_)) {
        return false;  // still active: the destructor rolls back
    }
    active_ = false;
    return true;
}

}  // namespace ttrace::sqlite
