// The collective timeout. A blocking MPI call (allreduce, broadcast, barrier,
// waiting for an async allreduce, ...) that waits longer than MINIDL_TIMEOUT
// seconds ends this process with status 1 after printing
//   minidl: rank 0: barrier has waited 300 s for the other ranks (MINIDL_TIMEOUT=300) ...
// and mpirun then ends the whole job. A rank that is stuck, stopped
// (SIGSTOP) or out of step with the others (a different number of steps)
// would otherwise leave them waiting forever. MINIDL_TIMEOUT is in seconds
// (fractions allowed), default 300; 0 turns the timeout off.
#pragma once
#include <cstddef>

namespace minidl::parallel::backend {

// MINIDL_TIMEOUT in seconds (0: off). Throws minidl::Error naming the
// variable when it is not a number >= 0.
double collective_timeout();

// Starts the watchdog thread when the timeout is on (idempotent); stop joins it.
void start_watchdog(int world_rank);
void stop_watchdog();

// Marks a blocking call for the watchdog while it lives. `op` must outlive it
// (a string literal). Calls are not nested (MPI_THREAD_SERIALIZED).
class Waiting {
 public:
  Waiting(const char* op, size_t bytes);
  ~Waiting();
  Waiting(const Waiting&) = delete;
  Waiting& operator=(const Waiting&) = delete;
};

}  // namespace minidl::parallel::backend
