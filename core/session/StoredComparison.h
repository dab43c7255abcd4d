#pragma once

#include <memory>

#include "compare/ComparisonJob.h"
#include "compare/ResultDetails.h"
#include "session/DistributedComparison.h"
#include "store/ResultsStore.h"

namespace ttrace {

// Where rank 0 of a check keeps the results it compares.
struct ResultsDestination {
    ResultsStore* store = nullptr;  // null: results are held in memory
    QString fingerprint;
    QString description;
    TraceOpening opening;
    // Whether the results are read back with their shards and rank sequence numbers, or
    // leave them to `details` (CheckRequest::detailsOnDemand).
    DetailLoading loading = DetailLoading::OnDemand;
};

struct ComparedRun {
    ComparisonOutput output;
    std::shared_ptr<const ResultDetails> details;  // set when read back with OnDemand
    // What of the cache could not be written: the store, a journal (each in its own words).
    Diagnostics warnings;
    bool stored = false;  // the results are in the store, for later checks to reuse
    bool cancelled = false;
};

// The comparison step of a check (compareAcrossProcesses) with its results written into the
// results store as they come, then read back: rank 0 never holds every shard copy of every
// tensor at once, whatever the size of the trace. Without a store, or when the store fails
// partway (the results already handed to it then come back from what it had committed, what
// it rolled back, and the outcome journals), the results are held in memory. Every process calls
// it; only rank 0's return value means anything.
[[nodiscard]] ComparedRun compareIntoStore(const ComparisonPlan& plan,
                                           const ComparisonOptions& options,
                                           const OutcomePersistence& persistence,
                                           ProcessGroup& group,
                                           const ResultsDestination& destination);

}  // namespace ttrace
