#include "compare/FaultyShard.h"

#include <QStringList>
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "compare/FaultDescription.h"

namespace ttrace {

namespace {

// A shard's own evidence: its normalized error, infinite when it holds NaN/Inf that the
// reference does not.
double score(const ShardResult& shard) {
    const auto& m = shard.metrics;
    if (m.nanDist > m.nanRef || m.infDist > m.infRef) {
        return std::numeric_limits<double>::infinity();
    }
    return std::isnan(shard.normalizedError) ? 0.0 : shard.normalizedError;
}

QString formatScore(double value) {
    return std::isinf(value) ? QStringLiteral("non-finite") : formatValue(value);
}

// "normalized 52", or what an infinite score stands for.
QString describeScore(double value) {
    return std::isinf(value) ? QStringLiteral("non-finite values where the reference is finite")
                             : QStringLiteral("normalized ") + formatValue(value);
}

double median(std::vector<double> values) {
    if (values.empty()) {
        return 0;
    }
    std::sort(values.begin(), values.end());
    const std::size_t mid = values.size() / 2;
    return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

std::vector<int> allRanks(const TensorResult& r) {
    std::set<int> ranks;
    for (const auto& shard : r.shards) {
        ranks.insert(shard.ranks.begin(), shard.ranks.end());
    }
    if (ranks.empty()) {
        for (const auto& [rank, seq] : r.rankSeq) {
            ranks.insert(rank);
        }
    }
    return {ranks.begin(), ranks.end()};
}

// The shard index of the copy of `ranges` held by `ranks`; else the first copy of `ranges`.
std::size_t shardOf(const TensorResult& r, const ShardRanges& ranges,
                    const std::vector<int>& ranks) {
    std::optional<std::size_t> firstCopy;
    for (std::size_t i = 0; i < r.shards.size(); ++i) {
        if (r.shards[i].ranges == ranges) {
            if (r.shards[i].ranks == ranks) {
                return i;
            }
            if (!firstCopy) {
                firstCopy = i;
            }
        }
    }
    return firstCopy.value_or(0);
}

FaultyShard fromReplicaMismatch(const TensorResult& r, std::size_t resultIndex) {
    // The mismatch with the most differing elements is the clearest evidence.
    const ReplicaMismatch* m = &r.replicaMismatches.front();
    for (const auto& other : r.replicaMismatches) {
        if (other.differingElements > m->differingElements) {
            m = &other;
        }
    }
    std::size_t copies = 0;
    for (const auto& shard : r.shards) {
        copies += shard.ranges == m->ranges ? 1 : 0;
    }
    std::vector<const ReplicaMismatch*> differing;  // copies that differ from copy A
    for (const auto& other : r.replicaMismatches) {
        if (other.ranges == m->ranges && other.ranksA == m->ranksA) {
            differing.push_back(&other);
        }
    }
    copies = std::max(copies, differing.size() + 1);
    const std::size_t agreeing = copies - differing.size();  // copy A and those equal to it
    const QString evidence = QStringLiteral("; ") + formatCount(m->differingElements) +
                             QStringLiteral(" differ, max |difference| ") +
                             formatValue(m->maxAbsDifference);

    FaultyShard fs;
    fs.result = resultIndex;
    if (agreeing > differing.size()) {
        // Copy A has the majority: the odd copy out is the one that differs, the one farthest
        // from the reference when several do.
        const ReplicaMismatch* worst = differing.front();
        for (const auto* d : differing) {
            if (score(r.shards[shardOf(r, d->ranges, d->ranksB)]) >
                score(r.shards[shardOf(r, worst->ranges, worst->ranksB)])) {
                worst = d;
            }
        }
        fs.shard = shardOf(r, worst->ranges, worst->ranksB);
        fs.ranks = worst->ranksB;
        fs.reason = QStringLiteral("the copy of shard ") + m->ranges.toString() +
                    QStringLiteral(" on ") + formatRanks(worst->ranksB) +
                    QStringLiteral(" differs from the majority: ") + QString::number(agreeing) +
                    QStringLiteral(" of ") + QString::number(copies) +
                    QStringLiteral(" copies agree, among them the one on ") +
                    formatRanks(m->ranksA) + evidence;
        return fs;
    }
    if (copies >= 3 && differing.size() > agreeing) {
        fs.shard = shardOf(r, m->ranges, m->ranksA);
        fs.ranks = m->ranksA;
        fs.reason = QStringLiteral("the copy of shard ") + m->ranges.toString() +
                    QStringLiteral(" on ") + formatRanks(m->ranksA) +
                    QStringLiteral(" differs from all ") + QString::number(differing.size()) +
                    QStringLiteral(" other copies") + evidence;
        return fs;
    }
    // No majority (two copies): both ranks are named; the one farther from the reference is
    // the better suspect.
    const std::size_t a = shardOf(r, m->ranges, m->ranksA);
    const std::size_t b = shardOf(r, m->ranges, m->ranksB);
    const double scoreA = score(r.shards[a]);
    const double scoreB = score(r.shards[b]);
    const bool pickB = scoreB >= scoreA;
    fs.shard = pickB ? b : a;
    fs.ranks = pickB ? m->ranksB : m->ranksA;
    fs.reason = QStringLiteral("the copies of shard ") + m->ranges.toString() +
                QStringLiteral(" on ") + formatRanks(m->ranksA) + QStringLiteral(" and ") +
                formatRanks(m->ranksB) + QStringLiteral(" disagree") + evidence;
    if (scoreA > 1.0 && scoreB > 1.0) {
        // Both copies are wrong, as when a reduction across the ranks is missing: neither
        // stands out, and both ranks are named.
        fs.standsOut = false;
        fs.ranks = m->ranksA;
        fs.ranks.insert(fs.ranks.end(), m->ranksB.begin(), m->ranksB.end());
        std::sort(fs.ranks.begin(), fs.ranks.end());
        fs.reason += QStringLiteral("; both are above the threshold (normalized ") +
                     formatScore(scoreA) + QStringLiteral(" and ") + formatScore(scoreB) +
                     QStringLiteral("), as from a reduction across the ranks that is missing");
        return fs;
    }
    if (scoreA == scoreB) {
        fs.reason += QStringLiteral("; both are equally far from the reference (normalized ") +
                     formatScore(scoreA) + QStringLiteral("), so either may be wrong");
    } else {
        fs.reason += QStringLiteral("; ") + formatRanks(fs.ranks) +
                     QStringLiteral(" is farther from the reference (normalized ") +
                     formatScore(pickB ? scoreB : scoreA) + QStringLiteral(" against ") +
                     formatScore(pickB ? scoreA : scoreB) + QLatin1Char(')');
    }
    return fs;
}

// The copies quantized with another scale than the whole tensor's: the worst is the shard,
// every such copy's ranks are named (a shard replicated over other axes shares its scale).
FaultyShard fromScaleMismatch(const TensorResult& r, std::size_t resultIndex) {
    const auto& mismatches = r.fp8Scales->mismatches;
    std::set<int> ranks;
    for (const auto& m : mismatches) {
        ranks.insert(m.ranks.begin(), m.ranks.end());
    }
    FaultyShard fs;
    fs.result = resultIndex;
    fs.shard = shardOf(r, mismatches.front().ranges, mismatches.front().ranks);
    fs.ranks = {ranks.begin(), ranks.end()};
    fs.reason = describeScaleMismatch(*r.fp8Scales, r.dtype);
    return fs;
}

// Whether the shards' errors agree, when none stands out: one wrong value computed the same
// way everywhere gives every shard about the same error; a value each rank computes from its
// own part (a norm, a scale, a count) gives each its own.
QString describeSpread(const std::vector<ShardResult>& shards) {
    double lowest = std::numeric_limits<double>::infinity();
    double highest = 0;
    for (const auto& shard : shards) {
        lowest = std::min(lowest, score(shard));
        highest = std::max(highest, score(shard));
    }
    if (std::isfinite(highest) && highest <= kCommonErrorSpread * lowest) {
        return QStringLiteral(
                   "the error is common to the ranks (every shard's within %1x of "
                   "the others'), as from a wrong value computed the same way "
                   "everywhere or wrong inputs")
            .arg(formatValue(kCommonErrorSpread));
    }
    return QStringLiteral(
               "the shards' errors differ (normalized %1 to %2): each rank's piece is "
               "off by its own amount, as from a value each rank computes from its "
               "own part (a norm, a scale, a count) or inputs that differ per rank")
        .arg(formatScore(lowest), formatScore(highest));
}

FaultyShard fromShardErrors(const TensorResult& r, std::size_t resultIndex) {
    const auto& shards = r.shards;
    std::size_t best = 0;
    for (std::size_t i = 1; i < shards.size(); ++i) {
        if (score(shards[i]) > score(shards[best])) {
            best = i;
        }
    }
    const double top = score(shards[best]);
    std::vector<double> others;
    std::size_t above = 0;
    for (std::size_t i = 0; i < shards.size(); ++i) {
        above += score(shards[i]) > 1.0 ? 1 : 0;
        if (i != best) {
            others.push_back(score(shards[i]));
        }
    }
    const double med = median(others);

    FaultyShard fs;
    fs.result = resultIndex;
    fs.shard = best;
    const QString where = QStringLiteral("shard ") + shards[best].ranges.toString() +
                          QStringLiteral(" on ") + formatRanks(shards[best].ranks);
    if (shards.size() == 1) {
        fs.ranks = shards[best].ranks;
        fs.reason = QStringLiteral("the tensor has a single copy, ") + where +
                    QStringLiteral(" (") + describeScore(top) + QLatin1Char(')');
        return fs;
    }
    const bool standsOut =
        top > 1.0 && (above == 1 || (std::isfinite(med) && top >= kShardStandOutRatio * med));
    if (standsOut) {
        // Every copy above the threshold is named: two wrong shards of four are both faulty.
        std::set<int> ranks(shards[best].ranks.begin(), shards[best].ranks.end());
        fs.reason = where + QStringLiteral(" stands out: ") + describeScore(top) +
                    QStringLiteral(", while the median of the other ") +
                    QString::number(others.size()) + QStringLiteral(" shards is ") +
                    formatScore(med);
        QStringList alsoAbove;
        for (std::size_t i = 0; i < shards.size(); ++i) {
            if (i != best && score(shards[i]) > 1.0) {
                ranks.insert(shards[i].ranks.begin(), shards[i].ranks.end());
                alsoAbove << QStringLiteral("shard ") + shards[i].ranges.toString() +
                                 QStringLiteral(" on ") + formatRanks(shards[i].ranks) +
                                 QStringLiteral(" (") + formatScore(score(shards[i])) +
                                 QLatin1Char(')');
            }
        }
        fs.ranks = {ranks.begin(), ranks.end()};
        if (!alsoAbove.isEmpty()) {
            fs.reason += QStringLiteral("; also above the threshold: ") +
                         alsoAbove.join(QStringLiteral(", "));
        }
        return fs;
    }
    fs.ranks = allRanks(r);
    fs.standsOut = false;
    if (top > 1.0) {
        fs.reason = QStringLiteral("no shard stands out: ") + QString::number(above) +
                    QStringLiteral(" of ") + QString::number(shards.size()) +
                    QStringLiteral(" shards are above the threshold (highest ") + formatScore(top) +
                    QStringLiteral(", median of the others ") + formatScore(med) +
                    QStringLiteral("); ") + describeSpread(shards);
    } else {
        fs.reason = QStringLiteral("no shard is above the threshold on its own (highest ") +
                    formatScore(top) + QStringLiteral(", ") + where +
                    QStringLiteral("); the error only shows on the whole tensor");
    }
    return fs;
}

// Recomputations that differ name their ranks themselves: the piece differing in the most
// elements is the shard; every rank whose recomputation differed is named.
FaultyShard fromRecomputationMismatch(const TensorResult& r, std::size_t resultIndex) {
    const RecomputationMismatch* worst = &r.recomputationMismatches.front();
    std::set<int> ranks;
    for (const auto& m : r.recomputationMismatches) {
        ranks.insert(m.rank);
        if (m.differingElements > worst->differingElements) {
            worst = &m;
        }
    }
    FaultyShard fs;
    fs.result = resultIndex;
    fs.shard = shardOf(r, worst->ranges, {worst->rank});
    fs.ranks.assign(ranks.begin(), ranks.end());
    fs.reason = QStringLiteral(
                    "the forward recomputed by activation checkpointing on %1 "
                    "differs from its first forward in %2 of %3")
                    .arg(formatRanks(fs.ranks))
                    .arg(worst->differingElements)
                    .arg(formatCount(worst->elements));
    return fs;
}

}  // namespace

std::optional<FaultyShard> findFaultyShard(const std::vector<TensorResult>& results,
                                           std::size_t result) {
    const TensorResult& r = results[result];
    if (r.shards.empty()) {
        return std::nullopt;
    }
    // A wrong fp8 scale names the cause itself; bitwise disagreement between copies, or
    // between a forward and its recomputation, is direct evidence too. All come before errors.
    if (r.fp8Scales && !r.fp8Scales->mismatches.empty()) {
        return fromScaleMismatch(r, result);
    }
    if (!r.replicaMismatches.empty()) {
        return fromReplicaMismatch(r, result);
    }
    if (!r.recomputationMismatches.empty()) {
        return fromRecomputationMismatch(r, result);
    }
    return fromShardErrors(r, result);
}

}  // namespace ttrace
