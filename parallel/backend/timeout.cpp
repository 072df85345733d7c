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
#include <string>
#include <thread>

#include "framework/error.h"
#include "parallel/backend/mpi_check.h"

namespace minidl::parallel::backend {

namespace {
using Clock = std::chrono::steady_clock;
constexpr double kReadWait = 1.0;  // seconds the watchdog waits for the records it reads

// One rank's record in the window, written by that rank only. `begin` and
// `end` hold the same count once a write is complete; a reader that sees
// them differ read the record mid-write.
struct Record {
  uint64_t begin;
  uint64_t started;  // collectives started on the world
  uint64_t number;   // the blocking call's collective number (0: point-to-point)
  uint64_t comm;     // its communicator (0: the world)
  int32_t peer;      // send/recv: the other side
  uint8_t last_op;   // the kind of collective #started
  uint8_t op;        // the blocking call now (Op::None: not in one)
  uint8_t async;     // it waits for a non-blocking collective
  uint8_t unused;
  uint64_t end;
};

struct Records {
  MPI_Win win = MPI_WIN_NULL;
  Record* mine = nullptr;  // this rank's record, inside the window
  uint64_t writes = 0;
  const char* unavailable = "the records were not opened";  // why win is null
};

Records& records() {
  static Records r;
  return r;
}

// Rewrites this rank's record through `change`: a few stores, no communication.
template <class F>
void publish(F change) {
  Records& r = records();
  if (!r.mine) return;
  const uint64_t n = ++r.writes;
  std::atomic_ref(r.mine->begin).store(n, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_release);
  change(*r.mine);
  std::atomic_ref(r.mine->end).store(n, std::memory_order_release);
}

struct Watchdog {
  std::mutex slot;  // guards call, since, active
  Call call;
  Clock::time_point since;
  bool active = false;
  std::mutex mutex;  // for stop and wake
  std::condition_variable wake;
  bool stop = false;
  std::thread thread;
};

Watchdog& watchdog() {
  static Watchdog w;
  return w;
}

// ---- reading the other ranks' records when a call has timed out ----

enum class Seen { Record, NoAnswer, MidWrite, Failed };
struct Reading {
  Seen seen = Seen::Failed;
  Record record{};
};

// Reads `ranks`' records, giving up on a rank after `wait` seconds. Never
// waits longer: it does not unlock the window (which would wait for reads
// that never end), since the process ends right after.
std::vector<Reading> read_records(const std::vector<int>& ranks, double wait) {
  Records& r = records();
  std::vector<Reading> out(ranks.size());
  std::vector<MPI_Request> requests(ranks.size(), MPI_REQUEST_NULL);
  for (size_t i = 0; i < ranks.size(); ++i) {
    out[i].seen = Seen::NoAnswer;
    if (MPI_Rget(&out[i].record, sizeof(Record), MPI_BYTE, ranks[i], 0, sizeof(Record), MPI_BYTE,
                 r.win, &requests[i]) != MPI_SUCCESS)
      out[i].seen = Seen::Failed;
  }
  const auto deadline = Clock::now() + std::chrono::duration<double>(wait);
  for (size_t pending = ranks.size(); pending > 0 && Clock::now() < deadline;) {
    pending = 0;
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (out[i].seen != Seen::NoAnswer) continue;
      int done = 0;
      if (MPI_Test(&requests[i], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        out[i].seen = Seen::Failed;
      } else if (done) {
        const Record& got = out[i].record;
        out[i].seen = got.begin == got.end ? Seen::Record : Seen::MidWrite;
      } else {
        ++pending;
      }
    }
    if (pending) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return out;
}

// "rank 1", "ranks 1 and 3", "ranks 0, 2 and 3"
std::string list_ranks(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    s += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
  return s;
}

// What a rank's record says it is doing.
std::string doing(const Record& q) {
  const Op op = static_cast<Op>(q.op);
  if (op == Op::None)
    return q.started == 0 ? "is outside MPI (computing, or stopped) before its first collective"
                          : cat("is outside MPI (computing, or stopped) after collective #",
                                q.started, " (", op_name(static_cast<Op>(q.last_op)), ")");
  if (op == Op::Finalize) return "is in MPI_Finalize (its program has ended)";
  if (op == Op::Send) return cat("is in send to rank ", q.peer);
  if (op == Op::Recv) return cat("is in recv from rank ", q.peer);
  return cat("is in ", q.async ? "a wait for " : "", op_name(op), " #", q.number,
             q.comm == 0 ? "" : " of a group");
}

// Whether rank `q` has arrived at (or passed) the call this rank waits in.
bool arrived(const Call& call, int me, const Record& q) {
  const auto op = static_cast<uint8_t>(call.op);
  if (call.op == Op::Send || call.op == Op::Recv)
    return q.peer == me && q.op == static_cast<uint8_t>(call.op == Op::Send ? Op::Recv : Op::Send);
  if (call.scope->id == 0)  // the world: its count of collectives started
    return q.started > call.number || (q.started == call.number && q.last_op == op);
  return q.comm == call.scope->id && q.number >= call.number &&
         (q.number > call.number || q.op == op || q.op == static_cast<uint8_t>(Op::None));
}

// The part of the message after "has waited ...": where the call is and
// which ranks had not arrived.
std::string diagnose(const Call& call, int me) {
  std::string where;
  if (call.op == Op::Send || call.op == Op::Recv)
    where = cat("Its peer is rank ", call.peer, "; ");
  else if (call.number > 0)
    where = cat("It is collective #", call.number,
                call.scope && call.scope->id != 0 ? " on a group of ranks" : " on the world", "; ");
  Records& r = records();
  if (!r.mine || !call.scope)
    return where + "which ranks had not arrived is unknown (" + r.unavailable + ").";
  std::vector<int> others;
  if (call.peer >= 0)
    others.push_back(call.peer);
  else
    for (int q : call.scope->members)
      if (q != me) others.push_back(q);
  if (MPI_Win_lock_all(MPI_MODE_NOCHECK, r.win) != MPI_SUCCESS)
    return where + "which ranks had not arrived is unknown (MPI_Win_lock_all failed).";
  std::vector<Reading> read = read_records(others, kReadWait);
  bool retry = false;
  for (const Reading& x : read) retry |= x.seen == Seen::MidWrite;
  if (retry) {  // once more for the records read mid-write
    std::vector<int> again;
    for (size_t i = 0; i < others.size(); ++i)
      if (read[i].seen == Seen::MidWrite) again.push_back(others[i]);
    std::vector<Reading> second = read_records(again, kReadWait / 4);
    for (size_t i = 0, j = 0; i < others.size(); ++i)
      if (read[i].seen == Seen::MidWrite) read[i] = second[j++];
  }
  std::vector<int> missing;
  std::string details;
  for (size_t i = 0; i < others.size(); ++i) {
    const Reading& x = read[i];
    if (x.seen == Seen::Record && arrived(call, me, x.record)) continue;
    missing.push_back(others[i]);
    details += details.empty() ? "" : "; ";
    details += cat("rank ", others[i], " ");
    switch (x.seen) {
      case Seen::Record:
        details += doing(x.record);
        break;
      case Seen::NoAnswer:
        details += cat("did not respond within ", kReadWait,
                       " s (stopped, or outside MPI on a "
                       "network where reading its record needs it inside MPI)");
        break;
      case Seen::MidWrite:
        details += "is running (its record changed while being read)";
        break;
      case Seen::Failed:
        details += "could not be read (MPI_Rget failed)";
        break;
    }
  }
  if (missing.empty())
    return where + "every other rank had arrived: MPI itself, or the network, is stuck.";
  return cat(where, list_ranks(missing), " had not arrived: ", details, ".");
}

[[noreturn]] void expire(int rank, const Call& call, double waited, double limit) {
  char head[256];
  std::snprintf(head, sizeof head,
                "minidl: rank %d: %s%s (%zu bytes) has waited %.1f s for the other ranks, longer "
                "than MINIDL_TIMEOUT=%g s.",
                rank, call.async ? "async " : "", op_name(call.op), call.bytes, waited, limit);
  const std::string text = cat(head, " ", diagnose(call, rank),
                               " A rank is stuck, stopped, or out of step with this one "
                               "(different step counts, batch sizes or models). Ending the job.\n");
  std::fputs(text.c_str(), stderr);
  std::fflush(nullptr);
  std::_Exit(1);  // mpirun ends the other ranks when one exits non-zero
}
}  // namespace

const char* op_name(Op op) {
  switch (op) {
    case Op::None:
      return "nothing";
    case Op::Allreduce:
      return "allreduce";
    case Op::Broadcast:
      return "broadcast";
    case Op::Allgather:
      return "allgather";
    case Op::Barrier:
      return "barrier";
    case Op::Split:
      return "split";
    case Op::Send:
      return "send";
    case Op::Recv:
      return "recv";
    case Op::Finalize:
      return "finalize";
  }
  return "?";
}

double collective_timeout() {
  const char* text = std::getenv("MINIDL_TIMEOUT");
  if (!text || !*text) return 300;
  double seconds = -1;
  const char* end = text + std::strlen(text);
  const auto [stop, ec] = std::from_chars(text, end, seconds);
  MINIDL_CHECK(ec == std::errc() && stop == end && seconds >= 0 && std::isfinite(seconds),
               "MINIDL_TIMEOUT: expected the collective timeout in seconds, a number >= 0 "
               "(0: off), got '",
               text, "'");
  return seconds;
}

void open_records(bool thread_multiple) {
  Records& r = records();
  if (r.win != MPI_WIN_NULL) return;
  if (collective_timeout() == 0) {
    r.unavailable = "MINIDL_TIMEOUT is 0";
    return;
  }
  if (!thread_multiple) {
    r.unavailable = "MPI gave less than MPI_THREAD_MULTIPLE, which reading them needs";
    return;
  }
  Record* mine = nullptr;
  MPI_Win win = MPI_WIN_NULL;
  int ok = MPI_Win_allocate(sizeof(Record), sizeof(Record), MPI_INFO_NULL, MPI_COMM_WORLD, &mine,
                            &win) == MPI_SUCCESS;
  // Every rank uses the window or none does (a rank that failed has none to free).
  MINIDL_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (!ok) {
    r.unavailable = "MPI could not make a one-sided window (no osc component for this network)";
    return;  // a window made on this rank stays unused (freeing it is collective)
  }
  MINIDL_MPI_CHECK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
  std::memset(mine, 0, sizeof(Record));
  r.win = win;
  r.mine = mine;
  r.unavailable = "";
}

void close_records() {
  Records& r = records();
  if (r.win == MPI_WIN_NULL) return;
  publish([](Record& mine) { mine.op = static_cast<uint8_t>(Op::Finalize); });
  r.mine = nullptr;
  MINIDL_MPI_CHECK(MPI_Win_free(&r.win));
  r.unavailable = "the records were closed";
}

uint64_t announce_start(const CommScope& scope, uint64_t& counter, Op op) {
  const uint64_t number = ++counter;
  if (scope.id == 0)
    publish([&](Record& mine) {
      mine.started = number;
      mine.last_op = static_cast<uint8_t>(op);
    });
  return number;
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
      std::unique_lock slot(w.slot);
      if (!w.active) continue;
      const double waited = std::chrono::duration<double>(Clock::now() - w.since).count();
      if (waited <= limit) continue;
      const Call call = w.call;
      slot.unlock();
      expire(world_rank, call, waited, limit);
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

Waiting::Waiting(const Call& call) {
  Watchdog& w = watchdog();
  {
    std::lock_guard slot(w.slot);
    w.call = call;
    w.since = Clock::now();
    w.active = true;
  }
  publish([&](Record& mine) {
    mine.op = static_cast<uint8_t>(call.op);
    mine.number = call.number;
    mine.comm = call.scope ? call.scope->id : 0;
    mine.peer = call.peer;
    mine.async = call.async;
  });
}

Waiting::~Waiting() {
  Watchdog& w = watchdog();
  {
    std::lock_guard slot(w.slot);
    w.active = false;
  }
  publish([](Record& mine) { mine.op = static_cast<uint8_t>(Op::None); });
}

}  // namespace minidl::parallel::backend
