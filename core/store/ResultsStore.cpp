#include "store/ResultsStore.h"

#include <sqlite3.h>

#include <QDateTime>
#include <QJsonArray>
#include <QJsonDocument>
#include <QStringList>
#include <mutex>
#include <utility>

#include "store/ResultsSchema.h"
#include "store/Sqlite.h"

namespace ttrace {

namespace {

using sqlite::Statement;

// Stored names of enums: fixed here so that renaming a display name never breaks a cache.
QString methodToStored(ThresholdMethod method) {
    switch (method) {
        case ThresholdMethod::Perturbation:
            return QStringLiteral("perturbation");
        case ThresholdMethod::Theoretical:
            return QStringLiteral("theoretical");
        case ThresholdMethod::Override:
            return QStringLiteral("override");
    }
    return {};
}

std::optional<ThresholdMethod> methodFromStored(const QString& text) {
    for (const auto method :
         {ThresholdMethod::Perturbation, ThresholdMethod::Theoretical, ThresholdMethod::Override}) {
        if (methodToStored(method) == text) {
            return method;
        }
    }
    return std::nullopt;
}

std::optional<Severity> severityFromStored(const QString& text) {
    for (const auto severity : {Severity::Info, Severity::Warning, Severity::Error}) {
        if (severityName(severity) == text) {
            return severity;
        }
    }
    return std::nullopt;
}

template <typename Int>
QString intsToText(const std::vector<Int>& values) {
    QStringList parts;
    parts.reserve(static_cast<qsizetype>(values.size()));
    for (const auto value : values) {
        parts << QString::number(value);
    }
    return parts.join(QLatin1Char(','));
}

template <typename Int>
std::optional<std::vector<Int>> intsFromText(const QString& text) {
    std::vector<Int> values;
    if (text.isEmpty()) {
        return values;
    }
    for (const auto& part : text.split(QLatin1Char(','))) {
        bool ok = false;
        const qlonglong value = part.toLongLong(&ok);
        if (!ok) {
            return std::nullopt;
        }
        values.push_back(static_cast<Int>(value));
    }
    return values;
}

// ErrorMetrics as 15 consecutive columns, in the order of the schema's m_ / p_ columns.
constexpr int kMetricColumns = 15;

QString metricColumns(const QString& prefix) {
    static const char* const kNames[kMetricColumns] = {
        "count",         "rel_error", "max_abs",  "max_abs_index", "max_rel",
        "max_rel_index", "cosine",    "ref_norm", "dist_norm",     "zero_ref_mismatches",
        "nan_dist",      "inf_dist",  "nan_ref",  "inf_ref",       "bit_differences"};
    QStringList names;
    for (const char* name : kNames) {
        names << prefix + QLatin1String(name);
    }
    return names.join(QStringLiteral(", "));
}

void bindMetrics(Statement& stmt, int first, const ErrorMetrics& m) {
    stmt.bindInt(first, m.count);
    stmt.bindDouble(first + 1, m.relativeError);
    stmt.bindDouble(first + 2, m.maxAbsError);
    stmt.bindText(first + 3, intsToText(m.maxAbsIndex));
    stmt.bindDouble(first + 4, m.maxRelError);
    stmt.bindText(first + 5, intsToText(m.maxRelIndex));
    stmt.bindDouble(first + 6, m.cosine);
    stmt.bindDouble(first + 7, m.refNorm);
    stmt.bindDouble(first + 8, m.distNorm);
    stmt.bindInt(first + 9, m.zeroRefMismatches);
    stmt.bindInt(first + 10, m.nanDist);
    stmt.bindInt(first + 11, m.infDist);
    stmt.bindInt(first + 12, m.nanRef);
    stmt.bindInt(first + 13, m.infRef);
    stmt.bindInt(first + 14, m.bitDifferences);
}

void bindNoMetrics(Statement& stmt, int first) {
    for (int i = 0; i < kMetricColumns; ++i) {
        stmt.bindNull(first + i);
    }
}

std::optional<ErrorMetrics> readMetrics(const Statement& stmt, int first) {
    ErrorMetrics m;
    m.count = stmt.integer(first);
    m.relativeError = stmt.real(first + 1);
    m.maxAbsError = stmt.real(first + 2);
    auto absIndex = intsFromText<std::int64_t>(stmt.text(first + 3));
    m.maxRelError = stmt.real(first + 4);
    auto relIndex = intsFromText<std::int64_t>(stmt.text(first + 5));
    if (!absIndex || !relIndex) {
        return std::nullopt;
    }
    m.maxAbsIndex = std::move(*absIndex);
    m.maxRelIndex = std::move(*relIndex);
    m.cosine = stmt.real(first + 6);
    m.refNorm = stmt.real(first + 7);
    m.distNorm = stmt.real(first + 8);
    m.zeroRefMismatches = stmt.integer(first + 9);
    m.nanDist = stmt.integer(first + 10);
    m.infDist = stmt.integer(first + 11);
    m.nanRef = stmt.integer(first + 12);
    m.infRef = stmt.integer(first + 13);
    m.bitDifferences = stmt.integer(first + 14);
    return m;
}

QByteArray placeholders(int count) {
    QByteArray text;
    for (int i = 0; i < count; ++i) {
        text += i == 0 ? "?" : ", ?";
    }
    return text;
}

const QByteArray& tensorColumns() {
    static const QByteArray columns =
        (QStringLiteral("idx, name, kind, tensor_index, iteration, micro_batch, layer, "
                        "expert, dtype, global_shape, bytes, ") +
         metricColumns(QStringLiteral("m_")) + QStringLiteral(", has_perturbation, ") +
         metricColumns(QStringLiteral("p_")) +
         QStringLiteral(", threshold, threshold_method, threshold_theoretical, "
                        "threshold_e_pert, threshold_perturbation, threshold_floor, "
                        "threshold_override, normalized_error, reference_seq"))
            .toUtf8();
    return columns;
}
constexpr int kTensorColumnCount = 11 + kMetricColumns + 1 + kMetricColumns + 9;

const QByteArray& shardColumns() {
    static const QByteArray columns =
        (QStringLiteral("tensor_idx, idx, ranges, ranks, replica, ") +
         metricColumns(QStringLiteral("m_")) + QStringLiteral(", normalized_error"))
            .toUtf8();
    return columns;
}
constexpr int kShardColumnCount = 5 + kMetricColumns + 1;

// Inserts run_id first, then `columns`.
QByteArray insertSql(const char* table, const QByteArray& columns, int count) {
    return QByteArray("INSERT INTO ") + table + " (run_id, " + columns + ") VALUES (" +
           placeholders(count + 1) + ")";
}

bool saveTensor(Statement& stmt, qint64 runId, qint64 idx, const TensorResult& r) {
    int c = 1;
    stmt.bindInt(c++, runId);
    stmt.bindInt(c++, idx);
    stmt.bindText(c++, r.key.name);
    stmt.bindText(c++, tensorKindName(r.key.kind));
    stmt.bindInt(c++, r.key.index);
    stmt.bindInt(c++, r.key.iteration);
    stmt.bindInt(c++, r.key.microBatch);
    stmt.bindInt(c++, r.layer);
    stmt.bindInt(c++, r.expert);
    stmt.bindText(c++, dtypeName(r.dtype));
    stmt.bindText(c++, intsToText(r.globalShape));
    stmt.bindInt(c++, r.bytesCompared);
    bindMetrics(stmt, c, r.metrics);
    c += kMetricColumns;
    stmt.bindInt(c++, r.perturbation ? 1 : 0);
    if (r.perturbation) {
        bindMetrics(stmt, c, *r.perturbation);
    } else {
        bindNoMetrics(stmt, c);
    }
    c += kMetricColumns;
    stmt.bindDouble(c++, r.threshold.value);
    stmt.bindText(c++, methodToStored(r.threshold.method));
    stmt.bindDouble(c++, r.threshold.theoretical);
    stmt.bindOptionalDouble(c++, r.threshold.perturbationError);
    stmt.bindOptionalDouble(c++, r.threshold.perturbationThreshold);
    stmt.bindDouble(c++, r.threshold.floor);
    stmt.bindText(c++, r.threshold.overridePattern);
    stmt.bindDouble(c++, r.normalizedError);
    stmt.bindInt(c++, r.referenceSeq);
    return stmt.run();
}

std::optional<TensorResult> readTensor(const Statement& stmt) {
    TensorResult r;
    int c = 1;  // after idx
    r.key.name = stmt.text(c++);
    const auto kind = tensorKindFromName(stmt.text(c++));
    r.key.index = static_cast<int>(stmt.integer(c++));
    r.key.iteration = static_cast<int>(stmt.integer(c++));
    r.key.microBatch = static_cast<int>(stmt.integer(c++));
    r.layer = static_cast<int>(stmt.integer(c++));
    r.expert = static_cast<int>(stmt.integer(c++));
    const auto dtype = dtypeFromName(stmt.text(c++));
    auto shape = intsFromText<std::int64_t>(stmt.text(c++));
    r.bytesCompared = stmt.integer(c++);
    auto metrics = readMetrics(stmt, c);
    c += kMetricColumns;
    const bool hasPerturbation = stmt.integer(c++) != 0;
    if (hasPerturbation) {
        r.perturbation = readMetrics(stmt, c);
        if (!r.perturbation) {
            return std::nullopt;
        }
    }
    c += kMetricColumns;
    r.threshold.value = stmt.real(c++);
    const auto method = methodFromStored(stmt.text(c++));
    r.threshold.theoretical = stmt.real(c++);
    r.threshold.perturbationError = stmt.optionalReal(c++);
    r.threshold.perturbationThreshold = stmt.optionalReal(c++);
    r.threshold.floor = stmt.real(c++);
    r.threshold.overridePattern = stmt.text(c++);
    r.normalizedError = stmt.real(c++);
    r.referenceSeq = stmt.integer(c++);
    if (!kind || !dtype || !shape || !metrics || !method) {
        return std::nullopt;
    }
    r.key.kind = *kind;
    r.dtype = *dtype;
    r.globalShape = std::move(*shape);
    r.metrics = std::move(*metrics);
    r.threshold.method = *method;
    return r;
}

QByteArray selectSql(const QByteArray& columns, const char* table, const char* order) {
    return QByteArray("SELECT ") + columns + " FROM " + table + " WHERE run_id = ? ORDER BY " +
           order;
}

// Loads the child rows of `table` into results[tensor_idx]; false on a bad row or an error.
template <typename ReadRow>
bool loadChildren(sqlite3* db, const QByteArray& sql, qint64 runId, std::size_t tensorCount,
                  ReadRow readRow) {
    Statement stmt(db, sql.constData());
    stmt.bindInt(1, runId);
    while (stmt.step()) {
        const qint64 tensor = stmt.integer(0);
        if (tensor < 0 || static_cast<std::size_t>(tensor) >= tensorCount ||
            !readRow(static_cast<std::size_t>(tensor), stmt)) {
            return false;
        }
    }
    return stmt.ok() && !stmt.failed();
}

// Binds severity, file, dataset, tensor and message from column `first` on.
void bindDiagnostic(Statement& stmt, int first, const Diagnostic& d) {
    stmt.bindText(first, severityName(d.severity));
    stmt.bindText(first + 1, d.file);
    stmt.bindText(first + 2, d.dataset);
    stmt.bindText(first + 3, d.tensor);
    stmt.bindText(first + 4, d.message);
}

std::optional<Diagnostic> readDiagnostic(const Statement& stmt, int first) {
    const auto severity = severityFromStored(stmt.text(first));
    if (!severity) {
        return std::nullopt;
    }
    return Diagnostic{*severity, stmt.text(first + 1), stmt.text(first + 2), stmt.text(first + 3),
                      stmt.text(first + 4)};
}

// The stored names of the trace sets' roles in run_traces.
const QString kDistributedRole = QStringLiteral("distributed");
const QString kReferenceRole = QStringLiteral("reference");
const QString kPerturbedRole = QStringLiteral("perturbed-reference");

// Writes `opening` for the run `runId` (inside the caller's transaction), replacing any.
bool writeOpening(sqlite3* db, qint64 runId, const TraceOpening& opening, QString* why) {
    Statement clearTraces(db, "DELETE FROM run_traces WHERE run_id = ?");
    Statement clearDiagnostics(db, "DELETE FROM opening_diagnostics WHERE run_id = ?");
    Statement trace(db, "INSERT INTO run_traces (run_id, role, datasets) VALUES (?, ?, ?)");
    Statement diagnostic(db,
                         "INSERT INTO opening_diagnostics (run_id, idx, severity, file, dataset, "
                         "tensor, message) VALUES (?, ?, ?, ?, ?, ?, ?)");
    const auto failed = [why](const Statement& stmt) {
        *why = stmt.error();
        return false;
    };
    for (Statement* clear : {&clearTraces, &clearDiagnostics}) {
        clear->bindInt(1, runId);
        if (!clear->run()) {
            return failed(*clear);
        }
    }
    std::vector<std::pair<QString, std::int64_t>> traces{
        {kDistributedRole, opening.distributedDatasets},
        {kReferenceRole, opening.referenceDatasets}};
    if (opening.perturbedDatasets) {
        traces.emplace_back(kPerturbedRole, *opening.perturbedDatasets);
    }
    for (const auto& [role, datasets] : traces) {
        trace.bindInt(1, runId);
        trace.bindText(2, role);
        trace.bindInt(3, datasets);
        if (!trace.run()) {
            return failed(trace);
        }
    }
    for (std::size_t i = 0; i < opening.diagnostics.size(); ++i) {
        diagnostic.bindInt(1, runId);
        diagnostic.bindInt(2, static_cast<qint64>(i));
        bindDiagnostic(diagnostic, 3, opening.diagnostics[i]);
        if (!diagnostic.run()) {
            return failed(diagnostic);
        }
    }
    return true;
}

// The id of the reusable (complete) run with this fingerprint.
std::optional<qint64> reusableRunId(sqlite3* db, const QString& fingerprint) {
    Statement run(db, "SELECT id FROM runs WHERE fingerprint = ? AND cancelled = 0");
    run.bindText(1, fingerprint);
    if (!run.step()) {
        return std::nullopt;
    }
    return run.integer(0);
}

// Sets `error` to why saving to `db` failed; returns false.
bool saveFailed(sqlite3* db, const QString& why, QString* error) {
    if (error) {
        *error = QStringLiteral("Cannot save results to %1: %2")
                     .arg(QString::fromUtf8(sqlite3_db_filename(db, "main")), why);
    }
    return false;
}

// Ends a read transaction begun with BEGIN, whatever way the reader leaves.
struct EndRead {
    sqlite3* db;
    ~EndRead() { sqlite::exec(db, "COMMIT", nullptr); }
};

// A row of shardColumns(): tensor_idx, idx, then the shard.
std::optional<ShardResult> readShard(const Statement& row) {
    auto ranges = ShardRanges::fromJson(row.text(2));
    auto ranks = intsFromText<int>(row.text(3));
    auto metrics = readMetrics(row, 5);
    if (!ranges || !ranks || !metrics) {
        return std::nullopt;
    }
    ShardResult shard;
    shard.ranges = std::move(*ranges);
    shard.ranks = std::move(*ranks);
    shard.replica = static_cast<int>(row.integer(4));
    shard.metrics = std::move(*metrics);
    shard.normalizedError = row.real(5 + kMetricColumns);
    return shard;
}

// The shards and rank sequence numbers of one stored run, read one tensor at a time on a
// connection of their own, so that they outlive the store that made them. Several threads
// may ask at once.
class StoredDetails : public ResultDetails {
public:
    StoredDetails(sqlite::Database db, qint64 runId)
        : db_(std::move(db)),
          shards_(db_.get(), QByteArray(QByteArray("SELECT ") + shardColumns() +
                                        " FROM shards WHERE run_id = ? AND tensor_idx = ? "
                                        "ORDER BY idx")
                                 .constData()),
          rankSeq_(db_.get(),
                   "SELECT rank, seq FROM tensor_rank_seq WHERE run_id = ? AND tensor_idx = ?"),
          runId_(runId) {}

    std::vector<ShardResult> shardsOf(std::size_t index) const override {
        std::vector<ShardResult> shards;
        const bool read = readRows(shards_, index, [&](const Statement& row) {
            auto shard = readShard(row);
            if (shard) {
                shards.push_back(std::move(*shard));
            }
            return shard.has_value();
        });
        return read ? shards : std::vector<ShardResult>();
    }

    std::map<int, std::int64_t> rankSeqOf(std::size_t index) const override {
        std::map<int, std::int64_t> rankSeq;
        const bool read = readRows(rankSeq_, index, [&](const Statement& row) {
            rankSeq[static_cast<int>(row.integer(0))] = row.integer(1);
            return true;
        });
        return read ? rankSeq : std::map<int, std::int64_t>();
    }

private:
    // Steps `select` over the rows of tensor `index` in one read transaction (a concurrent
    // save() never shows half a tensor); false on an error or a row `readRow` refuses.
    template <typename ReadRow>
    bool readRows(Statement& select, std::size_t index, ReadRow readRow) const {
        const std::lock_guard lock(mutex_);
        sqlite::Transaction transaction(db_.get(), sqlite::Transaction::Kind::Read);
        if (!select.ok() || !transaction.ok()) {
            return false;
        }
        select.reset();
        select.bindInt(1, runId_);
        select.bindInt(2, static_cast<qint64>(index));
        bool ok = true;
        while (ok && select.step()) {
            ok = readRow(select);
        }
        ok = ok && !select.failed();
        select.reset();
        return ok;
    }

    sqlite::Database db_;
    // Declared after db_: finalized before it closes. Prepared once; used under mutex_.
    mutable Statement shards_;
    mutable Statement rankSeq_;
    qint64 runId_;
    mutable std::mutex mutex_;
};

}  // namespace

std::unique_ptr<ResultsStore> ResultsStore::open(const QString& path, QString* error) {
    QString reason;
    sqlite::Database db = sqlite::openDatabase(path, &reason);
    const auto fail = [&](const QString& why) {
        if (error) {
            *error = why;
        }
        return std::unique_ptr<ResultsStore>();
    };
    if (!db) {
        return fail(reason);
    }
    const auto failIn = [&](const QString& why) {
        return fail(QStringLiteral("Results database %1: %2").arg(path, why));
    };

    // Migrations run in one write transaction, so that two processes opening the same new
    // database do not both apply them.
    sqlite::Transaction transaction(db.get());
    if (!transaction.ok()) {
        return failIn(transaction.error());
    }
    if (!sqlite::exec(db.get(),
                      "CREATE TABLE IF NOT EXISTS schema_migrations ("
                      "version INTEGER PRIMARY KEY, applied TEXT NOT NULL)",
                      &reason)) {
        return failIn(reason);
    }
    Statement current(db.get(), "SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
    if (!current.step()) {
        return failIn(current.error());
    }
    const qint64 version = current.integer(0);
    current.reset();
    if (version > results_schema::latestVersion()) {
        return failIn(QStringLiteral("written by a newer ttrace (schema version %1; this "
                                     "version reads up to %2)")
                          .arg(version)
                          .arg(results_schema::latestVersion()));
    }
    Statement record(db.get(), "INSERT INTO schema_migrations (version, applied) VALUES (?, ?)");
    for (const auto& migration : results_schema::migrations()) {
        if (migration.version <= version) {
            continue;
        }
        if (!sqlite::exec(db.get(), migration.sql, &reason)) {
            return failIn(QStringLiteral("schema migration %1 failed: %2")
                              .arg(migration.version)
                              .arg(reason));
        }
        record.bindInt(1, migration.version);
        record.bindText(2, QDateTime::currentDateTimeUtc().toString(Qt::ISODate));
        if (!record.run()) {
            return failIn(record.error());
        }
    }
    if (!transaction.commit()) {
        return failIn(transaction.error());
    }
    return std::unique_ptr<ResultsStore>(new ResultsStore(db.release()));
}

ResultsStore::ResultsStore(sqlite3* db) : db_(db) {}

ResultsStore::~ResultsStore() {
    sqlite::DatabaseCloser()(db_);
}

bool ResultsStore::save(const QString& fingerprint, const QString& description,
                        const ComparisonOutput& output, const TraceOpening& opening,
                        QString* error) {
    const auto fail = [&](const QString& why) { return saveFailed(db_, why, error); };
    sqlite::Transaction transaction(db_);
    if (!transaction.ok()) {
        return fail(transaction.error());
    }
    // Children go with the run (ON DELETE CASCADE).
    Statement remove(db_, "DELETE FROM runs WHERE fingerprint = ?");
    remove.bindText(1, fingerprint);
    if (!remove.run()) {
        return fail(remove.error());
    }
    Statement run(db_,
                  "INSERT INTO runs (fingerprint, description, backend, bytes, cancelled, "
                  "created) VALUES (?, ?, ?, ?, ?, ?)");
    run.bindText(1, fingerprint);
    run.bindText(2, description);
    run.bindText(3, output.backendName);
    run.bindInt(4, output.bytesCompared);
    // Incomplete runs are kept for the record but never reused (load() skips them).
    run.bindInt(5, output.complete() ? 0 : 1);
    run.bindText(6, QDateTime::currentDateTimeUtc().toString(Qt::ISODateWithMs));
    if (!run.run()) {
        return fail(run.error());
    }
    const qint64 runId = sqlite3_last_insert_rowid(db_);
    if (QString why; !writeOpening(db_, runId, opening, &why)) {
        return fail(why);
    }

    Statement tensor(db_, insertSql("tensors", tensorColumns(), kTensorColumnCount).constData());
    Statement rankSeq(db_,
                      "INSERT INTO tensor_rank_seq (run_id, tensor_idx, rank, seq) "
                      "VALUES (?, ?, ?, ?)");
    Statement shard(db_, insertSql("shards", shardColumns(), kShardColumnCount).constData());
    Statement mismatch(db_,
                       "INSERT INTO replica_mismatches (run_id, tensor_idx, idx, ranges, "
                       "ranks_a, ranks_b, differing_elements, max_abs_difference) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
    Statement diagnostic(db_,
                         "INSERT INTO diagnostics (run_id, idx, tensor_idx, severity, file, "
                         "dataset, tensor, message) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
    Statement scales(db_,
                     "INSERT INTO fp8_scales (run_id, tensor_idx, reference_scale_inv, "
                     "perturbed_scale_inv, tolerance, max_difference, copies_agree) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?)");
    Statement scaleMismatch(db_,
                            "INSERT INTO fp8_scale_mismatches (run_id, tensor_idx, idx, ranges, "
                            "ranks, scale_inv, ratio) VALUES (?, ?, ?, ?, ?, ?, ?)");
    for (const Statement* stmt :
         {&tensor, &rankSeq, &shard, &mismatch, &diagnostic, &scales, &scaleMismatch}) {
        if (!stmt->ok()) {
            return fail(stmt->error());
        }
    }

    qint64 diagnosticIdx = 0;
    const auto saveDiagnostic = [&](const Diagnostic& d, std::optional<qint64> tensorIdx) {
        diagnostic.bindInt(1, runId);
        diagnostic.bindInt(2, diagnosticIdx++);
        if (tensorIdx) {
            diagnostic.bindInt(3, *tensorIdx);
        } else {
            diagnostic.bindNull(3);
        }
        bindDiagnostic(diagnostic, 4, d);
        return diagnostic.run();
    };

    for (std::size_t i = 0; i < output.results.size(); ++i) {
        const TensorResult& r = output.results[i];
        const auto idx = static_cast<qint64>(i);
        if (!saveTensor(tensor, runId, idx, r)) {
            return fail(tensor.error());
        }
        for (const auto& [rank, seq] : r.rankSeq) {
            rankSeq.bindInt(1, runId);
            rankSeq.bindInt(2, idx);
            rankSeq.bindInt(3, rank);
            rankSeq.bindInt(4, seq);
            if (!rankSeq.run()) {
                return fail(rankSeq.error());
            }
        }
        for (std::size_t s = 0; s < r.shards.size(); ++s) {
            const ShardResult& sr = r.shards[s];
            shard.bindInt(1, runId);
            shard.bindInt(2, idx);
            shard.bindInt(3, static_cast<qint64>(s));
            shard.bindText(4, sr.ranges.toJson());
            shard.bindText(5, intsToText(sr.ranks));
            shard.bindInt(6, sr.replica);
            bindMetrics(shard, 7, sr.metrics);
            shard.bindDouble(7 + kMetricColumns, sr.normalizedError);
            if (!shard.run()) {
                return fail(shard.error());
            }
        }
        for (std::size_t m = 0; m < r.replicaMismatches.size(); ++m) {
            const ReplicaMismatch& rm = r.replicaMismatches[m];
            mismatch.bindInt(1, runId);
            mismatch.bindInt(2, idx);
            mismatch.bindInt(3, static_cast<qint64>(m));
            mismatch.bindText(4, rm.ranges.toJson());
            mismatch.bindText(5, intsToText(rm.ranksA));
            mismatch.bindText(6, intsToText(rm.ranksB));
            mismatch.bindInt(7, rm.differingElements);
            mismatch.bindDouble(8, rm.maxAbsDifference);
            if (!mismatch.run()) {
                return fail(mismatch.error());
            }
        }
        if (r.fp8Scales) {
            const Fp8ScaleCheck& check = *r.fp8Scales;
            scales.bindInt(1, runId);
            scales.bindInt(2, idx);
            scales.bindDouble(3, check.referenceScaleInv);
            scales.bindOptionalDouble(4, check.perturbedScaleInv);
            scales.bindDouble(5, check.tolerance);
            scales.bindDouble(6, check.maxDifference);
            scales.bindInt(7, check.copiesAgree ? 1 : 0);
            if (!scales.run()) {
                return fail(scales.error());
            }
            for (std::size_t m = 0; m < check.mismatches.size(); ++m) {
                const ScaleMismatch& sm = check.mismatches[m];
                scaleMismatch.bindInt(1, runId);
                scaleMismatch.bindInt(2, idx);
                scaleMismatch.bindInt(3, static_cast<qint64>(m));
                scaleMismatch.bindText(4, sm.ranges.toJson());
                scaleMismatch.bindText(5, intsToText(sm.ranks));
                scaleMismatch.bindDouble(6, sm.scaleInv);
                scaleMismatch.bindDouble(7, sm.ratio);
                if (!scaleMismatch.run()) {
                    return fail(scaleMismatch.error());
                }
            }
        }
        for (const Diagnostic& d : r.diagnostics) {
            if (!saveDiagnostic(d, idx)) {
                return fail(diagnostic.error());
            }
        }
    }
    for (const Diagnostic& d : output.diagnostics) {
        if (!saveDiagnostic(d, std::nullopt)) {
            return fail(diagnostic.error());
        }
    }
    if (!transaction.commit()) {
        return fail(transaction.error());
    }
    return true;
}

std::optional<ComparisonOutput> ResultsStore::load(const QString& fingerprint,
                                                   DetailLoading loading) {
    // A read transaction, so that a concurrent save() never shows half a run.
    if (!sqlite::exec(db_, "BEGIN", nullptr)) {
        return std::nullopt;
    }
    const EndRead endRead{db_};

    Statement run(db_,
                  "SELECT id, backend, bytes, cancelled FROM runs WHERE fingerprint = ? "
                  "AND cancelled = 0");
    run.bindText(1, fingerprint);
    if (!run.step()) {
        return std::nullopt;
    }
    const qint64 runId = run.integer(0);
    ComparisonOutput output;
    output.backendName = run.text(1);
    output.bytesCompared = run.integer(2);
    output.cancelled = run.integer(3) != 0;

    Statement tensors(db_, selectSql(tensorColumns(), "tensors", "idx").constData());
    tensors.bindInt(1, runId);
    while (tensors.step()) {
        if (tensors.integer(0) != static_cast<qint64>(output.results.size())) {
            return std::nullopt;  // a gap in the order: not a run this code wrote
        }
        auto result = readTensor(tensors);
        if (!result) {
            return std::nullopt;
        }
        output.results.push_back(std::move(*result));
    }
    if (!tensors.ok() || tensors.failed()) {
        return std::nullopt;
    }
    auto& results = output.results;
    const std::size_t n = results.size();

    const bool onDemand = loading == DetailLoading::OnDemand;
    const bool childrenLoaded =
        (onDemand ||
         loadChildren(db_,
                      "SELECT tensor_idx, rank, seq FROM tensor_rank_seq WHERE run_id = ? "
                      "ORDER BY tensor_idx, rank",
                      runId, n,
                      [&](std::size_t t, const Statement& row) {
                          results[t].rankSeq[static_cast<int>(row.integer(1))] = row.integer(2);
                          return true;
                      })) &&
        (onDemand ||
         loadChildren(db_, selectSql(shardColumns(), "shards", "tensor_idx, idx"), runId, n,
                      [&](std::size_t t, const Statement& row) {
                          auto shard = readShard(row);
                          if (!shard) {
                              return false;
                          }
                          results[t].shards.push_back(std::move(*shard));
                          return true;
                      })) &&
        loadChildren(db_,
                     "SELECT tensor_idx, ranges, ranks_a, ranks_b, differing_elements, "
                     "max_abs_difference FROM replica_mismatches WHERE run_id = ? "
                     "ORDER BY tensor_idx, idx",
                     runId, n,
                     [&](std::size_t t, const Statement& row) {
                         ReplicaMismatch rm;
                         auto ranges = ShardRanges::fromJson(row.text(1));
                         auto ranksA = intsFromText<int>(row.text(2));
                         auto ranksB = intsFromText<int>(row.text(3));
                         if (!ranges || !ranksA || !ranksB) {
                             return false;
                         }
                         rm.ranges = std::move(*ranges);
                         rm.ranksA = std::move(*ranksA);
                         rm.ranksB = std::move(*ranksB);
                         rm.differingElements = row.integer(4);
                         rm.maxAbsDifference = row.real(5);
                         results[t].replicaMismatches.push_back(std::move(rm));
                         return true;
                     }) &&
        loadChildren(db_,
                     "SELECT tensor_idx, reference_scale_inv, perturbed_scale_inv, tolerance, "
                     "max_difference, copies_agree FROM fp8_scales WHERE run_id = ? "
                     "ORDER BY tensor_idx",
                     runId, n,
                     [&](std::size_t t, const Statement& row) {
                         Fp8ScaleCheck check;
                         check.referenceScaleInv = row.real(1);
                         if (!row.isNull(2)) {
                             check.perturbedScaleInv = row.real(2);
                         }
                         check.tolerance = row.real(3);
                         check.maxDifference = row.real(4);
                         check.copiesAgree = row.integer(5) != 0;
                         results[t].fp8Scales = std::move(check);
                         return true;
                     }) &&
        loadChildren(db_,
                     "SELECT tensor_idx, ranges, ranks, scale_inv, ratio FROM "
                     "fp8_scale_mismatches WHERE run_id = ? ORDER BY tensor_idx, idx",
                     runId, n, [&](std::size_t t, const Statement& row) {
                         auto ranges = ShardRanges::fromJson(row.text(1));
                         auto ranks = intsFromText<int>(row.text(2));
                         if (!ranges || !ranks || !results[t].fp8Scales) {
                             return false;
                         }
                         results[t].fp8Scales->mismatches.push_back(
                             {std::move(*ranges), std::move(*ranks), row.real(3), row.real(4)});
                         return true;
                     });
    if (!childrenLoaded) {
        return std::nullopt;
    }

    Statement diagnostics(db_,
                          "SELECT tensor_idx, severity, file, dataset, tensor, message "
                          "FROM diagnostics WHERE run_id = ? ORDER BY idx");
    diagnostics.bindInt(1, runId);
    while (diagnostics.step()) {
        auto d = readDiagnostic(diagnostics, 1);
        if (!d) {
            return std::nullopt;
        }
        if (diagnostics.isNull(0)) {
            output.diagnostics.push_back(std::move(*d));
            continue;
        }
        const qint64 t = diagnostics.integer(0);
        if (t < 0 || static_cast<std::size_t>(t) >= n) {
            return std::nullopt;
        }
        results[static_cast<std::size_t>(t)].diagnostics.push_back(std::move(*d));
    }
    if (!diagnostics.ok() || diagnostics.failed()) {
        return std::nullopt;
    }
    return output;
}

std::optional<TraceOpening> ResultsStore::loadOpening(const QString& fingerprint) {
    if (!sqlite::exec(db_, "BEGIN", nullptr)) {
        return std::nullopt;
    }
    const EndRead endRead{db_};
    const auto runId = reusableRunId(db_, fingerprint);
    if (!runId) {
        return std::nullopt;
    }
    TraceOpening opening;
    bool distributed = false;
    bool reference = false;
    Statement traces(db_, "SELECT role, datasets FROM run_traces WHERE run_id = ?");
    traces.bindInt(1, *runId);
    while (traces.step()) {
        const QString role = traces.text(0);
        const std::int64_t datasets = traces.integer(1);
        if (role == kDistributedRole) {
            opening.distributedDatasets = datasets;
            distributed = true;
        } else if (role == kReferenceRole) {
            opening.referenceDatasets = datasets;
            reference = true;
        } else if (role == kPerturbedRole) {
            opening.perturbedDatasets = datasets;
        } else {
            return std::nullopt;
        }
    }
    if (!traces.ok() || traces.failed() || !distributed || !reference) {
        return std::nullopt;
    }
    Statement diagnostics(db_,
                          "SELECT severity, file, dataset, tensor, message FROM "
                          "opening_diagnostics WHERE run_id = ? ORDER BY idx");
    diagnostics.bindInt(1, *runId);
    while (diagnostics.step()) {
        auto d = readDiagnostic(diagnostics, 0);
        if (!d) {
            return std::nullopt;
        }
        opening.diagnostics.push_back(std::move(*d));
    }
    if (!diagnostics.ok() || diagnostics.failed()) {
        return std::nullopt;
    }
    return opening;
}

bool ResultsStore::saveOpening(const QString& fingerprint, const TraceOpening& opening,
                               QString* error) {
    const auto fail = [&](const QString& why) { return saveFailed(db_, why, error); };
    sqlite::Transaction transaction(db_);
    if (!transaction.ok()) {
        return fail(transaction.error());
    }
    const auto runId = reusableRunId(db_, fingerprint);
    if (!runId) {
        return fail(QStringLiteral("no stored run has the fingerprint %1").arg(fingerprint));
    }
    if (QString why; !writeOpening(db_, *runId, opening, &why)) {
        return fail(why);
    }
    if (!transaction.commit()) {
        return fail(transaction.error());
    }
    return true;
}

std::shared_ptr<const ResultDetails> ResultsStore::details(const QString& fingerprint) {
    const auto runId = reusableRunId(db_, fingerprint);
    if (!runId) {
        return nullptr;
    }
    QString error;  // the store itself opened the same file a moment ago
    sqlite::Database db =
        sqlite::openDatabase(QString::fromUtf8(sqlite3_db_filename(db_, "main")), &error);
    if (!db) {
        return nullptr;
    }
    return std::make_shared<const StoredDetails>(std::move(db), *runId);
}

}  // namespace ttrace
