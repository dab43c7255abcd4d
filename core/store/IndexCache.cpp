#include "store/IndexCache.h"

#include <sqlite3.h>

#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>

namespace ttrace {

namespace {

// Bump when the tables or the serialisation change; an older database is then rebuilt.
constexpr int kSchemaVersion = 1;

const char* const kCreateTables = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files(
    path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    opened INTEGER NOT NULL, file_rank INTEGER, format_version TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records(
    path TEXT NOT NULL, ordinal INTEGER NOT NULL, rank INTEGER NOT NULL, dataset TEXT NOT NULL,
    name TEXT NOT NULL, kind TEXT NOT NULL, tensor_index INTEGER NOT NULL,
    iteration INTEGER NOT NULL, micro_batch INTEGER NOT NULL, seq INTEGER NOT NULL,
    layer INTEGER NOT NULL, expert INTEGER NOT NULL, dtype TEXT NOT NULL, scale_inv REAL NOT NULL,
    global_shape TEXT NOT NULL, local_shape TEXT NOT NULL, ranges TEXT NOT NULL,
    placements TEXT NOT NULL, PRIMARY KEY(path, ordinal)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS diagnostics(
    path TEXT NOT NULL, ordinal INTEGER NOT NULL, severity INTEGER NOT NULL, file TEXT NOT NULL,
    dataset TEXT NOT NULL, tensor TEXT NOT NULL, message TEXT NOT NULL,
    PRIMARY KEY(path, ordinal)) WITHOUT ROWID;
)sql";

const char* const kDropTables = R"sql(
DROP TABLE IF EXISTS files; DROP TABLE IF EXISTS records; DROP TABLE IF EXISTS diagnostics;
DELETE FROM meta;
)sql";

// A prepared statement, finalized on scope exit. Values are always bound, never spliced
// into SQL text.
class SqliteStatement {
public:
    SqliteStatement(sqlite3* db, const char* sql) {
        sqlite3_prepare_v2(db, sql, -1, &statement_, nullptr);
    }
    ~SqliteStatement() { sqlite3_finalize(statement_); }
    SqliteStatement(const SqliteStatement&) = delete;
    SqliteStatement& operator=(const SqliteStatement&) = delete;

    void bind(int index, const QString& text) {
        const QByteArray utf8 = text.toUtf8();
        sqlite3_bind_text(statement_, index, utf8.constData(), static_cast<int>(utf8.size()),
                          SQLITE_TRANSIENT);
    }
    void bind(int index, qint64 value) { sqlite3_bind_int64(statement_, index, value); }
    void bind(int index, double value) { sqlite3_bind_double(statement_, index, value); }
    void bindNull(int index) { sqlite3_bind_null(statement_, index); }
    // SQLITE_ROW, SQLITE_DONE or an error code (also when preparing failed).
    int step() { return statement_ ? sqlite3_step(statement_) : SQLITE_ERROR; }
    void reset() {
        sqlite3_reset(statement_);
        sqlite3_clear_bindings(statement_);
    }

    qint64 columnInt64(int column) const { return sqlite3_column_int64(statement_, column); }
    double columnDouble(int column) const { return sqlite3_column_double(statement_, column); }
    bool columnIsNull(int column) const {
        return sqlite3_column_type(statement_, column) == SQLITE_NULL;
    }
    QString columnText(int column) const {
        const auto* text = sqlite3_column_text(statement_, column);
        const int bytes = sqlite3_column_bytes(statement_, column);
        return text ? QString::fromUtf8(reinterpret_cast<const char*>(text), bytes) : QString();
    }

private:
    sqlite3_stmt* statement_ = nullptr;
};

QString compact(const QJsonArray& array) {
    return QString::fromUtf8(QJsonDocument(array).toJson(QJsonDocument::Compact));
}

QString shapeToText(const std::vector<std::int64_t>& shape) {
    QJsonArray array;
    for (const auto extent : shape) {
        array.append(static_cast<qint64>(extent));
    }
    return compact(array);
}

// [[axis, placement], ...] keeps the order of the placements.
QString placementsToText(const std::vector<AxisPlacement>& placements) {
    QJsonArray array;
    for (const auto& p : placements) {
        array.append(QJsonArray{p.axis, p.placement.toString()});
    }
    return compact(array);
}

std::optional<QJsonArray> parseArray(const QString& text) {
    const auto document = QJsonDocument::fromJson(text.toUtf8());
    if (!document.isArray()) {
        return std::nullopt;
    }
    return document.array();
}

std::optional<std::vector<std::int64_t>> shapeFromText(const QString& text) {
    const auto array = parseArray(text);
    if (!array) {
        return std::nullopt;
    }
    std::vector<std::int64_t> shape;
    for (const auto& value : *array) {
        shape.push_back(value.toInteger());
    }
    return shape;
}

std::optional<std::vector<AxisPlacement>> placementsFromText(const QString& text) {
    const auto array = parseArray(text);
    if (!array) {
        return std::nullopt;
    }
    std::vector<AxisPlacement> placements;
    for (const auto& item : *array) {
        const auto pair = item.toArray();
        const auto placement = Placement::parse(pair.at(1).toString());
        if (pair.size() != 2 || !placement) {
            return std::nullopt;
        }
        placements.push_back({pair.at(0).toString(), *placement});
    }
    return placements;
}

// Ends an open transaction on scope exit unless committed.
class Transaction {
public:
    Transaction(sqlite3* db, const char* begin) : db_(db) {
        active_ = sqlite3_exec(db_, begin, nullptr, nullptr, nullptr) == SQLITE_OK;
    }
    ~Transaction() {
        if (active_) {
            sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
        }
    }
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    bool active() const { return active_; }
    bool commit() {
        if (!active_) {
            return false;
        }
        active_ = false;
        if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
            sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
            return false;
        }
        return true;
    }

private:
    sqlite3* db_;
    bool active_ = false;
};

bool ensureSchema(sqlite3* db, QString* error) {
    Transaction transaction(db, "BEGIN IMMEDIATE");
    if (!transaction.active() ||
        sqlite3_exec(db, kCreateTables, nullptr, nullptr, nullptr) != SQLITE_OK) {
        *error = QString::fromUtf8(sqlite3_errmsg(db));
        return false;
    }
    int version = 0;
    {
        SqliteStatement select(db, "SELECT value FROM meta WHERE key = 'schema_version'");
        if (select.step() == SQLITE_ROW) {
            version = select.columnText(0).toInt();
        }
    }
    if (version != kSchemaVersion) {
        // The cache only saves time: an entry of another schema is simply rebuilt.
        if (sqlite3_exec(db, kDropTables, nullptr, nullptr, nullptr) != SQLITE_OK ||
            sqlite3_exec(db, kCreateTables, nullptr, nullptr, nullptr) != SQLITE_OK) {
            *error = QString::fromUtf8(sqlite3_errmsg(db));
            return false;
        }
        SqliteStatement insert(db, "INSERT INTO meta(key, value) VALUES('schema_version', ?1)");
        insert.bind(1, QString::number(kSchemaVersion));
        if (insert.step() != SQLITE_DONE) {
            *error = QString::fromUtf8(sqlite3_errmsg(db));
            return false;
        }
    }
    if (!transaction.commit()) {
        *error = QString::fromUtf8(sqlite3_errmsg(db));
        return false;
    }
    return true;
}

}  // namespace

void IndexCache::Closer::operator()(sqlite3* db) const {
    sqlite3_close_v2(db);
}

IndexCache::IndexCache(sqlite3* db) : db_(db) {}

IndexCache::~IndexCache() = default;

std::unique_ptr<IndexCache> IndexCache::open(const QString& path, QString* error) {
    QString ignored;
    QString& message = error ? *error : ignored;
    const QFileInfo info(path);
    if (!QDir().mkpath(info.absolutePath())) {
        message = QStringLiteral("cannot create the folder of the index cache %1").arg(path);
        return nullptr;
    }
    sqlite3* raw = nullptr;
    const int rc =
        sqlite3_open_v2(QFile::encodeName(info.absoluteFilePath()).constData(), &raw,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    std::unique_ptr<sqlite3, Closer> db(raw);
    if (rc != SQLITE_OK) {
        message = QStringLiteral("cannot open the index cache %1: %2")
                      .arg(path, raw ? QString::fromUtf8(sqlite3_errmsg(raw))
                                     : QString::fromUtf8(sqlite3_errstr(rc)));
        return nullptr;
    }
    // Another process (the GUI and the CLI) may hold the database briefly.
    sqlite3_busy_timeout(db.get(), 5000);
    sqlite3_exec(db.get(), "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
    sqlite3_exec(db.get(), "PRAGMA synchronous=NORMAL", nullptr, nullptr, nullptr);
    QString schemaError;
    if (!ensureSchema(db.get(), &schemaError)) {
        message = QStringLiteral("cannot set up the index cache %1: %2").arg(path, schemaError);
        return nullptr;
    }
    return std::unique_ptr<IndexCache>(new IndexCache(db.release()));
}

std::optional<RankFileIndex> IndexCache::lookup(const QString& file, qint64 size, qint64 mtimeNs) {
    const std::lock_guard lock(mutex_);
    sqlite3* db = db_.get();
    Transaction transaction(db, "BEGIN");
    if (!transaction.active()) {
        return std::nullopt;
    }
    RankFileIndex index;
    {
        SqliteStatement select(db,
                               "SELECT size, mtime_ns, opened, file_rank, format_version "
                               "FROM files WHERE path = ?1");
        select.bind(1, file);
        if (select.step() != SQLITE_ROW || select.columnInt64(0) != size ||
            select.columnInt64(1) != mtimeNs) {
            return std::nullopt;
        }
        index.opened = select.columnInt64(2) != 0;
        if (!select.columnIsNull(3)) {
            index.fileRank = static_cast<int>(select.columnInt64(3));
        }
        index.formatVersion = select.columnText(4);
    }
    SqliteStatement records(db,
                            "SELECT rank, dataset, name, kind, tensor_index, iteration, "
                            "micro_batch, seq, layer, expert, dtype, scale_inv, global_shape, "
                            "local_shape, ranges, placements FROM records WHERE path = ?1 "
                            "ORDER BY ordinal");
    records.bind(1, file);
    int rc = SQLITE_ROW;
    while ((rc = records.step()) == SQLITE_ROW) {
        TensorRecord record;
        record.file = file;
        record.rank = static_cast<int>(records.columnInt64(0));
        record.dataset = records.columnText(1);
        record.key.name = records.columnText(2);
        const auto kind = tensorKindFromName(records.columnText(3));
        record.key.index = static_cast<int>(records.columnInt64(4));
        record.key.iteration = static_cast<int>(records.columnInt64(5));
        record.key.microBatch = static_cast<int>(records.columnInt64(6));
        record.seq = records.columnInt64(7);
        record.layer = static_cast<int>(records.columnInt64(8));
        record.expert = static_cast<int>(records.columnInt64(9));
        const auto dtype = dtypeFromName(records.columnText(10));
        record.scaleInv = records.columnDouble(11);
        const auto global = shapeFromText(records.columnText(12));
        const auto local = shapeFromText(records.columnText(13));
        auto ranges = ShardRanges::fromJson(records.columnText(14));
        auto placements = placementsFromText(records.columnText(15));
        if (!kind || !dtype || !global || !local || !ranges || !placements) {
            return std::nullopt;  // unreadable entry: index the file again
        }
        record.key.kind = *kind;
        record.dtype = *dtype;
        record.globalShape = *global;
        record.localShape = *local;
        record.ranges = std::move(*ranges);
        record.placements = std::move(*placements);
        index.records.push_back(std::move(record));
    }
    if (rc != SQLITE_DONE) {
        return std::nullopt;
    }
    SqliteStatement diagnostics(db,
                                "SELECT severity, file, dataset, tensor, message FROM diagnostics "
                                "WHERE path = ?1 ORDER BY ordinal");
    diagnostics.bind(1, file);
    while ((rc = diagnostics.step()) == SQLITE_ROW) {
        Diagnostic d;
        const auto severity = diagnostics.columnInt64(0);
        if (severity < 0 || severity > static_cast<int>(Severity::Error)) {
            return std::nullopt;
        }
        d.severity = static_cast<Severity>(severity);
        d.file = diagnostics.columnText(1);
        d.dataset = diagnostics.columnText(2);
        d.tensor = diagnostics.columnText(3);
        d.message = diagnostics.columnText(4);
        index.diagnostics.push_back(std::move(d));
    }
    if (rc != SQLITE_DONE) {
        return std::nullopt;
    }
    transaction.commit();
    return index;
}

bool IndexCache::store(const QString& file, qint64 size, qint64 mtimeNs,
                       const RankFileIndex& index) {
    const std::lock_guard lock(mutex_);
    sqlite3* db = db_.get();
    Transaction transaction(db, "BEGIN IMMEDIATE");
    if (!transaction.active()) {
        return false;
    }
    for (const char* sql :
         {"DELETE FROM records WHERE path = ?1", "DELETE FROM diagnostics WHERE path = ?1"}) {
        SqliteStatement remove(db, sql);
        remove.bind(1, file);
        if (remove.step() != SQLITE_DONE) {
            return false;
        }
    }
    {
        SqliteStatement insert(db,
                               "INSERT OR REPLACE INTO files(path, size, mtime_ns, opened, "
                               "file_rank, format_version) VALUES(?1, ?2, ?3, ?4, ?5, ?6)");
        insert.bind(1, file);
        insert.bind(2, size);
        insert.bind(3, mtimeNs);
        insert.bind(4, qint64{index.opened ? 1 : 0});
        if (index.fileRank) {
            insert.bind(5, qint64{*index.fileRank});
        } else {
            insert.bindNull(5);
        }
        insert.bind(6, index.formatVersion);
        if (insert.step() != SQLITE_DONE) {
            return false;
        }
    }
    SqliteStatement insertRecord(
        db,
        "INSERT INTO records(path, ordinal, rank, dataset, name, kind, tensor_index, iteration, "
        "micro_batch, seq, layer, expert, dtype, scale_inv, global_shape, local_shape, ranges, "
        "placements) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, "
        "?16, ?17, ?18)");
    qint64 ordinal = 0;
    for (const auto& record : index.records) {
        insertRecord.reset();
        insertRecord.bind(1, file);
        insertRecord.bind(2, ordinal++);
        insertRecord.bind(3, qint64{record.rank});
        insertRecord.bind(4, record.dataset);
        insertRecord.bind(5, record.key.name);
        insertRecord.bind(6, tensorKindName(record.key.kind));
        insertRecord.bind(7, qint64{record.key.index});
        insertRecord.bind(8, qint64{record.key.iteration});
        insertRecord.bind(9, qint64{record.key.microBatch});
        insertRecord.bind(10, qint64{record.seq});
        insertRecord.bind(11, qint64{record.layer});
        insertRecord.bind(12, qint64{record.expert});
        insertRecord.bind(13, dtypeName(record.dtype));
        insertRecord.bind(14, record.scaleInv);
        insertRecord.bind(15, shapeToText(record.globalShape));
        insertRecord.bind(16, shapeToText(record.localShape));
        insertRecord.bind(17, record.ranges.toJson());
        insertRecord.bind(18, placementsToText(record.placements));
        if (insertRecord.step() != SQLITE_DONE) {
            return false;
        }
    }
    SqliteStatement insertDiagnostic(
        db,
        "INSERT INTO diagnostics(path, ordinal, severity, file, "
        "dataset, tensor, message) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    ordinal = 0;
    for (const auto& d : index.diagnostics) {
        insertDiagnostic.reset();
        insertDiagnostic.bind(1, file);
        insertDiagnostic.bind(2, ordinal++);
        insertDiagnostic.bind(3, qint64{static_cast<int>(d.severity)});
        insertDiagnostic.bind(4, d.file);
        insertDiagnostic.bind(5, d.dataset);
        insertDiagnostic.bind(6, d.tensor);
        insertDiagnostic.bind(7, d.message);
        if (insertDiagnostic.step() != SQLITE_DONE) {
            return false;
        }
    }
    return transaction.commit();
}

}  // namespace ttrace
