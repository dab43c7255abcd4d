#include "store/IndexCache.h"

#include <QDir>
#include <QFileInfo>
#include <QHash>
#include <QJsonArray>
#include <QJsonDocument>
#include <string>

#include "store/EngineSources.h"
#include "store/Sqlite.h"
#include "trace/StoredBox.h"

namespace ttrace {

namespace {

// Bump when the tables or the serialisation change, or when indexing refuses what it used to
// accept; an older database is then rebuilt. 6: datasets whose data lie outside their rank
// file (external links and storage, virtual datasets) are refused. 7: each record's
// recomputation difference (the rank file's `recomputations` attribute). 9: what the scales
// are (their scale_format, a tensor scale folded into them).
constexpr int kSchemaVersion = 9;

const char* const kCreateTables = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files(
    path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    opened INTEGER NOT NULL, file_rank INTEGER, format_version TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records(
    path TEXT NOT NULL, ordinal INTEGER NOT NULL, rank INTEGER NOT NULL, dataset TEXT NOT NULL,
    name TEXT NOT NULL, kind TEXT NOT NULL, tensor_index INTEGER NOT NULL,
    iteration INTEGER NOT NULL, micro_batch INTEGER NOT NULL, seq INTEGER NOT NULL,
    layer INTEGER NOT NULL, expert INTEGER NOT NULL, dtype TEXT NOT NULL, scale_inv NOT NULL,
    scale_block TEXT, global_shape TEXT NOT NULL, local_shape TEXT NOT NULL, ranges TEXT NOT NULL,
    placements TEXT NOT NULL, data_offset INTEGER, recomputation TEXT, scale_format TEXT,
    tensor_scale INTEGER NOT NULL,
    PRIMARY KEY(path, ordinal)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS diagnostics(
    path TEXT NOT NULL, ordinal INTEGER NOT NULL, severity INTEGER NOT NULL, file TEXT NOT NULL,
    dataset TEXT NOT NULL, tensor TEXT NOT NULL, message TEXT NOT NULL, details TEXT NOT NULL,
    PRIMARY KEY(path, ordinal)) WITHOUT ROWID;
-- One tensor's records of a file, without reading the file's others (lookupTensor).
CREATE INDEX IF NOT EXISTS records_by_name ON records(path, name);
-- One tensor's records of every file of a trace folder at once (recordsUnder).
CREATE INDEX IF NOT EXISTS records_by_key
    ON records(name, kind, tensor_index, iteration, micro_batch, path);
)sql";

// The columns recordFromRow() and the diagnostics reader expect, in their order.
const std::string kRecordColumns =
    "rank, dataset, name, kind, tensor_index, iteration, micro_batch, seq, layer, expert, dtype, "
    "scale_inv, scale_block, global_shape, local_shape, ranges, placements, data_offset, "
    "recomputation, scale_format, tensor_scale";
constexpr int kRecordColumnCount = 21;
const std::string kSelectRecords = "SELECT " + kRecordColumns + " FROM records";
// Paths under a folder: from folder + '/' up to, not including, folder + '0' ('/' + 1).
const std::string kUnderFolder = "records.path >= ?6 AND records.path < ?7";
const std::string kSelectDiagnostics =
    "SELECT severity, file, dataset, tensor, message, details FROM diagnostics";

const char* const kDropTables = R"sql(
DROP TABLE IF EXISTS files; DROP TABLE IF EXISTS records; DROP TABLE IF EXISTS diagnostics;
DELETE FROM meta;
)sql";

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

bool ensureSchema(sqlite3* db, QString* error) {
    sqlite::Transaction transaction(db);
    if (!transaction.ok()) {
        *error = transaction.error();
        return false;
    }
    if (!sqlite::exec(db, kCreateTables, error)) {
        return false;
    }
    // The schema, and the engine that indexed (its rules of what a rank file holds).
    const QString wanted = QString::number(kSchemaVersion) + QLatin1Char(' ') + engineSourcesHash();
    QString stored;
    {
        sqlite::Statement select(db, "SELECT value FROM meta WHERE key = 'schema_version'");
        if (select.step()) {
            stored = select.text(0);
        }
    }
    if (stored != wanted) {
        // The cache only saves time: an entry of another schema or engine is simply rebuilt.
        if (!sqlite::exec(db, kDropTables, error) || !sqlite::exec(db, kCreateTables, error)) {
            return false;
        }
        sqlite::Statement insert(db, "INSERT INTO meta(key, value) VALUES('schema_version', ?1)");
        insert.bindText(1, wanted);
        if (!insert.run()) {
            *error = insert.error();
            return false;
        }
    }
    if (!transaction.commit()) {
        *error = transaction.error();
        return false;
    }
    return true;
}

// One row of kSelectRecords, or nullopt when unreadable.
std::optional<TensorRecord> recordFromRow(const sqlite::Statement& row, const QString& file) {
    TensorRecord record;
    record.file = file;
    record.rank = static_cast<int>(row.integer(0));
    record.dataset = row.text(1);
    record.key.name = row.text(2);
    const auto kind = tensorKindFromName(row.text(3));
    record.key.index = static_cast<int>(row.integer(4));
    record.key.iteration = static_cast<int>(row.integer(5));
    record.key.microBatch = static_cast<int>(row.integer(6));
    record.seq = row.integer(7);
    record.layer = static_cast<int>(row.integer(8));
    record.expert = static_cast<int>(row.integer(9));
    const auto dtype = dtypeFromName(row.text(10));
    // Per tensor one REAL; per block the block's shape and a BLOB of scales.
    std::optional<BlockScales> scales = BlockScales{};
    scales->scaleInv = {row.real(11)};
    if (!row.isNull(12)) {
        auto block = shapeFromText(row.text(12));
        auto values = row.doubles(11);
        if (block && values) {
            scales->block = std::move(*block);
            scales->scaleInv = std::move(*values);
        } else {
            scales.reset();
        }
    }
    const auto global = shapeFromText(row.text(13));
    const auto local = shapeFromText(row.text(14));
    auto ranges = ShardRanges::fromJson(row.text(15));
    auto placements = placementsFromText(row.text(16));
    if (!row.isNull(17)) {
        record.dataOffset = static_cast<std::uint64_t>(row.integer(17));
    }
    if (!row.isNull(18)) {
        record.recomputation = differenceFromText(row.text(18));
        if (!record.recomputation) {
            return std::nullopt;
        }
    }
    if (!kind || !dtype || !scales || !global || !local || !ranges || !placements) {
        return std::nullopt;
    }
    if (!row.isNull(19)) {
        scales->format = scaleFormatFromName(row.text(19));
        if (!scales->format) {
            return std::nullopt;
        }
    }
    scales->tensorScale = row.integer(20) != 0;
    record.scales = std::move(*scales);
    record.key.kind = *kind;
    record.dtype = *dtype;
    record.globalShape = *global;
    record.localShape = *local;
    record.ranges = std::move(*ranges);
    record.placements = std::move(*placements);
    return record;
}

// Resets a statement on scope exit, so that an early return never leaves it holding the
// read snapshot of a finished transaction.
struct ResetOnExit {
    sqlite::Statement& statement;
    ~ResetOnExit() { statement.reset(); }
};

}  // namespace

// Prepared once per cache: preparing them for every rank file was a fifth of the time to
// open a large trace set from the cache.
struct IndexCache::Statements {
    explicit Statements(sqlite3* db)
        : selectFile(db,
                     "SELECT size, mtime_ns, opened, file_rank, format_version FROM files "
                     "WHERE path = ?1"),
          selectRecords(db, (kSelectRecords + " WHERE path = ?1 ORDER BY ordinal").c_str()),
          selectDiagnostics(db, (kSelectDiagnostics + " WHERE path = ?1 ORDER BY ordinal").c_str()),
          // Through records_by_name, so that the file's other records are not read; named,
          // since without statistics SQLite prefers scanning the file's rows by primary key.
          selectTensorRecords(
              db, (kSelectRecords + " INDEXED BY records_by_name WHERE path = ?1 AND name = ?2 "
                                    "AND kind = ?3 AND tensor_index = ?4 AND iteration = ?5 "
                                    "AND micro_batch = ?6 ORDER BY ordinal")
                      .c_str()),
          // A tensor's records in every file of a folder: through records_by_key, which
          // holds the path, so that neither other tensors' rows nor other folders' are read.
          selectKeyRecordsUnder(
              db, ("SELECT " + kRecordColumns +
                   ", records.path, files.size, files.mtime_ns FROM records INDEXED BY "
                   "records_by_key JOIN files ON files.path = records.path WHERE name = ?1 AND "
                   "kind = ?2 AND tensor_index = ?3 AND iteration = ?4 AND micro_batch = ?5 AND " +
                   kUnderFolder)
                      .c_str()),
          selectOutlinesUnder(db,
                              "SELECT path, dataset, name, kind, tensor_index, iteration, "
                              "micro_batch, seq, dtype, global_shape, local_shape, placements "
                              "FROM records WHERE path >= ?1 AND path < ?2 ORDER BY path, ordinal"),
          // The rule of concernsTensor() (RankFileIndex.h).
          selectTensorDiagnostics(
              db, (kSelectDiagnostics + " WHERE path = ?1 AND (tensor = '' OR tensor = ?2) "
                                        "ORDER BY ordinal")
                      .c_str()),
          deleteRecords(db, "DELETE FROM records WHERE path = ?1"),
          deleteDiagnostics(db, "DELETE FROM diagnostics WHERE path = ?1"),
          insertFile(db,
                     "INSERT OR REPLACE INTO files(path, size, mtime_ns, opened, file_rank, "
                     "format_version) VALUES(?1, ?2, ?3, ?4, ?5, ?6)"),
          insertRecord(db,
                       "INSERT INTO records(path, ordinal, rank, dataset, name, kind, "
                       "tensor_index, iteration, micro_batch, seq, layer, expert, dtype, "
                       "scale_inv, scale_block, global_shape, local_shape, ranges, placements, "
                       "data_offset, recomputation, scale_format, tensor_scale) VALUES(?1, ?2, "
                       "?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, "
                       "?19, ?20, ?21, ?22, ?23)"),
          insertDiagnostic(db,
                           "INSERT INTO diagnostics(path, ordinal, severity, file, dataset, "
                           "tensor, message, details) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)") {}

    sqlite::Statement selectFile, selectRecords, selectDiagnostics, selectTensorRecords,
        selectKeyRecordsUnder, selectOutlinesUnder, selectTensorDiagnostics;
    sqlite::Statement deleteRecords, deleteDiagnostics, insertFile, insertRecord, insertDiagnostic;
};

IndexCache::IndexCache(sqlite::Database db)
    : db_(std::move(db)), statements_(std::make_unique<Statements>(db_.get())) {}

IndexCache::~IndexCache() = default;

std::unique_ptr<IndexCache> IndexCache::open(const QString& path, QString* error,
                                             QString* setAside) {
    QString ignored;
    QString& message = error ? *error : ignored;
    const QFileInfo info(path);
    if (!QDir().mkpath(info.absolutePath())) {
        message = QStringLiteral("cannot create the folder of the index cache %1").arg(path);
        return nullptr;
    }
    sqlite::Database db = sqlite::openDatabase(info.absoluteFilePath(), &message, setAside);
    if (!db) {
        return nullptr;
    }
    QString schemaError;
    if (!ensureSchema(db.get(), &schemaError)) {
        message = QStringLiteral("cannot set up the index cache %1: %2").arg(path, schemaError);
        return nullptr;
    }
    return std::unique_ptr<IndexCache>(new IndexCache(std::move(db)));
}

std::optional<RankFileIndex> IndexCache::lookup(const QString& file, qint64 size, qint64 mtimeNs) {
    const std::lock_guard lock(mutex_);
    return read(file, size, mtimeNs, &statements_->selectRecords, statements_->selectDiagnostics);
}

std::optional<RankFileIndex> IndexCache::lookupTensor(const QString& file, qint64 size,
                                                      qint64 mtimeNs, const TensorKey& key) {
    const std::lock_guard lock(mutex_);
    sqlite::Statement& records = statements_->selectTensorRecords;
    records.bindText(2, key.name);
    records.bindText(3, tensorKindName(key.kind));
    records.bindInt(4, key.index);
    records.bindInt(5, key.iteration);
    records.bindInt(6, key.microBatch);
    sqlite::Statement& diagnostics = statements_->selectTensorDiagnostics;
    diagnostics.bindText(2, key.toString());
    return read(file, size, mtimeNs, &records, diagnostics);
}

std::optional<RankFileIndex> IndexCache::lookupFile(const QString& file, qint64 size,
                                                    qint64 mtimeNs) {
    const std::lock_guard lock(mutex_);
    return read(file, size, mtimeNs, nullptr, statements_->selectDiagnostics);
}

namespace {

void bindUnderFolder(sqlite::Statement& statement, int first, const QString& folder) {
    statement.bindText(first, folder + QLatin1Char('/'));
    statement.bindText(first + 1, folder + QLatin1Char('0'));
}

}  // namespace

bool IndexCache::forEachRecordUnder(const QString& folder,
                                    const std::function<void(const RecordOutline&)>& visit) {
    const std::lock_guard lock(mutex_);
    sqlite::Transaction transaction(db_.get(), sqlite::Transaction::Kind::Read);
    if (!transaction.ok()) {
        return false;
    }
    sqlite::Statement& select = statements_->selectOutlinesUnder;
    const ResetOnExit reset{select};
    bindUnderFolder(select, 1, folder);
    // Shapes and placements repeat across ranks and tensors: each distinct text is decoded once.
    QHash<QString, std::optional<std::vector<std::int64_t>>> shapes;
    QHash<QString, std::optional<std::vector<QString>>> axes;
    // By value: inserting may move the hash's other entries.
    const auto shapeOf = [&shapes](const QString& text) {
        auto it = shapes.constFind(text);
        return it != shapes.constEnd() ? *it : *shapes.insert(text, shapeFromText(text));
    };
    RecordOutline outline;
    while (select.step()) {
        const auto kind = tensorKindFromName(select.text(3));
        const auto dtype = dtypeFromName(select.text(8));
        const auto global = shapeOf(select.text(9));
        const auto local = shapeOf(select.text(10));
        const QString placementsText = select.text(11);
        auto placementAxes = axes.find(placementsText);
        if (placementAxes == axes.end()) {
            std::optional<std::vector<QString>> names;
            if (const auto placements = placementsFromText(placementsText)) {
                names.emplace();
                for (const auto& placement : *placements) {
                    names->push_back(placement.axis);
                }
            }
            placementAxes = axes.insert(placementsText, std::move(names));
        }
        if (!kind || !dtype || !global || !local || !*placementAxes) {
            return false;
        }
        outline.path = select.text(0);
        outline.dataset = select.text(1);
        outline.key.name = select.text(2);
        outline.key.kind = *kind;
        outline.key.index = static_cast<int>(select.integer(4));
        outline.key.iteration = static_cast<int>(select.integer(5));
        outline.key.microBatch = static_cast<int>(select.integer(6));
        outline.seq = select.integer(7);
        outline.globalShape = *global;
        outline.storedBytes = datasetBytes(*dtype, *local);
        outline.placementAxes = **placementAxes;
        visit(outline);
    }
    return !select.failed() && transaction.commit();
}

std::optional<std::vector<TensorRecord>> IndexCache::recordsUnder(const QString& folder,
                                                                  const TensorKey& key) {
    const std::lock_guard lock(mutex_);
    sqlite::Statement& select = statements_->selectKeyRecordsUnder;
    const ResetOnExit reset{select};
    select.bindText(1, key.name);
    select.bindText(2, tensorKindName(key.kind));
    select.bindInt(3, key.index);
    select.bindInt(4, key.iteration);
    select.bindInt(5, key.microBatch);
    bindUnderFolder(select, 6, folder);
    std::vector<TensorRecord> records;
    while (select.step()) {
        // After kRecordColumns: the path, then the file's stamp.
        auto record = recordFromRow(select, select.text(kRecordColumnCount));
        if (!record) {
            return std::nullopt;
        }
        record->fileStamp = FileStamp{select.integer(kRecordColumnCount + 1),
                                      select.integer(kRecordColumnCount + 2)};
        records.push_back(std::move(*record));
    }
    if (select.failed()) {
        return std::nullopt;
    }
    return records;
}

bool IndexCache::isCurrent(const QString& file, qint64 size, qint64 mtimeNs) {
    const std::lock_guard lock(mutex_);
    sqlite::Statement& select = statements_->selectFile;
    const ResetOnExit reset{select};
    select.bindText(1, file);
    return select.step() && select.integer(0) == size && select.integer(1) == mtimeNs;
}

std::optional<RankFileIndex> IndexCache::read(const QString& file, qint64 size, qint64 mtimeNs,
                                              sqlite::Statement* records,
                                              sqlite::Statement& diagnostics) {
    sqlite3* db = db_.get();
    sqlite::Transaction transaction(db, sqlite::Transaction::Kind::Read);
    if (!transaction.ok()) {
        return std::nullopt;
    }
    RankFileIndex index;
    {
        sqlite::Statement& select = statements_->selectFile;
        const ResetOnExit reset{select};
        select.bindText(1, file);
        if (!select.step() || select.integer(0) != size || select.integer(1) != mtimeNs) {
            return std::nullopt;
        }
        index.opened = select.integer(2) != 0;
        if (!select.isNull(3)) {
            index.fileRank = static_cast<int>(select.integer(3));
        }
        index.formatVersion = select.text(4);
    }
    if (records) {
        const ResetOnExit resetRecords{*records};
        records->bindText(1, file);
        while (records->step()) {
            auto record = recordFromRow(*records, file);
            if (!record) {
                return std::nullopt;  // unreadable entry: index the file again
            }
            record->fileStamp = FileStamp{size, mtimeNs};
            index.records.push_back(std::move(*record));
        }
        if (records->failed()) {
            return std::nullopt;
        }
    }
    const ResetOnExit resetDiagnostics{diagnostics};
    diagnostics.bindText(1, file);
    while (diagnostics.step()) {
        Diagnostic d;
        const auto severity = diagnostics.integer(0);
        if (severity < 0 || severity > static_cast<int>(Severity::Error)) {
            return std::nullopt;
        }
        d.severity = static_cast<Severity>(severity);
        d.file = diagnostics.text(1);
        d.dataset = diagnostics.text(2);
        d.tensor = diagnostics.text(3);
        d.message = diagnostics.text(4);
        d.details = diagnostics.text(5);
        index.diagnostics.push_back(std::move(d));
    }
    if (diagnostics.failed()) {
        return std::nullopt;
    }
    transaction.commit();
    return index;
}

bool IndexCache::store(const QString& file, qint64 size, qint64 mtimeNs,
                       const RankFileIndex& index) {
    const std::lock_guard lock(mutex_);
    sqlite3* db = db_.get();
    sqlite::Transaction transaction(db);
    if (!transaction.ok()) {
        return false;
    }
    for (sqlite::Statement* remove :
         {&statements_->deleteRecords, &statements_->deleteDiagnostics}) {
        remove->bindText(1, file);
        if (!remove->run()) {
            return false;
        }
    }
    {
        sqlite::Statement& insert = statements_->insertFile;
        insert.bindText(1, file);
        insert.bindInt(2, size);
        insert.bindInt(3, mtimeNs);
        insert.bindInt(4, index.opened ? 1 : 0);
        if (index.fileRank) {
            insert.bindInt(5, *index.fileRank);
        } else {
            insert.bindNull(5);
        }
        insert.bindText(6, index.formatVersion);
        if (!insert.run()) {
            return false;
        }
    }
    sqlite::Statement& insertRecord = statements_->insertRecord;
    qint64 ordinal = 0;
    for (const auto& record : index.records) {
        insertRecord.bindText(1, file);
        insertRecord.bindInt(2, ordinal++);
        insertRecord.bindInt(3, record.rank);
        insertRecord.bindText(4, record.dataset);
        insertRecord.bindText(5, record.key.name);
        insertRecord.bindText(6, tensorKindName(record.key.kind));
        insertRecord.bindInt(7, record.key.index);
        insertRecord.bindInt(8, record.key.iteration);
        insertRecord.bindInt(9, record.key.microBatch);
        insertRecord.bindInt(10, record.seq);
        insertRecord.bindInt(11, record.layer);
        insertRecord.bindInt(12, record.expert);
        insertRecord.bindText(13, dtypeName(record.dtype));
        if (record.scales.perTensor()) {
            insertRecord.bindDouble(14, record.scales.scaleInv.front());
            insertRecord.bindNull(15);
        } else {
            insertRecord.bindDoubles(14, record.scales.scaleInv);
            insertRecord.bindText(15, shapeToText(record.scales.block));
        }
        insertRecord.bindText(16, shapeToText(record.globalShape));
        insertRecord.bindText(17, shapeToText(record.localShape));
        insertRecord.bindText(18, record.ranges.toJson());
        insertRecord.bindText(19, placementsToText(record.placements));
        if (record.dataOffset) {
            insertRecord.bindInt(20, static_cast<std::int64_t>(*record.dataOffset));
        } else {
            insertRecord.bindNull(20);
        }
        if (record.recomputation) {
            insertRecord.bindText(21, differenceText(*record.recomputation));
        } else {
            insertRecord.bindNull(21);
        }
        if (record.scales.format) {
            insertRecord.bindText(22, scaleFormatName(*record.scales.format));
        } else {
            insertRecord.bindNull(22);
        }
        insertRecord.bindInt(23, record.scales.tensorScale ? 1 : 0);
        if (!insertRecord.run()) {
            return false;
        }
    }
    sqlite::Statement& insertDiagnostic = statements_->insertDiagnostic;
    ordinal = 0;
    for (const auto& d : index.diagnostics) {
        insertDiagnostic.bindText(1, file);
        insertDiagnostic.bindInt(2, ordinal++);
        insertDiagnostic.bindInt(3, static_cast<int>(d.severity));
        insertDiagnostic.bindText(4, d.file);
        insertDiagnostic.bindText(5, d.dataset);
        insertDiagnostic.bindText(6, d.tensor);
        insertDiagnostic.bindText(7, d.message);
        insertDiagnostic.bindText(8, d.details);
        if (!insertDiagnostic.run()) {
            return false;
        }
    }
    return transaction.commit();
}

}  // namespace ttrace
