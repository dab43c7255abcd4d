#include "mapping/TilingCheck.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <tuple>

#include "trace/ShapeText.h"

namespace ttrace {

namespace {

bool containsCoord(const ShardRanges& ranges, const std::vector<std::int64_t>& coord) {
    for (std::size_t d = 0; d < coord.size(); ++d) {
        const auto& dim = ranges.dims[d];
        const bool inside = std::any_of(dim.begin(), dim.end(), [&](const IndexRange& r) {
            return r.start <= coord[d] && coord[d] < r.stop;
        });
        if (!inside) {
            return false;
        }
    }
    return true;
}

// Ranks (and so pieces) whose shard holds `coord`, for the message of an overlap.
std::vector<std::size_t> shardsAt(const std::vector<TilingShard>& shards,
                                  const std::vector<std::int64_t>& coord) {
    std::vector<std::size_t> result;
    for (std::size_t i = 0; i < shards.size(); ++i) {
        if (containsCoord(*shards[i].ranges, coord)) {
            result.push_back(i);
        }
    }
    return result;
}

TilingProblem overlapProblem(const std::vector<TilingShard>& shards,
                             const std::vector<std::int64_t>& coord, const QString& amount) {
    const auto holders = shardsAt(shards, coord);
    QString who;
    for (std::size_t i = 0; i < holders.size(); ++i) {
        const auto& shard = shards[holders[i]];
        if (i) {
            who += i + 1 == holders.size() ? QStringLiteral(" and ") : QStringLiteral(", ");
        }
        who += rankPhrase(shard.ranks) + QStringLiteral(" (") + shard.ranges->toString() +
               QLatin1Char(')');
    }
    TilingProblem problem;
    problem.message = QStringLiteral("shards overlap: %1, e.g. global %2 is held by %3")
                          .arg(amount, formatShape(coord), who);
    problem.record = holders.empty() ? shards.front().record : shards[holders.back()].record;
    return problem;
}

std::vector<int> allRanks(const std::vector<TilingShard>& shards) {
    std::vector<int> ranks;
    for (const auto& shard : shards) {
        ranks.insert(ranks.end(), shard.ranks.begin(), shard.ranks.end());
    }
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    return ranks;
}

TilingProblem gapProblem(const std::vector<TilingShard>& shards, std::int64_t uncovered,
                         const std::optional<std::vector<std::int64_t>>& example) {
    TilingProblem problem;
    problem.message = QString::fromUtf16(kGapMessageStart) +
                      QStringLiteral(": %1 not held by any rank")
                          .arg(counted(uncovered, QStringLiteral("element")));
    if (example) {
        problem.message += QStringLiteral(", e.g. global ") + formatShape(*example);
    }
    problem.message +=
        QStringLiteral(" (pieces are on ") + rankPhrase(allRanks(shards)) + QLatin1Char(')');
    problem.record = shards.empty() ? nullptr : shards.front().record;
    return problem;
}

// Fallback for grids too large to count cell by cell: exact for overlaps (pairwise), by
// volume for gaps.
std::vector<TilingProblem> checkByVolume(const std::vector<std::int64_t>& shape,
                                         const std::vector<TilingShard>& shards) {
    std::vector<TilingProblem> problems;
    std::int64_t total = 1;
    for (const auto extent : shape) {
        total *= extent;
    }
    std::int64_t volume = 0;
    for (const auto& shard : shards) {
        volume += shard.ranges->elementCount();
    }
    // The first intersecting pair of ranges per dimension gives a shared coordinate.
    const auto intersection =
        [&](const ShardRanges& a,
            const ShardRanges& b) -> std::optional<std::vector<std::int64_t>> {
        std::vector<std::int64_t> coord;
        for (std::size_t d = 0; d < shape.size(); ++d) {
            std::optional<std::int64_t> at;
            for (const auto& ra : a.dims[d]) {
                for (const auto& rb : b.dims[d]) {
                    const auto lo = std::max(ra.start, rb.start);
                    if (lo < std::min(ra.stop, rb.stop) && !at) {
                        at = lo;
                    }
                }
            }
            if (!at) {
                return std::nullopt;
            }
            coord.push_back(*at);
        }
        return coord;
    };
    std::optional<std::vector<std::int64_t>> overlapAt;
    std::int64_t overlappingPairs = 0;
    for (std::size_t i = 0; i < shards.size(); ++i) {
        // Ranges of one shard overlapping each other along a dimension.
        for (std::size_t d = 0; d < shape.size() && !overlapAt; ++d) {
            auto dim = shards[i].ranges->dims[d];
            std::sort(dim.begin(), dim.end());
            for (std::size_t k = 1; k < dim.size(); ++k) {
                if (dim[k].start < dim[k - 1].stop && dim[k].size() > 0) {
                    std::vector<std::int64_t> coord;
                    for (std::size_t e = 0; e < shape.size(); ++e) {
                        coord.push_back(e == d ? dim[k].start
                                               : shards[i].ranges->dims[e].front().start);
                    }
                    overlapAt = coord;
                    ++overlappingPairs;
                    break;
                }
            }
        }
        for (std::size_t j = i + 1; j < shards.size(); ++j) {
            if (auto at = intersection(*shards[i].ranges, *shards[j].ranges)) {
                ++overlappingPairs;
                if (!overlapAt) {
                    overlapAt = std::move(at);
                }
            }
        }
    }
    if (overlapAt) {
        problems.push_back(overlapProblem(
            shards, *overlapAt, counted(overlappingPairs, QStringLiteral("overlapping pair"))));
    } else if (volume < total) {
        problems.push_back(gapProblem(shards, total - volume, std::nullopt));
    }
    return problems;
}

// Advances `at` row-major inside [lo, hi); false once every index was visited.
bool advance(std::vector<std::int64_t>& at, const std::vector<std::int64_t>& lo,
             const std::vector<std::int64_t>& hi) {
    for (std::size_t d = at.size(); d-- > 0;) {
        if (++at[d] < hi[d]) {
            return true;
        }
        at[d] = lo[d];
    }
    return false;
}

}  // namespace

std::vector<TilingProblem> checkTiling(const std::vector<std::int64_t>& globalShape,
                                       const std::vector<TilingShard>& shards,
                                       std::int64_t maxCells) {
    const std::size_t nd = globalShape.size();
    // Cell boundaries per dimension: every range start and stop plus the shape's ends.
    std::vector<std::vector<std::int64_t>> bounds(nd);
    std::int64_t cells = 1;
    for (std::size_t d = 0; d < nd; ++d) {
        auto& b = bounds[d];
        b = {0, globalShape[d]};
        for (const auto& shard : shards) {
            for (const auto& range : shard.ranges->dims[d]) {
                b.push_back(range.start);
                b.push_back(range.stop);
            }
        }
        std::sort(b.begin(), b.end());
        b.erase(std::unique(b.begin(), b.end()), b.end());
        const auto n = static_cast<std::int64_t>(b.size()) - 1;
        if (n <= 0) {
            return {};  // an empty tensor: nothing to cover
        }
        if (cells > maxCells / n) {
            return checkByVolume(globalShape, shards);
        }
        cells *= n;
    }
    const auto cellRange = [&](std::size_t d, const IndexRange& r) {
        const auto lo = std::lower_bound(bounds[d].begin(), bounds[d].end(), r.start);
        const auto hi = std::lower_bound(bounds[d].begin(), bounds[d].end(), r.stop);
        return std::pair<std::int64_t, std::int64_t>(lo - bounds[d].begin(),
                                                     hi - bounds[d].begin());
    };
    // Work is the number of cell visits; many overlapping shards could make it explode.
    std::int64_t work = 0;
    for (const auto& shard : shards) {
        std::int64_t visits = 1;
        for (std::size_t d = 0; d < nd; ++d) {
            std::int64_t n = 0;
            for (const auto& range : shard.ranges->dims[d]) {
                const auto [lo, hi] = cellRange(d, range);
                n += hi - lo;
            }
            visits *= n;
        }
        work += visits;
        if (work > 4 * maxCells) {
            return checkByVolume(globalShape, shards);
        }
    }

    std::vector<std::uint32_t> coverage(static_cast<std::size_t>(cells), 0);
    std::vector<std::int64_t> stride(nd, 1);
    for (std::size_t d = nd; d-- > 1;) {
        stride[d - 1] = stride[d] * (static_cast<std::int64_t>(bounds[d].size()) - 1);
    }
    for (const auto& shard : shards) {
        // Every cell of every single-range box of the shard.
        std::vector<std::int64_t> which(nd, 0), first(nd, 0), counts(nd);
        for (std::size_t d = 0; d < nd; ++d) {
            counts[d] = static_cast<std::int64_t>(shard.ranges->dims[d].size());
        }
        if (std::find(counts.begin(), counts.end(), 0) != counts.end()) {
            continue;  // no range along some dimension: an empty shard covers nothing
        }
        do {
            std::vector<std::int64_t> lo(nd), hi(nd);
            bool empty = false;
            for (std::size_t d = 0; d < nd; ++d) {
                const auto& range = shard.ranges->dims[d][static_cast<std::size_t>(which[d])];
                std::tie(lo[d], hi[d]) = cellRange(d, range);
                empty = empty || lo[d] >= hi[d];
            }
            if (empty) {
                continue;
            }
            std::vector<std::int64_t> at = lo;
            do {
                std::int64_t index = 0;
                for (std::size_t d = 0; d < nd; ++d) {
                    index += at[d] * stride[d];
                }
                ++coverage[static_cast<std::size_t>(index)];
            } while (advance(at, lo, hi));
        } while (advance(which, first, counts));
    }

    // Scan: uncovered and multiply covered elements, with the first cell of each as example.
    std::int64_t uncovered = 0, overcovered = 0;
    std::optional<std::vector<std::int64_t>> gapAt, overlapAt;
    std::vector<std::int64_t> cell(nd, 0);
    for (std::int64_t index = 0; index < cells; ++index) {
        std::int64_t rest = index;
        std::int64_t volume = 1;
        std::vector<std::int64_t> coord(nd);
        for (std::size_t d = 0; d < nd; ++d) {
            cell[d] = rest / stride[d];
            rest %= stride[d];
            const auto c = static_cast<std::size_t>(cell[d]);
            coord[d] = bounds[d][c];
            volume *= bounds[d][c + 1] - bounds[d][c];
        }
        const auto n = coverage[static_cast<std::size_t>(index)];
        if (n == 0) {
            uncovered += volume;
            if (!gapAt) {
                gapAt = coord;
            }
        } else if (n > 1) {
            overcovered += volume;
            if (!overlapAt) {
                overlapAt = coord;
            }
        }
    }
    std::vector<TilingProblem> problems;
    if (overlapAt) {
        problems.push_back(
            overlapProblem(shards, *overlapAt,
                           QStringLiteral("%1 held more than once")
                               .arg(counted(overcovered, QStringLiteral("element")))));
    }
    if (gapAt) {
        problems.push_back(gapProblem(shards, uncovered, gapAt));
    }
    return problems;
}

}  // namespace ttrace
