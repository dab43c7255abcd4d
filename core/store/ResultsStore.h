#pragma once

#include <QString>
#include <memory>
#include <optional>

#include "compare/ComparisonJob.h"

struct sqlite3;

namespace ttrace {

// SQLite results cache (WAL, one transaction per run): runs, tensors, shards, replica
// mismatches and diagnostics. A run is found again by its fingerprint: the identity of every
// trace file (path, size, modification time), the threshold config and the ttrace version.
class ResultsStore {
public:
    static std::unique_ptr<ResultsStore> open(const QString& path, QString* error);
    ~ResultsStore();

    // The stored results of the run with this fingerprint, if any.
    std::optional<ComparisonOutput> load(const QString& fingerprint);
    // Stores (replacing) the results of a run; returns false and sets `error` on failure.
    bool save(const QString& fingerprint, const QString& description,
              const ComparisonOutput& output, QString* error);

private:
    explicit ResultsStore(sqlite3* db);
    sqlite3* db_;
};

// Fingerprint of a comparison: trace files' identities, the config, the block size (it sets the
// grouping of the double sums, so the last bits of every result) and the tool version.
QString runFingerprint(const TraceSet& distributed, const TraceSet& reference,
                       const TraceSet* perturbed, const ThresholdConfig& config,
                       std::int64_t chunkElements);

}  // namespace ttrace
