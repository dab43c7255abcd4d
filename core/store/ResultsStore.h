#pragma once

#include <QString>
#include <memory>
#include <optional>

#include "compare/ComparisonJob.h"
#include "compare/ResultDetails.h"
#include "store/RunWriter.h"

struct sqlite3;

namespace ttrace {

// Whether load() reads every shard copy and rank sequence number with the results, or leaves
// them to details().
enum class DetailLoading { WithResults, OnDemand };

// Which runs load() and details() find: only complete ones, which are reused, or also one
// whose check stopped before the end (to report what it did compare).
enum class StoredRuns { Complete, IncompleteToo };

// What opening a run's trace sets found: each set's dataset count and the problems reported
// while reading its manifest and indexing it. Stored with the run, so that an unchanged run is
// shown again from the store alone, without indexing its traces.
struct TraceOpening {
    std::int64_t distributedDatasets = 0;
    std::int64_t referenceDatasets = 0;
    std::optional<std::int64_t> perturbedDatasets;  // when a perturbed reference was given
    Diagnostics diagnostics;
};

// SQLite results cache (WAL, one transaction per run): runs, what opening their traces found,
// tensors, shards, replica mismatches and diagnostics. A run is found again by its
// fingerprint: the identity of every trace file (path, size, modification time), the
// threshold config and the ttrace version.
class ResultsStore {
public:
    // Opens (creating) the store at `path`; null and `error` on failure. A file there that is
    // no sound database is set aside and a new store started; `setAside` then says so.
    static std::unique_ptr<ResultsStore> open(const QString& path, QString* error,
                                              QString* setAside = nullptr);
    ~ResultsStore();

    // The stored results of the run with this fingerprint, if any; with OnDemand, every
    // result's `shards` and `rankSeq` are left empty. The output's `unchecked` is not stored.
    std::optional<ComparisonOutput> load(const QString& fingerprint,
                                         DetailLoading loading = DetailLoading::WithResults,
                                         StoredRuns which = StoredRuns::Complete);
    // Reads the shards and rank sequence numbers of that run's results one tensor at a time,
    // on a connection of its own (it outlives this store); null when the run is not stored.
    std::shared_ptr<const ResultDetails> details(const QString& fingerprint,
                                                 StoredRuns which = StoredRuns::Complete);
    // What opening the traces of that run found; none for a run stored without it (by an
    // older ttrace) or not stored.
    std::optional<TraceOpening> loadOpening(const QString& fingerprint);
    // Begins storing (replacing) the results of a run with this fingerprint: the writer adds
    // them as they come and marks the run complete when done. Null and `error` set on failure.
    std::unique_ptr<RunWriter> beginRun(const QString& fingerprint, const QString& description,
                                        const TraceOpening& opening, QString* error);
    // Stores (replacing) the results of a run at once; returns false and sets `error` on
    // failure.
    bool save(const QString& fingerprint, const QString& description,
              const ComparisonOutput& output, const TraceOpening& opening, QString* error);
    // Adds the opening to a run stored without one; false when there is no such run.
    bool saveOpening(const QString& fingerprint, const TraceOpening& opening, QString* error);

private:
    explicit ResultsStore(sqlite3* db);
    sqlite3* db_;
};

// Fingerprint of a comparison: trace files' identities, the config, the block size (it sets the
// grouping of the double sums, so the last bits of every result), the tool version and the
// engine's sources (engineSourcesHash: a rebuilt checker may decide otherwise). Only
// each set's folder and manifest are used: a set not indexed yet has the same fingerprint.
QString runFingerprint(const TraceSet& distributed, const TraceSet& reference,
                       const TraceSet* perturbed, const ThresholdConfig& config,
                       std::int64_t chunkElements);

}  // namespace ttrace
