// Bytes an allocator holds for live storages, and the peak since the last
// reset: what each backend's current_bytes/peak_bytes/reset_peak report.
#pragma once
#include <atomic>
#include <cstdint>

namespace minidl {

class ByteCount {
 public:
  void add(int64_t delta) {
    const int64_t now = live_.fetch_add(delta, std::memory_order_relaxed) + delta;
    int64_t p = peak_.load(std::memory_order_relaxed);
    while (now > p && !peak_.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
    }
  }
  int64_t current() const { return live_.load(); }
  int64_t peak() const { return peak_.load(); }
  void reset_peak() { peak_.store(live_.load()); }

 private:
  std::atomic<int64_t> live_{0}, peak_{0};
};

}  // namespace minidl
