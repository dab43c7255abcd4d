#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "RankGroups.h"

namespace ttrace {

// Where the user is in the drill-down: the layer heatmap or one layer's ranks (all, or one
// block of them expanded), and the tensor (and rank) the detail shows. Navigation routes
// through these values only.
struct Location {
    enum class View { Layers, LayerRanks };
    View view = View::Layers;
    int layer = -1;  // the layer of LayerRanks
    RankBox ranks;   // the ranks of LayerRanks: a group expanded, or all
    std::optional<std::size_t> result;
    std::optional<int> rank;

    friend bool operator==(const Location&, const Location&) = default;
};

// Back and forward through the locations visited, as a browser does: visiting a new location
// drops the forward ones.
class NavigationHistory {
public:
    void reset(const Location& start);
    void visit(const Location& location);  // no-op when it is the current one
    bool canGoBack() const { return current_ > 0; }
    bool canGoForward() const { return current_ + 1 < entries_.size(); }
    Location back();     // the new current location; the same when there is none before
    Location forward();  // likewise after
    const Location& current() const { return entries_[current_]; }

private:
    std::vector<Location> entries_{Location{}};
    std::size_t current_ = 0;
};

}  // namespace ttrace
