#pragma once

#include <QString>
#include <atomic>
#include <functional>
#include <memory>

#include "compare/ComparisonJob.h"
#include "report/CheckReport.h"
#include "session/ProcessGroup.h"
#include "store/RunLock.h"

namespace ttrace {

// The stages a check goes through, in order; progress is reported per stage.
// Waiting: for another check of the same traces sharing the cache (RunLock).
enum class CheckStage { Indexing, Waiting, Comparing, Localizing };
QString checkStageName(CheckStage stage);

struct CheckRequest {
    QString distributed;
    QString reference;
    QString perturbed;   // empty: no perturbed reference, theoretical thresholds
    QString configPath;  // empty: default thresholds
    QString cacheDir;    // empty: cacheDirectory()'s default
    bool useCache = true;
    int threads = 0;
    std::int64_t chunkElements = kDefaultChunkElements;
    // Where the arithmetic runs (chooseBackend, BackendChoice.h); null: the CPU backend.
    std::shared_ptr<const MetricsBackend> backend;
    // The run's results, read from the results store (a stored run's, or those the check
    // just stored), come without their shards and rank sequence numbers, which are read
    // from the store when asked for (CheckReport::shardsOf, rankSeqOf), so that showing or
    // reporting it does not hold every shard copy and rank of every tensor at once: what the
    // GUI and ttrace-check do. Without a store, results are held whole in memory.
    bool detailsOnDemand = false;
    const std::atomic<bool>* cancel = nullptr;
    // Progress in [0, 1] within a stage; called from worker threads. In a distributed check,
    // on rank 0 only, the whole job's comparison (tensors an earlier run finished included).
    std::function<void(CheckStage stage, double fraction)> progress;
    // Called when an earlier run of the same check, killed or interrupted, had finished
    // `reused` of the `total` tensors: they are not compared again.
    std::function<void(std::size_t reused, std::size_t total)> resuming;
    // The processes sharing this check (an MPI job); null or a group of one: this process
    // alone. Every process of the group calls runCheck with the same request.
    ProcessGroup* processes = nullptr;
};

struct CheckOutcome {
    CheckReport report;
    // False when the inputs could not be compared at all (unreadable manifest, wrong roles,
    // bad config): the report then holds only diagnostics.
    bool compared = false;
    bool cancelled = false;
    // False on the processes other than rank 0 of a distributed check: rank 0 holds the
    // report, theirs is empty.
    bool root = true;
    // Held until the outcome is dropped, after its reports are written from the stored
    // results: no other check of the same traces replaces them meanwhile. Null without a
    // cache.
    std::shared_ptr<RunLock> runLock;
};

// The whole check, shared by the headless checker and the GUI: opens the trace sets
// (read-only, index cached; the distributed run's index stays in the cache, TraceCatalog),
// reuses stored results when nothing changed, otherwise compares, storing each tensor's
// result as it finishes, then localizes. Never throws; every problem ends up in
// report.diagnostics. With several processes, all of them index a share of the rank files
// into the index cache, rank 0 opens the traces from it, the others then open them from that
// cache without writing to it, each compares its share of the tensors, and rank 0 stores
// every result as it gets it (compareAcrossProcesses) and localizes.
[[nodiscard]] CheckOutcome runCheck(const CheckRequest& request);

}  // namespace ttrace
