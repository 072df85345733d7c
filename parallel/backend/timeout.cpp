#include "parallel/backend/timeout.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "framework/error.h"

namespace minidl::parallel::backend {

namespace {
using Clock = std::chrono::steady_clock;

struct Watchdog {
  std::atomic<const char*> op{nullptr};  // the call waiting now, if any
  std::atomic<size_t> bytes{0};
  std::atomic<int64_t> since{0};  // Clock ticks when it began
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  std::thread thread;
};

Watchdog& watchdog() {
  static Watchdog w;
  return w;
}

[[noreturn]] void expire(int rank, const char* op, size_t bytes, double waited, double limit) {
  std::fprintf(stderr,
               "minidl: rank %d: %s (%zu bytes) has waited %.1f s for the other ranks, longer "
               "than MINIDL_TIMEOUT=%g s: a rank is stuck, stopped, or out of step with this "
               "one (different step counts, batch sizes or models). Ending the job.\n",
               rank, op, bytes, waited, limit);
  std::fflush(nullptr);
  std::_Exit(1);  // mpirun ends the other ranks when one exits non-zero
}
}  // namespace

double collective_timeout() {
  const char* text = std::getenv("MINIDL_TIMEOUT");
  if (!text || !*text) return 300;
  double seconds = -1;
  const char* end = text + std::strlen(text);
  const auto [stop, ec] = std::from_chars(text, end, seconds);
  MINIDL_CHECK(ec == std::errc() && stop == end && seconds >= 0 && std::isfinite(seconds),
               "MINIDL_TIMEOUT: expected the collective timeout in seconds, a number >= 0 "
               "(0: off), got '", text, "'");
  return seconds;
}

void start_watchdog(int world_rank) {
  const double limit = collective_timeout();
  Watchdog& w = watchdog();
  if (limit == 0 || w.thread.joinable()) return;
  w.stop = false;
  w.thread = std::thread([&w, world_rank, limit] {
    const auto poll = std::chrono::duration<double>(std::min(1.0, limit / 4));
    std::unique_lock lock(w.mutex);
    while (!w.wake.wait_for(lock, poll, [&] { return w.stop; })) {
      const char* op = w.op.load();
      if (!op) continue;
      // `since` is stored before `op`, so it is this call's start or a later one's.
      const Clock::time_point since{Clock::duration(w.since.load())};
      const double waited = std::chrono::duration<double>(Clock::now() - since).count();
      if (waited > limit) expire(world_rank, op, w.bytes.load(), waited, limit);
    }
  });
}

void stop_watchdog() {
  Watchdog& w = watchdog();
  if (!w.thread.joinable()) return;
  {
    std::lock_guard lock(w.mutex);
    w.stop = true;
  }
  w.wake.notify_all();
  w.thread.join();
}

Waiting::Waiting(const char* op, size_t bytes) {
  Watchdog& w = watchdog();
  w.since.store(Clock::now().time_since_epoch().count());
  w.bytes.store(bytes);
  w.op.store(op);
}

Waiting::~Waiting() { watchdog().op.store(nullptr); }

}  // namespace minidl::parallel::backend
