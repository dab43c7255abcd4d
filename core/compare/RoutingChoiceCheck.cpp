#include "compare/RoutingChoiceCheck.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace ttrace {

double poissonTail(double mean, qint64 count) {
    if (count <= 0) {
        return 1.0;
    }
    if (mean <= 0.0) {
        return 0.0;
    }
    if (static_cast<double>(count) <= mean) {
        return 1.0;  // at or below the mean: nothing to judge, and the sum below would not end
    }
    // Past the mean the terms only shrink: sum them from P(X = count) until they stop mattering.
    const double k = static_cast<double>(count);
    double term = std::exp(-mean + k * std::log(mean) - std::lgamma(k + 1.0));
    double sum = 0.0;
    for (double i = k; term > sum * 1e-17 && term > 0.0; i += 1.0) {
        sum += term;
        term *= mean / (i + 1.0);
    }
    return std::min(sum, 1.0);
}

std::vector<RoutingChoiceFinding> routingChoicesBeyondRoundOff(
    const std::vector<RoutingChoices>& distributed, const std::vector<RoutingChoices>& perturbed,
    const std::vector<TensorResult>& results) {
    std::set<QString> faultyInput;
    for (const auto& r : results) {
        if (r.key.kind == TensorKind::ForwardInput && r.isFaulty()) {
            faultyInput.insert(r.key.name);
        }
    }
    std::vector<RoutingChoiceFinding> findings;
    for (const auto& mine : distributed) {
        if (faultyInput.count(mine.router) != 0) {
            continue;
        }
        const auto theirs =
            std::find_if(perturbed.begin(), perturbed.end(),
                         [&](const RoutingChoices& p) { return p.router == mine.router; });
        if (theirs == perturbed.end() || theirs->tokens == 0 || mine.differing == 0) {
            continue;
        }
        // One flip more than the perturbed reference saw: a rate of zero from a finite count
        // is not evidence that round-off never flips a token.
        const double rate =
            static_cast<double>(theirs->differing + 1) / static_cast<double>(theirs->tokens);
        const double expected = rate * static_cast<double>(mine.tokens);
        if (poissonTail(expected, mine.differing) < kRoutingFlipChance) {
            findings.push_back({mine.router, mine, *theirs, expected});
        }
    }
    return findings;
}

void warnRoutingChoices(const std::vector<RoutingChoiceFinding>& findings,
                        const QString& distributedFolder, Diagnostics& diagnostics) {
    for (const auto& f : findings) {
        diagnostics.push_back(fileDiagnostic(
            Severity::Warning, distributedFolder,
            QStringLiteral(
                "%1: the distributed run's own top-k choices differ from the reference's on %2 "
                "of %3 tokens, where round-off near ties explains about %4 (the perturbed "
                "reference's own choices differ on %5 of %6): the choice itself looks wrong. "
                "Routing replay gave every run the reference's experts, so the compared tensors "
                "cannot show it; check once without replay_routing_from to localize it "
                "(docs/capture.md, \"Routing replay\")")
                .arg(f.router)
                .arg(f.distributed.differing)
                .arg(f.distributed.tokens)
                .arg(QString::number(f.expected, 'g', 3))
                .arg(f.perturbed.differing)
                .arg(f.perturbed.tokens)));
    }
}

}  // namespace ttrace
