// The collective timeout. A blocking MPI call (allreduce, broadcast, barrier,
// waiting for an async allreduce, ...) that waits longer than MINIDL_TIMEOUT
// seconds ends this process with status 1 after printing what it waited for
// and which ranks had not arrived, e.g.
//   minidl: rank 0: allreduce (4096 bytes) has waited 300.0 s for the other ranks, longer
//   than MINIDL_TIMEOUT=300 s. It is collective #12 on the world; ranks 1 and 3 had not
//   arrived: rank 1 is in broadcast #12; rank 3 did not answer within 1 s (...). Ending the job.
// and mpirun then ends the whole job. A rank that is stuck, stopped
// (SIGSTOP) or out of step with the others (a different number of steps, a
// different collective) would otherwise leave them waiting forever.
// MINIDL_TIMEOUT is in seconds (fractions allowed), default 300; 0 turns the
// timeout off.
//
// How the ranks are found: every rank keeps a small record of what it does:
// the number and kind of the last collective it started on the world and the
// blocking call it is in now (a few stores under an uncontended lock per
// call, no communication). Its watchdog thread looks every 10 ms for asks on
// a duplicate of the world and answers each with a copy of the record. When
// a call times out, the watchdog asks every member of the call's
// communicator and gives up on a rank that has not answered within 1 s: a
// stopped (SIGSTOP) or unreachable rank "did not answer"; a rank computing
// outside MPI answers that it is. This is point-to-point messaging only, so
// it works on every network Open MPI runs on, across hosts over TCP too.
// Answering from the watchdog thread while the main thread sits in MPI needs
// MPI_THREAD_MULTIPLE, which mpi_init asks for while the timeout is on.
// Where MPI gave less (or the timeout is off) the message says the ranks are
// unknown.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace minidl::parallel::backend {

// MINIDL_TIMEOUT in seconds (0: off). Throws minidl::Error naming the
// variable when it is not a number >= 0.
double collective_timeout();

// Start-up, before the records exist: while one lives, a thread ends the job
// (one line on stderr naming the rank and MINIDL_TIMEOUT, exit status 1,
// which makes mpirun end the other ranks) if it is not destroyed within the
// timeout. mpi_init holds one around MPI_Init_thread and the collective
// set-up after it, which wait for every rank: a rank stopped or stuck before
// or inside its own start-up leaves them there. Nothing when the timeout is off.
class StartupGuard {
 public:
  explicit StartupGuard(int world_rank);
  ~StartupGuard();
  StartupGuard(const StartupGuard&) = delete;
  StartupGuard& operator=(const StartupGuard&) = delete;

 private:
  struct State;
  State* state_ = nullptr;
};

// Starts the watchdog thread when the timeout is on (idempotent); stop joins it.
void start_watchdog(int world_rank);
void stop_watchdog();

// The records: open_records is collective (after MPI_Init, before
// start_watchdog); it opens nothing when the timeout is off or MPI gave less
// than MPI_THREAD_MULTIPLE. close_records is collective too (before
// MPI_Finalize): it marks this rank as finalising, waits for every rank with
// the watchdog still answering (so a rank stuck in a collective this one has
// left learns that it ended), then stops the watchdog.
void open_records(bool thread_multiple);
void close_records();

// The calls a rank announces.
enum class Op : uint8_t {
  None,
  Allreduce,
  Broadcast,
  Allgather,
  ReduceScatter,
  Barrier,
  Split,
  Send,
  Recv,
  Finalize
};
const char* op_name(Op op);  // "allreduce", ...

// A communicator as the records see it: its id (0 for the world, else a hash
// of its members) and its members' world ranks.
struct CommScope {
  uint64_t id = 0;
  std::vector<int> members;
};

// A collective starts on `scope` (blocking, or a non-blocking one is
// started): on the world it becomes this rank's "last collective started".
// Returns its number on that communicator (1, 2, ...), counted in `counter`.
uint64_t announce_start(const CommScope& scope, uint64_t& counter, Op op);

// Marks a blocking call for the watchdog while it lives. Calls are not
// nested (MPI_THREAD_SERIALIZED for the library's own calls).
struct Call {
  Op op = Op::None;
  size_t bytes = 0;
  const CommScope* scope = nullptr;  // must outlive the Waiting
  uint64_t number = 0;               // collectives: from announce_start; send/recv: 0
  int peer = -1;                     // send/recv: the other side's world rank
  bool async = false;                // waiting for a non-blocking collective started earlier
};
class Waiting {
 public:
  explicit Waiting(const Call& call);
  ~Waiting();
  Waiting(const Waiting&) = delete;
  Waiting& operator=(const Waiting&) = delete;
};

}  // namespace minidl::parallel::backend
