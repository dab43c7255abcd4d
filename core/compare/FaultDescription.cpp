#include "compare/FaultDescription.h"

#include <QStringList>
#include <algorithm>
#include <set>

#include "trace/ShapeText.h"

namespace ttrace {

QString formatValue(double value) {
    return QString::number(value, 'g', 3);
}

QString formatCount(std::int64_t elements) {
    return QString::number(elements) +
           (elements == 1 ? QStringLiteral(" element") : QStringLiteral(" elements"));
}

QString formatRankList(std::vector<int> ranks) {
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    QStringList runs;
    for (std::size_t i = 0; i < ranks.size();) {
        std::size_t j = i;
        while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) {
            ++j;
        }
        runs << (j == i ? QString::number(ranks[i])
                        : QString::number(ranks[i]) + QLatin1Char('-') + QString::number(ranks[j]));
        i = j + 1;
    }
    constexpr qsizetype kMostRuns = 12;
    if (runs.size() > kMostRuns) {
        const QString last = runs.last();
        runs.erase(runs.begin() + kMostRuns - 2, runs.end());
        runs << QStringLiteral("...") << last + QStringLiteral(" (%1 ranks)").arg(ranks.size());
    }
    return runs.join(QStringLiteral(", "));
}

QString formatRanks(const std::vector<int>& ranks) {
    if (ranks.empty()) {
        return QStringLiteral("no rank");
    }
    return (ranks.size() == 1 ? QStringLiteral("rank ") : QStringLiteral("ranks ")) +
           formatRankList(ranks);
}

namespace {

// A copy whose blocks lie across the reference's: said with both layouts.
QString describeLayoutMismatch(const Fp8ScaleCheck& check, DType dtype) {
    const ScaleMismatch& worst = check.mismatches.front();
    std::set<int> others;
    for (std::size_t i = 1; i < check.mismatches.size(); ++i) {
        if (check.mismatches[i].acrossReferenceBlocks) {
            others.insert(check.mismatches[i].ranks.begin(), check.mismatches[i].ranks.end());
        }
    }
    const QString referenceBlocks =
        check.referenceBlock.empty()
            ? QStringLiteral("the whole tensor")
            : QStringLiteral("blocks of ") + formatShape(check.referenceBlock);
    return scaleRecipe(check, dtype) + QStringLiteral(" scale block ") + worst.block.toString() +
           QStringLiteral(" in shard ") + worst.ranges.toString() + QStringLiteral(" on ") +
           formatRanks(worst.ranks) + QStringLiteral(" lies across the reference's ") +
           referenceBlocks +
           (worst.blocksBeyond > 1
                ? QStringLiteral(" (%1 of its blocks do)").arg(worst.blocksBeyond)
                : QString()) +
           (others.empty()
                ? QString()
                : QStringLiteral(", also on ") + formatRanks({others.begin(), others.end()})) +
           QStringLiteral(
               ": its scales run along another axis, or over other blocks, than the "
               "reference's (laid along the wrong axis after a transpose or a split?)");
}

}  // namespace

QString scaleRecipe(const Fp8ScaleCheck& check, DType dtype) {
    return recipeName(dtype, check.referenceFormat, !check.referenceBlock.empty());
}

QString describeScaleMismatch(const Fp8ScaleCheck& check, DType dtype) {
    const ScaleMismatch& worst = check.mismatches.front();
    if (worst.acrossReferenceBlocks) {
        return describeLayoutMismatch(check, dtype);
    }
    // Per tensor the shard is the block; per row or block, name the block and how many more.
    const bool wholeShard = worst.block == worst.ranges;
    QString text =
        scaleRecipe(check, dtype) + QStringLiteral(" scale_inv of ") +
        (wholeShard ? QString()
                    : QStringLiteral("block ") + worst.block.toString() + QStringLiteral(" in ")) +
        QStringLiteral("shard ") + worst.ranges.toString() + QStringLiteral(" on ") +
        formatRanks(worst.ranks) + QStringLiteral(" is ") + formatValue(worst.ratio) +
        QStringLiteral("x the reference's (tolerance ") + formatValue(check.tolerance) +
        (worst.blocksBeyond > 1
             ? QStringLiteral("; %1 of its blocks beyond it").arg(worst.blocksBeyond)
             : QString()) +
        QLatin1Char(')');
    std::set<int> others;  // the other copies beyond the tolerance
    for (std::size_t i = 1; i < check.mismatches.size(); ++i) {
        others.insert(check.mismatches[i].ranks.begin(), check.mismatches[i].ranks.end());
    }
    if (!others.empty()) {
        text +=
            QStringLiteral(", also beyond it on ") + formatRanks({others.begin(), others.end()});
    }
    // scale_inv = amax / fp8 max: a shard's own amax is at most the whole tensor's (block's).
    return text + (worst.ratio < 1 ? (wholeShard ? QStringLiteral(": amax not reduced across the "
                                                                  "ranks holding the tensor?")
                                                 : QStringLiteral(": amax not reduced across the "
                                                                  "ranks holding the block?"))
                                   : QStringLiteral(": an amax above the whole tensor's, stale "
                                                    "or reduced over the wrong ranks?"));
}

QString describeFault(const TensorResult& result) {
    QStringList parts;
    if (result.normalizedError > 1.0) {
        parts << formatValue(result.normalizedError) +
                     QStringLiteral("x over the threshold (relative error ") +
                     formatValue(result.judgedError()) + QStringLiteral(", threshold ") +
                     formatValue(result.threshold.value) + QLatin1Char(')');
    }
    const auto& m = result.metrics;
    if (m.nanDist > m.nanRef || m.infDist > m.infRef) {
        parts << QStringLiteral("has ") + QString::number(m.nanDist) + QStringLiteral(" NaN and ") +
                     QString::number(m.infDist) + QStringLiteral(" Inf values (the reference ") +
                     QString::number(m.nanRef) + QStringLiteral(" and ") +
                     QString::number(m.infRef) + QLatin1Char(')');
    }
    // Every copy of every shard may differ at 10,000 ranks: two pairs, then a count.
    constexpr std::size_t kPairsNamed = 2;
    const auto& mismatches = result.replicaMismatches;
    for (std::size_t i = 0; i < std::min(kPairsNamed, mismatches.size()); ++i) {
        const ReplicaMismatch& mismatch = mismatches[i];
        parts << QStringLiteral("copies on ") + formatRanks(mismatch.ranksA) +
                     QStringLiteral(" and ") + formatRanks(mismatch.ranksB) +
                     QStringLiteral(" differ in ") + formatCount(mismatch.differingElements) +
                     QStringLiteral(" (max |difference| ") +
                     formatValue(mismatch.maxAbsDifference) + QLatin1Char(')');
    }
    if (mismatches.size() > kPairsNamed) {
        std::vector<int> ranks;
        double largest = 0;
        for (std::size_t i = kPairsNamed; i < mismatches.size(); ++i) {
            ranks.insert(ranks.end(), mismatches[i].ranksB.begin(), mismatches[i].ranksB.end());
            largest = std::max(largest, mismatches[i].maxAbsDifference);
        }
        parts << QStringLiteral(
                     "%1 more copies differ from their shard's first copy, on %2 "
                     "(max |difference| %3)")
                     .arg(mismatches.size() - kPairsNamed)
                     .arg(formatRanks(ranks), formatValue(largest));
    }
    if (!result.recomputationMismatches.empty()) {
        parts << describeRecomputations(result);
    }
    if (result.fp8Scales && !result.fp8Scales->mismatches.empty()) {
        parts << describeScaleMismatch(*result.fp8Scales, result.dtype);
    }
    if (parts.isEmpty()) {
        parts << QStringLiteral("within tolerance (normalized ") +
                     formatValue(result.normalizedError) + QLatin1Char(')');
    }
    return parts.join(QStringLiteral("; "));
}

QString describeRecomputations(const TensorResult& result) {
    const auto& mismatches = result.recomputationMismatches;
    const RecomputationMismatch* worst = &mismatches.front();
    std::vector<int> ranks;
    bool scales = false;
    for (const auto& m : mismatches) {
        ranks.push_back(m.rank);
        scales = scales || m.scalesDiffer;
        if (m.differingElements > worst->differingElements) {
            worst = &m;
        }
    }
    const QString counts =
        QStringLiteral("%1%2 of %3 differ%4")
            .arg(mismatches.size() > 1 ? QStringLiteral("up to ") : QString())
            .arg(worst->differingElements)
            .arg(formatCount(worst->elements))
            .arg(scales ? QStringLiteral(", and the quantization scales") : QString());
    return QStringLiteral(
               "recomputed by activation checkpointing on %1 differently from its "
               "first forward (%2): the recomputation does not repeat the forward "
               "(RNG state not restored? state the first forward changed?), and the "
               "backward used the recomputed values")
        .arg(formatRanks(ranks), counts);
}

QString describeWithinTolerance(const TensorResult& result) {
    return QStringLiteral("within tolerance (normalized ") + formatValue(result.normalizedError) +
           QLatin1Char(')');
}

}  // namespace ttrace
