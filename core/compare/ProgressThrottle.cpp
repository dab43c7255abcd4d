#include "compare/ProgressThrottle.h"

#include <algorithm>

namespace ttrace {

ProgressThrottle::ProgressThrottle(std::function<void(double)> callback, std::int64_t totalBytes,
                                   std::chrono::milliseconds interval)
    : callback_(std::move(callback)), total_(totalBytes), interval_(interval) {}

void ProgressThrottle::add(std::int64_t bytes) {
    done_.fetch_add(bytes, std::memory_order_relaxed);
    if (!callback_) {
        return;
    }
    // A thread that finds another one reporting skips this update rather than waiting.
    const std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) {
        return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < interval_) {
        return;
    }
    last_ = now;
    // Read under the lock, so that reports never go backwards.
    const auto done = done_.load(std::memory_order_relaxed);
    const double fraction =
        total_ > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total_), 0.0, 1.0)
                   : 1.0;
    callback_(fraction);
}

void ProgressThrottle::finish() {
    if (callback_) {
        const std::lock_guard lock(mutex_);
        callback_(1.0);
    }
}

}  // namespace ttrace
