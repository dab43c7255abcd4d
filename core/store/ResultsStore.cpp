#include "store/ResultsStore.h"

#include <sqlite3.h>

#include <QDateTime>
#include <QJsonArray>
#include <QJsonDocument>
#include <QStringList>
#include <algorithm>
#include <mutex>
#include <utility>

#include "compare/UntrustedThresholds.h"
#include "store/ResultRows.h"
#include "store/ResultsSchema.h"
#include "store/Sqlite.h"

namespace ttrace {

namespace {

using sqlite::Statement;
using namespace result_rows;
// Which result the tensor stored at `position` is: its index in `positions` (the stored
// positions of a run's results, ascending), or nullopt when no result is stored there.
std::optional<std::size_t> resultAt(const std::vector<qint64>& positions, qint64 position) {
    const auto it = std::lower_bound(positions.begin(), positions.end(), position);
    if (it == positions.end() || *it != position) {
        return std::nullopt;
    }
    return static_cast<std::size_t>(it - positions.begin());
}

// Loads the child rows of `table` into results[the result at tensor_idx]; false on a bad row
// or an error.
template <typename ReadRow>
bool loadChildren(sqlite3* db, const QByteArray& sql, qint64 runId,
                  const std::vector<qint64>& positions, ReadRow readRow) {
    Statement stmt(db, sql.constData());
    stmt.bindInt(1, runId);
    while (stmt.step()) {
        const auto result = resultAt(positions, stmt.integer(0));
        if (!result || !readRow(*result, stmt)) {
            return false;
        }
    }
    return stmt.ok() && !stmt.failed();
}

// The positions of the results of run `runId`, ascending; nullopt on an error.
std::optional<std::vector<qint64>> storedPositions(sqlite3* db, qint64 runId) {
    Statement select(db, "SELECT idx FROM tensors WHERE run_id = ? ORDER BY idx");
    select.bindInt(1, runId);
    std::vector<qint64> positions;
    while (select.step()) {
        positions.push_back(select.integer(0));
    }
    if (!select.ok() || select.failed()) {
        return std::nullopt;
    }
    return positions;
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
                         "tensor, message, details, code) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
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

// The id of the run with this fingerprint: a complete one, reusable, or with `which`
// IncompleteToo also one whose check stopped or is still being written.
std::optional<qint64> storedRunId(sqlite3* db, const QString& fingerprint,
                                  StoredRuns which = StoredRuns::Complete) {
    Statement run(db, which == StoredRuns::Complete
                          ? "SELECT id FROM runs WHERE fingerprint = ? AND cancelled = 0"
                          : "SELECT id FROM runs WHERE fingerprint = ?");
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

// may ask at once.
class StoredDetails : public ResultDetails {
public:
    // `positions`: where each result is stored (storedPositions()).
    StoredDetails(sqlite::Database db, qint64 runId, std::vector<qint64> positions)
        : db_(std::move(db)),
          shards_(db_.get(), QByteArray(QByteArray("SELECT ") + shardColumns() +
                                        " FROM shards WHERE run_id = ? AND tensor_idx = ? "
                                        "ORDER BY idx")
                                 .constData()),
          rankSeq_(db_.get(),
                   "SELECT rank, seq FROM tensor_rank_seq WHERE run_id = ? AND tensor_idx = ?"),
          runId_(runId),
          positions_(std::move(positions)) {}

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
        if (!select.ok() || !transaction.ok() || index >= positions_.size()) {
            return false;
        }
        select.reset();
        select.bindInt(1, runId_);
        select.bindInt(2, positions_[index]);
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
    std::vector<qint64> positions_;
    mutable std::mutex mutex_;
};

}  // namespace

std::unique_ptr<ResultsStore> ResultsStore::open(const QString& path, QString* error,
                                                 QString* setAside) {
    QString reason;
    sqlite::Database db = sqlite::openDatabase(path, &reason, setAside);
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

std::unique_ptr<RunWriter> ResultsStore::beginRun(const QString& fingerprint,
                                                  const QString& description,
                                                  const TraceOpening& opening, QString* error) {
    const auto fail = [&](const QString& why) {
        saveFailed(db_, why, error);
        return nullptr;
    };
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
    // Incomplete (cancelled = 1) until RunWriter::finish() says otherwise.
    Statement run(db_,
                  "INSERT INTO runs (fingerprint, description, backend, bytes, cancelled, "
                  "created) VALUES (?, ?, '', 0, 1, ?)");
    run.bindText(1, fingerprint);
    run.bindText(2, description);
    run.bindText(3, QDateTime::currentDateTimeUtc().toString(Qt::ISODateWithMs));
    if (!run.run()) {
        return fail(run.error());
    }
    const qint64 runId = sqlite3_last_insert_rowid(db_);
    if (QString why; !writeOpening(db_, runId, opening, &why)) {
        return fail(why);
    }
    if (!transaction.commit()) {
        return fail(transaction.error());
    }
    return std::unique_ptr<RunWriter>(new RunWriter(db_, runId));
}

bool ResultsStore::save(const QString& fingerprint, const QString& description,
                        const ComparisonOutput& output, const TraceOpening& opening,
                        QString* error) {
    const auto writer = beginRun(fingerprint, description, opening, error);
    if (!writer) {
        return false;
    }
    for (std::size_t i = 0; i < output.results.size(); ++i) {
        if (!writer->add(static_cast<std::int64_t>(i), output.results[i])) {
            break;
        }
    }
    if (!writer->finish(output)) {
        if (error) {
            *error = writer->error();
        }
        return false;
    }
    return true;
}

std::optional<ComparisonOutput> ResultsStore::load(const QString& fingerprint,
                                                   DetailLoading loading, StoredRuns which) {
    // A read transaction, so that a concurrent save() never shows half a run.
    if (!sqlite::exec(db_, "BEGIN", nullptr)) {
        return std::nullopt;
    }
    const EndRead endRead{db_};

    const auto runId = storedRunId(db_, fingerprint, which);
    if (!runId) {
        return std::nullopt;
    }
    Statement run(db_,
                  "SELECT backend, bytes, reference_tensors, not_captured, not_in_reference "
                  "FROM runs WHERE id = ?");
    run.bindInt(1, *runId);
    if (!run.step()) {
        return std::nullopt;
    }
    ComparisonOutput output;
    output.backendName = run.text(0);
    output.bytesCompared = run.integer(1);
    output.coverage = {run.integer(2), run.integer(3), run.integer(4)};

    // Results are stored at their position in the reference's execution order; tensors
    // without a result leave gaps (RunWriter).
    Statement tensors(db_, selectSql(tensorColumns(), "tensors", "idx").constData());
    tensors.bindInt(1, *runId);
    std::vector<qint64> positions;
    while (tensors.step()) {
        auto result = readTensor(tensors);
        if (!result) {
            return std::nullopt;
        }
        positions.push_back(tensors.integer(0));
        output.results.push_back(std::move(*result));
    }
    if (!tensors.ok() || tensors.failed()) {
        return std::nullopt;
    }
    auto& results = output.results;

    const bool onDemand = loading == DetailLoading::OnDemand;
    const bool childrenLoaded =
        (onDemand ||
         loadChildren(db_,
                      "SELECT tensor_idx, rank, seq FROM tensor_rank_seq WHERE run_id = ? "
                      "ORDER BY tensor_idx, rank",
                      *runId, positions,
                      [&](std::size_t t, const Statement& row) {
                          results[t].rankSeq[static_cast<int>(row.integer(1))] = row.integer(2);
                          return true;
                      })) &&
        (onDemand || loadChildren(db_, selectSql(shardColumns(), "shards", "tensor_idx, idx"),
                                  *runId, positions,
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
                     *runId, positions,
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
                     "SELECT tensor_idx, ranges, rank, differing_elements, elements, "
                     "scales_differ FROM recomputation_mismatches WHERE run_id = ? "
                     "ORDER BY tensor_idx, idx",
                     *runId, positions,
                     [&](std::size_t t, const Statement& row) {
                         auto ranges = ShardRanges::fromJson(row.text(1));
                         if (!ranges) {
                             return false;
                         }
                         results[t].recomputationMismatches.push_back(
                             {std::move(*ranges), static_cast<int>(row.integer(2)), row.integer(3),
                              row.integer(4), row.integer(5) != 0});
                         return true;
                     }) &&
        loadChildren(db_,
                     "SELECT tensor_idx, reference_scale_inv, perturbed_scale_inv, tolerance, "
                     "max_difference, copies_agree, reference_block, blocks_not_compared, "
                     "data_parallel_blocks, reference_format, reference_tensor_scale "
                     "FROM fp8_scales WHERE run_id = ? ORDER BY tensor_idx",
                     *runId, positions,
                     [&](std::size_t t, const Statement& row) {
                         Fp8ScaleCheck check;
                         check.referenceScaleInv = row.real(1);
                         if (!row.isNull(2)) {
                             check.perturbedScaleInv = row.real(2);
                         }
                         check.tolerance = row.real(3);
                         check.maxDifference = row.real(4);
                         check.copiesAgree = row.integer(5) != 0;
                         auto block = intsFromText<std::int64_t>(row.text(6));
                         if (!block) {
                             return false;
                         }
                         check.referenceBlock = std::move(*block);
                         check.blocksNotCompared = row.integer(7);
                         check.dataParallelBlocks = row.integer(8);
                         const QString format = row.text(9);
                         check.referenceFormat = scaleFormatFromName(format);
                         if (!format.isEmpty() && !check.referenceFormat) {
                             return false;
                         }
                         check.referenceTensorScale = row.integer(10) != 0;
                         results[t].fp8Scales = std::move(check);
                         return true;
                     }) &&
        loadChildren(db_,
                     "SELECT tensor_idx, ranges, ranks, scale_inv, ratio, block, "
                     "reference_scale_inv, blocks_beyond, across_reference_blocks "
                     "FROM fp8_scale_mismatches "
                     "WHERE run_id = ? ORDER BY tensor_idx, idx",
                     *runId, positions, [&](std::size_t t, const Statement& row) {
                         auto ranges = ShardRanges::fromJson(row.text(1));
                         auto ranks = intsFromText<int>(row.text(2));
                         auto block = ShardRanges::fromJson(row.text(5));
                         if (!ranges || !ranks || !block || !results[t].fp8Scales) {
                             return false;
                         }
                         results[t].fp8Scales->mismatches.push_back(
                             {std::move(*ranges), std::move(*ranks), std::move(*block), row.real(3),
                              row.real(6), row.real(4), row.integer(7), row.integer(8) != 0});
                         return true;
                     });
    if (!childrenLoaded) {
        return std::nullopt;
    }

    Statement diagnostics(
        db_,
        "SELECT tensor_idx, severity, file, dataset, tensor, message, details, code "
        "FROM diagnostics WHERE run_id = ? ORDER BY idx");
    diagnostics.bindInt(1, *runId);
    while (diagnostics.step()) {
        auto d = readDiagnostic(diagnostics, 1);
        if (!d) {
            return std::nullopt;
        }
        if (diagnostics.isNull(0)) {
            output.diagnostics.push_back(std::move(*d));
            continue;
        }
        const auto t = resultAt(positions, diagnostics.integer(0));
        if (!t) {
            return std::nullopt;
        }
        results[*t].diagnostics.push_back(std::move(*d));
    }
    if (!diagnostics.ok() || diagnostics.failed()) {
        return std::nullopt;
    }
    output.coverage.blind = countBlind(output.results);  // derived from the thresholds stored
    return output;
}

std::optional<TraceOpening> ResultsStore::loadOpening(const QString& fingerprint) {
    if (!sqlite::exec(db_, "BEGIN", nullptr)) {
        return std::nullopt;
    }
    const EndRead endRead{db_};
    const auto runId = storedRunId(db_, fingerprint);
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
                          "SELECT severity, file, dataset, tensor, message, details, code FROM "
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
    const auto runId = storedRunId(db_, fingerprint);
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

std::shared_ptr<const ResultDetails> ResultsStore::details(const QString& fingerprint,
                                                           StoredRuns which) {
    const auto runId = storedRunId(db_, fingerprint, which);
    if (!runId) {
        return nullptr;
    }
    QString error;  // the store itself opened the same file a moment ago
    sqlite::Database db =
        sqlite::openDatabase(QString::fromUtf8(sqlite3_db_filename(db_, "main")), &error);
    if (!db) {
        return nullptr;
    }
    auto positions = storedPositions(db.get(), *runId);
    if (!positions) {
        return nullptr;
    }
    return std::make_shared<const StoredDetails>(std::move(db), *runId, std::move(*positions));
}

}  // namespace ttrace
