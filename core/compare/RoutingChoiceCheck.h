#pragma once

#include <QString>
#include <vector>

#include "compare/TensorResult.h"
#include "trace/Diagnostic.h"
#include "trace/Manifest.h"

namespace ttrace {

// Routing replay hands every router the reference's experts, so a bug in the choice itself
// (the scores right, the experts wrong) leaves no trace in the compared tensors. Each replaying
// run counts the tokens its own choice would have routed elsewhere; the perturbed reference's
// count is what round-off near ties gives (docs/thresholds.md, "Routing choices under
// replay").

// A router of the distributed run whose own choices differ from the reference's on more
// tokens than the perturbed reference's rate explains.
struct RoutingChoiceFinding {
    QString router;
    RoutingChoices distributed;
    RoutingChoices perturbed;
    double expected = 0.0;  // tokens round-off would flip in the distributed run
};

// Below this chance of seeing as many flips by round-off, a router is named.
inline constexpr double kRoutingFlipChance = 1e-6;

// The chance that a Poisson count of mean `mean` is `count` or more.
[[nodiscard]] double poissonTail(double mean, qint64 count);

// The routers of `distributed` whose flips are beyond round-off, judged by the same router's
// counts in `perturbed`; routers the perturbed reference did not count are not judged, nor
// those with a faulty forward input among `results` (their choices follow from their input,
// and the tensors already show it).
[[nodiscard]] std::vector<RoutingChoiceFinding> routingChoicesBeyondRoundOff(
    const std::vector<RoutingChoices>& distributed, const std::vector<RoutingChoices>& perturbed,
    const std::vector<TensorResult>& results);

// One warning per finding, on the distributed run's folder.
void warnRoutingChoices(const std::vector<RoutingChoiceFinding>& findings,
                        const QString& distributedFolder, Diagnostics& diagnostics);

}  // namespace ttrace
