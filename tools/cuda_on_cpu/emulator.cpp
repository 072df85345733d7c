// The fiber scheduler behind gpu_emu::launch (emulator.h).
#include "emulator.h"

#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gpu_emu {
namespace {

constexpr size_t kStackBytes = 256 * 1024, kGuardBytes = 4096;
constexpr int kWarp = 32;

// A fiber's stack, with an inaccessible page below it: an overflow faults
// instead of writing over the next stack.
struct Stack {
  Stack() : base(mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)) {
    if (base == MAP_FAILED) throw std::runtime_error("gpu_emu: no memory for a fiber stack");
    mprotect(base, kGuardBytes, PROT_NONE);
  }
  ~Stack() { munmap(base, kStackBytes + kGuardBytes); }
  Stack(const Stack&) = delete;
  Stack& operator=(const Stack&) = delete;
  void* top() const { return static_cast<char*>(base) + kGuardBytes; }
  void* base;
};

enum class State { Ready, Waiting, Done, Failed };

struct Fiber {
  ucontext_t context;
  uint3 index;
  int tid = 0;  // x fastest, then y, then z, as CUDA numbers lanes
  State state = State::Ready;
  int group = 0;           // the barrier waited at: 0 the block, 1 + w warp w
  uint64_t generation = 0;  // that barrier's generation when it arrived
};

struct Barrier {
  int arrived = 0;
  uint64_t generation = 0;
};

// The block being run on this thread.
struct Block {
  const Config* config = nullptr;
  const std::function<void()>* body = nullptr;
  ucontext_t scheduler{};
  std::vector<Fiber> fibers;
  std::vector<Barrier> barriers;  // the block's, then one per warp
  std::vector<uint64_t> lanes;    // one shuffle slot per thread
  Fiber* current = nullptr;
  bool direct = false;  // threads called one after another, no fibers
  bool synced = false;  // a thread reached a barrier
  std::string failure;  // set by a fiber that cannot go on
};

thread_local Block* running = nullptr;
thread_local std::vector<std::unique_ptr<Stack>> stacks;
thread_local int last_error = 0;
std::atomic<int64_t> launches{0}, threads_run{0}, switches{0};

std::string where(const Config& c) {
  return std::string(c.file) + ":" + std::to_string(c.line) + ": kernel launch";
}

// Ends the current fiber for good; run() reports `why` once it regains control.
[[noreturn]] void fail(const std::string& why) {
  Block& b = *running;
  if (b.failure.empty()) b.failure = why;
  b.current->state = State::Failed;
  swapcontext(&b.current->context, &b.scheduler);
  __builtin_unreachable();
}

// Blocks the current fiber until `size` fibers have arrived at `group`.
void arrive(int group, int size) {
  Block& b = *running;
  b.synced = true;
  Fiber& f = *b.current;
  Barrier& bar = b.barriers[static_cast<size_t>(group)];
  if (++bar.arrived == size) {  // the last one releases the others and goes on
    bar.arrived = 0;
    ++bar.generation;
    return;
  }
  f.state = State::Waiting;
  f.group = group;
  f.generation = bar.generation;
  swapcontext(&f.context, &b.scheduler);
  f.state = State::Ready;
  threadIdx = f.index;
}

void start_fiber() {
  Block& b = *running;
  (*b.body)();
  b.current->state = State::Done;  // uc_link returns to the scheduler
}

// Runs every thread of block `index` to its end.
void run_block(Block& b, uint3 index) {
  const dim3 d = b.config->block;
  const int n = static_cast<int>(d.x * d.y * d.z);
  blockIdx = index;
  if (b.direct) {
    for (int t = 0; t < n; ++t) {
      threadIdx = {t % d.x, t / d.x % d.y, t / (d.x * d.y)};
      (*b.body)();
    }
    return;
  }
  while (static_cast<int>(stacks.size()) < n) stacks.push_back(std::make_unique<Stack>());
  b.fibers.assign(static_cast<size_t>(n), Fiber{});
  b.barriers.assign(static_cast<size_t>(1 + (n + kWarp - 1) / kWarp), Barrier{});
  b.lanes.assign(static_cast<size_t>(n), 0);
  for (int t = 0; t < n; ++t) {
    Fiber& f = b.fibers[static_cast<size_t>(t)];
    f.tid = t;
    f.index = {t % d.x, t / d.x % d.y, t / (d.x * d.y)};
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = stacks[static_cast<size_t>(t)]->top();
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = &b.scheduler;
    makecontext(&f.context, start_fiber, 0);
  }
  for (;;) {
    int done = 0;
    bool progress = false;
    for (Fiber& f : b.fibers) {
      if (f.state == State::Done) ++done;
      const bool blocked =
          f.state == State::Waiting &&
          b.barriers[static_cast<size_t>(f.group)].generation == f.generation;
      if (f.state == State::Done || blocked) continue;
      b.current = &f;
      threadIdx = f.index;
      swapcontext(&b.scheduler, &f.context);
      ++switches;
      if (f.state == State::Failed) throw std::runtime_error(where(*b.config) + ": " + b.failure);
      progress = true;
    }
    if (done == n) return;
    if (!progress) {
      std::string why = where(*b.config) + ": block (" + std::to_string(index.x) + "," +
                        std::to_string(index.y) + "," + std::to_string(index.z) + "): ";
      for (const Fiber& f : b.fibers) {
        if (f.state != State::Waiting) continue;
        const bool block = f.group == 0;
        throw std::runtime_error(why + "thread " + std::to_string(f.tid) + " waits at " +
                                 (block ? "__syncthreads" : "a warp shuffle") +
                                 " that other threads of its " + (block ? "block" : "warp") +
                                 " never reach (they returned or took another number of turns)");
      }
    }
  }
}

// The block being run, which must be running fibers to reach a barrier.
Block& fibered() {
  Block& b = *running;
  if (b.direct)
    throw std::runtime_error(where(*b.config) + ": the kernel reached __syncthreads or a shuffle, "
                             "which its first block did not: the emulator runs the other blocks "
                             "without fibers and cannot go on");
  return b;
}

}  // namespace

void run(const Config& config, const std::function<void()>& body) {
  const dim3 g = config.grid, d = config.block;
  const uint64_t threads = uint64_t{d.x} * d.y * d.z;
  // CUDA's limits on compute capability 8.0 and 9.0
  if (threads == 0 || threads > 1024 || d.z > 64 || g.x == 0 || g.y == 0 || g.z == 0 ||
      g.x > 2147483647u || g.y > 65535 || g.z > 65535 || config.shared > 48 * 1024) {
    last_error = 9;  // cudaErrorInvalidConfiguration
    return;
  }
  if (running) throw std::runtime_error(where(config) + ": launched from inside a kernel");
  ++launches;
  threads_run += static_cast<int64_t>(threads * g.x * g.y * g.z);
  Block b;
  b.config = &config;
  b.body = &body;
  running = &b;
  gridDim = g;
  blockDim = d;
  try {
    for (unsigned z = 0; z < g.z; ++z)
      for (unsigned y = 0; y < g.y; ++y)
        for (unsigned x = 0; x < g.x; ++x) {
          run_block(b, {x, y, z});
          b.direct = b.direct || !b.synced;  // no barrier in the first block: none later
        }
  } catch (...) {
    running = nullptr;
    throw;
  }
  running = nullptr;
}

void sync_block() {
  Block& b = fibered();
  arrive(0, static_cast<int>(b.fibers.size()));
}

void exchange_xor(void* value, size_t bytes, int lane_mask, unsigned mask) {
  Block& b = fibered();
  const int tid = b.current->tid, warp = tid / kWarp, lane = tid % kWarp;
  const int lanes = std::min<int>(kWarp, static_cast<int>(b.fibers.size()) - warp * kWarp);
  if (mask != 0xffffffffu || lanes != kWarp)
    fail("__shfl_xor_sync with mask " + std::to_string(mask) + " in warp " + std::to_string(warp) +
         " of " + std::to_string(lanes) + " lanes: only whole warps of 32 are emulated");
  std::memcpy(&b.lanes[static_cast<size_t>(tid)], value, bytes);
  arrive(1 + warp, lanes);
  const int from = lane ^ lane_mask;
  if (from >= 0 && from < lanes)
    std::memcpy(value, &b.lanes[static_cast<size_t>(warp * kWarp + from)], bytes);
  arrive(1 + warp, lanes);  // every lane has read before the slots are written again
}

Counts counts() { return {launches, threads_run, switches}; }

int take_last_error() { return std::exchange(last_error, 0); }

}  // namespace gpu_emu
