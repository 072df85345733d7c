#include "parallel/init.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#ifdef __linux__
#include <sched.h>
#endif

#include "framework/cuda.h"
#include "framework/threads.h"
#include "parallel/backend/local.h"
#include "parallel/backend/mpi.h"

namespace minidl::parallel {

namespace {
struct State {
  std::mutex mutex;
  std::shared_ptr<Communicator> world;
  int local_rank = 0, local_size = 1;
  bool used_mpi = false;
  bool hooks_installed = false;
  std::terminate_handler previous_terminate = nullptr;
};

State& state() {
  static State s;
  return s;
}

Communicator& checked_world(const char* op) {
  auto& w = state().world;
  MINIDL_CHECK(w, "parallel::", op, ": call parallel::init() first");
  return *w;
}

// Under MPI: report the exception with the rank, then end every rank of the job.
[[noreturn]] void on_terminate() {
  State& s = state();
  if (s.used_mpi && backend::mpi_active()) {
    int r = s.world ? s.world->rank() : -1;
    try {
      if (auto e = std::current_exception()) std::rethrow_exception(e);
      std::fprintf(stderr, "minidl: rank %d: std::terminate called without an exception\n", r);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "minidl: rank %d: uncaught exception: %s\n", r, e.what());
    } catch (...) {
      std::fprintf(stderr, "minidl: rank %d: uncaught exception of unknown type\n", r);
    }
    std::fprintf(stderr, "minidl: rank %d: aborting the whole MPI job\n", r);
    backend::mpi_abort(1);
  }
  if (s.previous_terminate) s.previous_terminate();
  std::abort();
}
}  // namespace

int default_num_threads(int local_size) {
  int hw = static_cast<int>(std::thread::hardware_concurrency());
  int n = std::max(1, hw) / std::max(1, local_size);
#ifdef __linux__
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) n = std::min(n, CPU_COUNT(&set));
#endif
  return std::max(1, n);
}

bool launched_by_mpirun() { return backend::started_by_mpirun(); }

void init() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (s.world) return;
  if (launched_by_mpirun()) {
    backend::MpiWorld w = backend::mpi_init();
    s.world = w.world;
    s.local_rank = w.local_rank;
    s.local_size = w.local_size;
    s.used_mpi = true;
    // One GPU per rank on a host of several ranks (unless cuda::set_device chose)
    if (w.local_size > 1) cuda::prefer_device(w.local_rank);
  } else {
    s.world = std::make_shared<backend::LocalCommunicator>();
    s.local_rank = 0;
    s.local_size = 1;
  }
  if (!s.hooks_installed) {
    s.previous_terminate = std::set_terminate(on_terminate);
    std::atexit([] {
      try {
        finalize();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "minidl: parallel::finalize at exit failed: %s\n", e.what());
      }
    });
    s.hooks_installed = true;
  }
  const char* omp = std::getenv("OMP_NUM_THREADS");
  if (!omp || !*omp) set_max_threads(default_num_threads(s.local_size));
}

void finalize() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.world) return;
  s.world.reset();
  if (s.used_mpi) backend::mpi_finalize();
}

bool is_initialized() { return state().world != nullptr; }

int rank() { return checked_world("rank").rank(); }
int world_size() { return checked_world("world_size").size(); }
int local_rank() {
  checked_world("local_rank");
  return state().local_rank;
}
int local_size() {
  checked_world("local_size");
  return state().local_size;
}
void barrier() { checked_world("barrier").barrier(); }
Communicator& world() { return checked_world("world"); }
std::shared_ptr<Communicator> world_ptr() {
  checked_world("world_ptr");
  return state().world;
}

std::shared_ptr<Communicator> new_group(const std::vector<int>& ranks) {
  return checked_world("new_group").split(ranks);
}

void abort_job(int exit_code) {
  State& s = state();
  if (s.world) s.world->abort(exit_code);
  std::fflush(nullptr);
  std::_Exit(exit_code);
}

}  // namespace minidl::parallel
