#include "framework/threads.h"

#include <omp.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "framework/backend/cpu/cpu.h"
#include "framework/error.h"

namespace minidl {
namespace {

constexpr double kLookEvery = 0.2;  // seconds between looks at the load

double now(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The machine at one moment: CPU seconds spent busy on the cores this process
// may run on, and by this process itself.
struct Look {
  double wall = 0, busy = 0, own = 0;
  int cores = 0;
};

// /proc/stat's "cpuN user nice system idle iowait irq softirq steal ..." lines
// (clock ticks): all but idle and iowait count as busy, steal too (the
// hypervisor's other guests took it).
bool look(Look& out) {
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return false;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const bool have_set = sched_getaffinity(0, sizeof(allowed), &allowed) == 0;
  const double tick = 1.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  Look l;
  char line[512];
  while (std::fgets(line, sizeof(line), f) && line[0] == 'c' && line[1] == 'p' && line[2] == 'u') {
    if (!std::isdigit(static_cast<unsigned char>(line[3]))) continue;  // "cpu ": all cores
    int id = 0;
    unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, soft = 0,
                       steal = 0;
    if (std::sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu", &id, &user, &nice,
                    &system, &idle, &iowait, &irq, &soft, &steal) < 5)
      continue;
    if (have_set && (id >= CPU_SETSIZE || !CPU_ISSET(id, &allowed))) continue;
    l.busy += static_cast<double>(user + nice + system + irq + soft + steal) * tick;
    ++l.cores;
  }
  std::fclose(f);
  l.wall = now(CLOCK_MONOTONIC);
  l.own = now(CLOCK_PROCESS_CPUTIME_ID);
  out = l;
  return l.cores > 0;
}

struct State {
  std::mutex mutex;
  bool started = false;  // follow and max were set
  bool follow = true;    // no count named
  int max = 1;
  bool have_last = false;
  Look last;
  double next_look = 0;  // CLOCK_MONOTONIC seconds
};

State& state() {
  static State s;
  return s;
}

// At first use, OMP_NUM_THREADS names a count; otherwise OpenMP's start value is the most.
void start(State& s) {
  if (s.started) return;
  s.started = true;
  const char* env = std::getenv("OMP_NUM_THREADS");
  s.follow = env == nullptr || *env == '\0';
  s.max = omp_get_max_threads();
}

void set_threads(int n, bool follow, const char* who) {
  MINIDL_CHECK(n >= 1, who, ": expected n >= 1, got ", n);
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.started = true;
  s.follow = follow;
  s.max = n;
  s.have_last = false;
  cpu::set_pool_threads(n);
}

}  // namespace

void set_num_threads(int n) { set_threads(n, false, "set_num_threads"); }
void set_max_threads(int n) { set_threads(n, true, "set_max_threads"); }

int num_threads() { return omp_get_max_threads(); }

bool threads_follow_load() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  start(s);
  return s.follow;
}

int threads_for_load(int max_threads, double free_cores) {
  return std::clamp(static_cast<int>(std::floor(free_cores + 0.3)), 1, std::max(1, max_threads));
}

void adapt_threads() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  start(s);
  const double t = now(CLOCK_MONOTONIC);
  if (!s.follow || s.max == 1 || t < s.next_look) return;
  s.next_look = t + kLookEvery;
  Look l;
  if (!look(l)) {  // no /proc/stat: keep the count
    s.follow = false;
    return;
  }
  if (s.have_last && l.wall > s.last.wall) {
    const double others = (l.busy - s.last.busy) - (l.own - s.last.own);
    const double free_cores = l.cores - std::max(0.0, others) / (l.wall - s.last.wall);
    const int n = threads_for_load(s.max, free_cores);
    if (n != omp_get_max_threads()) cpu::set_pool_threads(n);
  }
  s.last = l;
  s.have_last = true;
}

}  // namespace minidl
