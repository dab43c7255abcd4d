#include "RankGroups.h"

#include <algorithm>
#include <set>

namespace ttrace {

RankSpace::RankSpace(const Manifest& manifest, const std::vector<int>& ranks) {
    std::map<int, const RankEntry*> entries;
    for (const RankEntry& entry : manifest.ranks) {
        entries[entry.rank] = &entry;
    }
    const bool mesh =
        !manifest.meshAxes.empty() && std::all_of(ranks.begin(), ranks.end(), [&](int rank) {
            const auto it = entries.find(rank);
            return it != entries.end() && it->second->coords.size() == manifest.meshAxes.size();
        });
    if (mesh) {
        axes_ = QStringList(manifest.meshAxes.begin(), manifest.meshAxes.end());
        for (const int rank : ranks) {
            coords_[rank] = entries[rank]->coords;
        }
    } else {
        axes_ = QStringList{QStringLiteral("rank")};
        for (const int rank : ranks) {
            coords_[rank] = {rank};
        }
    }
}

bool RankSpace::contains(const RankBox& box, int rank) const {
    const auto it = coords_.find(rank);
    if (box.all() || box.ranges.size() != static_cast<std::size_t>(axes_.size()) ||
        it == coords_.end()) {
        return true;
    }
    for (std::size_t a = 0; a < box.ranges.size(); ++a) {
        if (it->second[a] < box.ranges[a].first || it->second[a] > box.ranges[a].second) {
            return false;
        }
    }
    return true;
}

namespace {

QString boxLabel(const QStringList& axes, const RankBox& box) {
    if (box.ranges.size() != static_cast<std::size_t>(axes.size())) {
        return QStringLiteral("all ranks");
    }
    const auto range = [](const std::pair<int, int>& r) {
        return r.first == r.second
                   ? QString::number(r.first)
                   : QString::number(r.first) + QLatin1Char('-') + QString::number(r.second);
    };
    if (axes == QStringList{QStringLiteral("rank")}) {
        const auto& r = box.ranges.front();
        return (r.first == r.second ? QStringLiteral("rank ") : QStringLiteral("ranks ")) +
               range(r);
    }
    QStringList parts;
    for (std::size_t a = 0; a < box.ranges.size(); ++a) {
        parts << axes[static_cast<qsizetype>(a)] + range(box.ranges[a]);
    }
    return parts.join(QLatin1Char(' '));
}

}  // namespace

QString RankSpace::label(const RankBox& box) const {
    return boxLabel(axes_, box);
}

QString rankBoxLabel(const Manifest& manifest, const RankBox& box) {
    const bool mesh = !manifest.meshAxes.empty() &&
                      box.ranges.size() == static_cast<std::size_t>(manifest.meshAxes.size());
    return boxLabel(mesh ? QStringList(manifest.meshAxes.begin(), manifest.meshAxes.end())
                         : QStringList{QStringLiteral("rank")},
                    box);
}

std::vector<RankGroup> groupRanks(const RankSpace& space, const std::vector<int>& ranks,
                                  std::size_t maxGroups) {
    const auto axes = static_cast<std::size_t>(space.axes().size());
    // Per axis: the distinct coordinates, and how many of them one block spans.
    std::vector<std::vector<int>> distinct(axes);
    for (std::size_t a = 0; a < axes; ++a) {
        std::set<int> values;
        for (const int rank : ranks) {
            values.insert(space.coordinates(rank)[a]);
        }
        distinct[a].assign(values.begin(), values.end());
    }
    std::vector<std::size_t> span(axes, 1);
    const auto blocks = [&](std::size_t a) { return (distinct[a].size() + span[a] - 1) / span[a]; };
    const auto rows = [&] {
        std::size_t n = 1;
        for (std::size_t a = 0; a < axes; ++a) {
            n *= blocks(a);
        }
        return n;
    };
    maxGroups = std::max<std::size_t>(maxGroups, 1);
    if (ranks.size() > maxGroups) {
        while (rows() > maxGroups) {
            std::size_t widest = 0;  // the axis with the most blocks; the outer one on a tie
            for (std::size_t a = 1; a < axes; ++a) {
                if (blocks(a) > blocks(widest)) {
                    widest = a;
                }
            }
            const std::size_t others = rows() / blocks(widest);
            const std::size_t wanted =
                std::clamp<std::size_t>(maxGroups / others, 1, blocks(widest) - 1);
            span[widest] = (distinct[widest].size() + wanted - 1) / wanted;
        }
    }

    // Ranks come ascending; a group's place is its block key, so rows follow the mesh.
    std::map<std::vector<std::size_t>, RankGroup> groups;
    for (const int rank : ranks) {
        const std::vector<int>& coords = space.coordinates(rank);
        std::vector<std::size_t> key(axes);
        for (std::size_t a = 0; a < axes; ++a) {
            const auto position = static_cast<std::size_t>(
                std::lower_bound(distinct[a].begin(), distinct[a].end(), coords[a]) -
                distinct[a].begin());
            key[a] = position / span[a];
        }
        RankGroup& group = groups[key];
        if (group.members.empty()) {
            for (std::size_t a = 0; a < axes; ++a) {
                const std::size_t first = key[a] * span[a];
                const std::size_t last = std::min(first + span[a], distinct[a].size()) - 1;
                group.box.ranges.emplace_back(distinct[a][first], distinct[a][last]);
            }
        }
        group.members.push_back(rank);
    }
    std::vector<RankGroup> ordered;
    ordered.reserve(groups.size());
    for (auto& [key, group] : groups) {
        ordered.push_back(std::move(group));
    }
    return ordered;
}

}  // namespace ttrace
