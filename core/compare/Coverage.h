#pragma once

#include <QString>
#include <cstdint>
#include <vector>

#include "compare/TrustedRun.h"
#include "trace/Diagnostic.h"
#include "trace/TraceCatalog.h"

namespace ttrace {

// What a comparison rests on: how many of the reference's tensors there are, and how many
// tensors one run holds and the other lacks (docs/checker.md, "Coverage"). With the number of
// results it says whether the check looked at everything.
struct Coverage {
    std::int64_t referenceTensors = 0;  // logical tensors of the reference
    std::int64_t notCaptured = 0;       // reference tensors the distributed run lacks
    std::int64_t notInReference = 0;    // distributed tensors the reference lacks
    // Compared tensors whose threshold no bug could exceed (Threshold::blind): set with the
    // results (countBlind), compared but not effectively checked.
    std::int64_t blind = 0;

    // Reference tensors present in both runs but not compared (unreadable, inconsistent).
    std::int64_t notCompared(std::int64_t compared) const {
        return referenceTensors - notCaptured - compared;
    }
    // Every tensor of both runs compared, and effectively checked.
    bool complete(std::int64_t compared) const {
        return compared == referenceTensors && notInReference == 0 && blind == 0;
    }
    // "356 of 356 reference tensors compared", then what was left out: "40 of 356 reference
    // tensors compared; 316 not captured; 3 not comparable; 2 distributed tensors not in the
    // reference; 1 blind (threshold of 1 or more)".
    QString describe(std::int64_t compared) const;

    friend bool operator==(const Coverage&, const Coverage&) = default;
};

// Counts the tensors one run holds and the other lacks, and says which in warnings grouped
// for a person to read: layers the distributed run lacks entirely (a pipeline stage or layers
// that never ran, or that the capture left out), then module by module with the kinds,
// iterations and micro-batches missing; likewise the distributed tensors the reference
// lacks. A few dozen lines at most, whatever the size of the gap.
// Distributed tensors the reference lacks also say the ranks that hold them (read from the
// first few hundred such tensors' records).
// Module gaps are said in the reference's execution order. The reference's tensors that did
// not assemble (TrustedRun::refused) are reference tensors all the same, not comparable when
// the distributed run holds them (their errors say why), never "not in the reference".
[[nodiscard]] Coverage measureCoverage(const TraceCatalog& distributed, const TrustedRun& reference,
                                       Diagnostics& diagnostics);

}  // namespace ttrace
