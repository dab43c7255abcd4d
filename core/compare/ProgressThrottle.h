#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>

namespace ttrace {

// Progress by bytes from many threads, passed on at most once per `interval` and never by two
// threads at once, so that a GUI is not flooded with updates.
class ProgressThrottle {
public:
    ProgressThrottle(std::function<void(double)> callback, std::int64_t totalBytes,
                     std::chrono::milliseconds interval = std::chrono::milliseconds(50));

    void add(std::int64_t bytes);
    void finish();  // reports 1.0

private:
    std::function<void(double)> callback_;
    std::int64_t total_;
    std::chrono::steady_clock::duration interval_;
    std::atomic<std::int64_t> done_{0};
    std::mutex mutex_;
    std::chrono::steady_clock::time_point last_{};
};

}  // namespace ttrace
