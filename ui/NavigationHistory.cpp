#include "NavigationHistory.h"

namespace ttrace {

void NavigationHistory::reset(const Location& start) {
    entries_ = {start};
    current_ = 0;
}

void NavigationHistory::visit(const Location& location) {
    if (location == current()) {
        return;
    }
    entries_.resize(current_ + 1);
    entries_.push_back(location);
    current_ = entries_.size() - 1;
}

Location NavigationHistory::back() {
    if (canGoBack()) {
        --current_;
    }
    return current();
}

Location NavigationHistory::forward() {
    if (canGoForward()) {
        ++current_;
    }
    return current();
}

}  // namespace ttrace
