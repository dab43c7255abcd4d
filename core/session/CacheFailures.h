#pragma once

#include <QStringList>
#include <optional>

#include "store/CacheLocation.h"
#include "trace/Diagnostic.h"

namespace ttrace {

// What a check could not write to its cache (a full disk, a read-only folder: the index, the
// results store, the run lock, a journal), said once at its end in one warning with the cause
// first. The cache costs only the keeping of the results, never the verdict (docs/checker.md).
struct CacheFailures {
    QStringList failures;      // each in its own words, in the order met
    bool resultsKept = false;  // the results are in the store all the same

    void add(const QString& failure);
    // The one warning about `cache`; none when nothing failed.
    [[nodiscard]] std::optional<Diagnostic> warning(const CacheLocation& cache) const;
};

}  // namespace ttrace
