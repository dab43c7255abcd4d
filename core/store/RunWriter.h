#pragma once

#include <QElapsedTimer>
#include <QString>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "compare/ComparisonJob.h"
#include "compare/TensorResult.h"
#include "store/Sqlite.h"

namespace ttrace {

// Writes one run's results into the results store as they arrive, so that a check never
// holds them all: ResultsStore::beginRun() creates the run, marked incomplete (load() skips
// it) until finish() says it is complete. Each result is stored at its position among the
// run's results (ComparisonPlan::positions: the reference's execution order); positions
// without a result are skipped when the run is loaded. Writes are committed in batches of
// about half a second, so that a million shard rows do not cost a million commits.
// Thread-safe. The store that began the run must outlive the writer.
class RunWriter {
public:
    ~RunWriter();
    RunWriter(const RunWriter&) = delete;
    RunWriter& operator=(const RunWriter&) = delete;

    // Stores `result` with its shards, rank sequence numbers, replica and fp8 scale
    // mismatches and diagnostics. False once a write failed (error() says why): later calls
    // then store nothing.
    bool add(std::int64_t position, const TensorResult& result);
    // Stores what belongs to the run as a whole in `run`: its own diagnostics (those of no
    // stored tensor), the backend, its coverage, the bytes compared by the results added, and
    // marks it complete when run.complete(). run.results are not stored here: add() them.
    bool finish(const ComparisonOutput& run);
    // Why a write failed, naming the store's file; empty when none did.
    QString error() const;
    // After a failure: the results add() had accepted in the batch the failure rolled back,
    // with their positions, so that the check can still report them (from memory). Those of
    // batches committed before are in the store (ResultsStore::load, StoredRuns::IncompleteToo).
    std::vector<std::pair<std::int64_t, TensorResult>> takeUnstored();

private:
    friend class ResultsStore;
    struct Statements;
    RunWriter(sqlite3* db, std::int64_t runId);
    // Begins a batch when none is open; called with mutex_ held.
    bool inBatch();
    bool fail(const QString& why);

    sqlite3* db_;
    std::int64_t runId_;
    std::unique_ptr<Statements> statements_;
    mutable std::mutex mutex_;
    std::unique_ptr<sqlite::Transaction> batch_;  // declared after statements_: ends first
    // The results of the open batch (half a second's worth), kept until it commits.
    std::vector<std::pair<std::int64_t, TensorResult>> inBatch_;
    std::vector<std::pair<std::int64_t, TensorResult>> unstored_;  // rolled back by a failure
    QElapsedTimer batchAge_;
    std::int64_t diagnosticIdx_ = 0;
    std::int64_t bytes_ = 0;
    QString error_;
};

}  // namespace ttrace
