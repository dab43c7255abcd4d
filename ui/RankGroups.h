#pragma once

#include <QString>
#include <QStringList>
#include <cstddef>
#include <map>
#include <utility>
#include <vector>

#include "trace/Manifest.h"

namespace ttrace {

// A block of the device mesh: per axis an inclusive range of coordinates. Empty: every rank.
// Ranks without complete mesh coordinates are placed on one axis, their rank number.
struct RankBox {
    std::vector<std::pair<int, int>> ranges;

    bool all() const { return ranges.empty(); }
    friend bool operator==(const RankBox&, const RankBox&) = default;
};

// The coordinates of some ranks: the manifest's mesh when every one of them has complete
// coordinates, else one axis "rank" holding the rank number.
class RankSpace {
public:
    RankSpace(const Manifest& manifest, const std::vector<int>& ranks);

    const QStringList& axes() const { return axes_; }
    const std::vector<int>& coordinates(int rank) const { return coords_.at(rank); }
    // True for every rank when the box is all, or was made on another space (another run).
    bool contains(const RankBox& box, int rank) const;
    // "pp1 dp0-38 tp1", or "ranks 0-99" without mesh coordinates.
    QString label(const RankBox& box) const;

private:
    QStringList axes_;
    std::map<int, std::vector<int>> coords_;
};

// "pp1 dp0-38 tp1" for a box on the manifest's mesh, "ranks 0-99" for one on rank numbers.
QString rankBoxLabel(const Manifest& manifest, const RankBox& box);

struct RankGroup {
    RankBox box;
    std::vector<int> members;  // ascending
};

// At most `maxGroups` groups of `ranks` (ascending, within one RankSpace), in mesh order:
// each a block along the mesh axes. The axis with the most distinct coordinates is cut into
// blocks first (in a TP x PP x DP job: the DP axis, so a row is "dp 0-38 of tp 1"), then the
// next, until the blocks are few enough; with no more ranks than `maxGroups`, one group per
// rank.
std::vector<RankGroup> groupRanks(const RankSpace& space, const std::vector<int>& ranks,
                                  std::size_t maxGroups);

}  // namespace ttrace
