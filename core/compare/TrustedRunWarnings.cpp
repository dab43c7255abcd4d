#include "compare/TrustedRunWarnings.h"

#include "compare/FaultDescription.h"
#include "trace/ShapeText.h"

namespace ttrace {

namespace {

Diagnostic about(const TensorRecord& record, Severity severity, QLatin1String code) {
    Diagnostic diagnostic;
    diagnostic.severity = severity;
    diagnostic.code = code;
    diagnostic.file = record.file;
    diagnostic.dataset = record.dataset;
    diagnostic.tensor = record.key.toString();
    return diagnostic;
}

const TensorRecord* firstRecomputedDifferently(const LogicalTensor& tensor) {
    for (const auto& shard : tensor.shards) {
        for (const auto& replica : shard.replicas) {
            for (const TensorRecord* piece : replica.summands) {
                if (piece->recomputation) {
                    return piece;
                }
            }
        }
    }
    return nullptr;
}

}  // namespace

std::optional<Diagnostic> recomputedDifferently(const LogicalTensor& tensor, const QString& role) {
    const TensorRecord* piece = firstRecomputedDifferently(tensor);
    if (!piece) {
        return std::nullopt;
    }
    Diagnostic warning = about(*piece, Severity::Warning, trusted_run_code::kRecomputedDifferently);
    warning.message =
        QStringLiteral(
            "the %1 recomputed this forward under activation checkpointing differently from "
            "its first forward (%2 differ%3): the %1's own backward used other values, so its "
            "gradients from here on cannot be trusted")
            .arg(role, describeDifference(*piece->recomputation),
                 tensor.ranks().size() > 1 ? QStringLiteral(" on ") + rankPhrase({piece->rank})
                                           : QString());
    return warning;
}

Diagnostics copiesDisagree(const LogicalTensor& tensor, const TensorTally::CopyAgreements& copies,
                           const QString& role, Severity severity, const QString& consequence) {
    Diagnostics diagnostics;
    for (const auto& [at, difference] : copies) {
        if (difference.bitDifferences == 0) {
            continue;
        }
        const Shard& shard = tensor.shards[at.first];
        const Replica& copy = shard.replicas[at.second];
        Diagnostic d = about(*copy.summands.front(), severity, trusted_run_code::kCopiesDiffer);
        d.message = QStringLiteral(
                        "the %1 disagrees with itself: its copy of shard %2 on %3 differs from "
                        "its copy on %4 in %5 of %6 (largest difference %7), where copies must "
                        "be bitwise the same (replicas that diverged); %8")
                        .arg(role, shard.ranges.toString(), rankPhrase(copy.ranks()),
                             rankPhrase(shard.replicas.front().ranks()),
                             QString::number(difference.bitDifferences),
                             counted(difference.count, QStringLiteral("element")),
                             formatValue(difference.maxAbsError), consequence);
        diagnostics.push_back(std::move(d));
    }
    return diagnostics;
}

}  // namespace ttrace
