#include "parallel/backend/timeout.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <string>
#include <thread>

#include "framework/error.h"
#include "parallel/backend/mpi_check.h"

namespace minidl::parallel::backend {

namespace {
using Clock = std::chrono::steady_clock;

constexpr double kAskWait = 1.0;      // seconds a timed-out rank waits for the others' answers
constexpr double kAnswerPoll = 0.01;  // seconds between the watchdog's looks for asks
constexpr int kAskTag = 1, kAnswerTag = 2;

// What a rank is doing, written by its main thread at each call, and sent by
// its watchdog thread to a rank that asks.
struct Record {
  uint64_t started;  // collectives started on the world
  uint64_t number;   // the blocking call's collective number (0: point-to-point)
  uint64_t comm;     // its communicator (0: the world)
  int32_t peer;      // send/recv: the other side
  uint8_t last_op;   // the kind of collective #started
  uint8_t op;        // the blocking call now (Op::None: not in one)
  uint8_t async;     // it waits for a non-blocking collective
  uint8_t unused;
};

// An answer on its way to the rank that asked (its buffer lives until sent).
struct Answer {
  Record record;
  MPI_Request request = MPI_REQUEST_NULL;
};

struct Records {
  std::mutex mutex;  // guards mine
  Record mine{};
  MPI_Comm comm = MPI_COMM_NULL;       // a duplicate of the world, for asks and answers only
  MPI_Request ask = MPI_REQUEST_NULL;  // the receive posted for the next ask
  char asked = 0;
  std::list<Answer> answers;
  const char* unavailable = "the records were not opened";  // why comm is null
};

Records& records() {
  static Records r;
  return r;
}

// Rewrites this rank's record through `change`: a few stores under an
// uncontended lock, no communication.
template <class F>
void publish(F change) {
  Records& r = records();
  if (r.comm == MPI_COMM_NULL) return;
  std::lock_guard lock(r.mutex);
  change(r.mine);
}

// Sends a copy of this rank's record to every rank that has asked for it
// (the watchdog thread only, which owns `ask` and `answers`).
void answer_asks() {
  Records& r = records();
  r.answers.remove_if([](Answer& a) {
    int sent = 0;
    return MPI_Test(&a.request, &sent, MPI_STATUS_IGNORE) != MPI_SUCCESS || sent;
  });
  for (int asked = 0; r.ask != MPI_REQUEST_NULL;) {
    MPI_Status status;
    if (MPI_Test(&r.ask, &asked, &status) != MPI_SUCCESS || !asked) return;
    Answer& a = r.answers.emplace_back();
    {
      std::lock_guard lock(r.mutex);
      a.record = r.mine;
    }
    MPI_Isend(&a.record, sizeof(Record), MPI_BYTE, status.MPI_SOURCE, kAnswerTag, r.comm,
              &a.request);
    MPI_Irecv(&r.asked, 1, MPI_BYTE, MPI_ANY_SOURCE, kAskTag, r.comm, &r.ask);
  }
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

// ---- asking the other ranks what they do when a call has timed out ----

enum class Seen { Record, NoAnswer, Failed };
struct Reading {
  Seen seen = Seen::Failed;
  Record record{};
};

// Asks `ranks` for their records, giving up on a rank after `wait` seconds,
// and answers the ranks that ask this one meanwhile (they may have timed out
// too). Leaves unanswered requests behind: the process ends right after.
std::vector<Reading> ask_records(const std::vector<int>& ranks, double wait) {
  Records& r = records();
  std::vector<Reading> out(ranks.size());
  std::vector<MPI_Request> answers(ranks.size(), MPI_REQUEST_NULL), asks = answers;
  static const char ask = 1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const bool posted =
        MPI_Irecv(&out[i].record, sizeof(Record), MPI_BYTE, ranks[i], kAnswerTag, r.comm,
                  &answers[i]) == MPI_SUCCESS &&
        MPI_Isend(&ask, 1, MPI_BYTE, ranks[i], kAskTag, r.comm, &asks[i]) == MPI_SUCCESS;
    out[i].seen = posted ? Seen::NoAnswer : Seen::Failed;
  }
  const auto deadline = Clock::now() + std::chrono::duration<double>(wait);
  for (size_t pending = ranks.size(); pending > 0 && Clock::now() < deadline;) {
    answer_asks();
    pending = 0;
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (out[i].seen != Seen::NoAnswer) continue;
      int done = 0;
      if (MPI_Test(&answers[i], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        out[i].seen = Seen::Failed;
      else if (done)
        out[i].seen = Seen::Record;
      else
        ++pending;
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
    return q.started == 0 ? "is outside MPI (computing) before its first collective"
                          : cat("is outside MPI (computing) after collective #", q.started, " (",
                                op_name(static_cast<Op>(q.last_op)), ")");
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
  if (r.comm == MPI_COMM_NULL || !call.scope)
    return where + "which ranks had not arrived is unknown (" + r.unavailable + ").";
  std::vector<int> others;
  if (call.peer >= 0)
    others.push_back(call.peer);
  else
    for (int q : call.scope->members)
      if (q != me) others.push_back(q);
  const std::vector<Reading> read = ask_records(others, kAskWait);
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
        details += cat("did not answer within ", kAskWait, " s (stopped, or unreachable)");
        break;
      case Seen::Failed:
        details += "could not be asked (MPI_Isend or MPI_Irecv failed)";
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
    case Op::ReduceScatter:
      return "reduce_scatter";
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
  if (r.comm != MPI_COMM_NULL) return;
  if (collective_timeout() == 0) {
    r.unavailable = "MINIDL_TIMEOUT is 0";
    return;
  }
  if (!thread_multiple) {
    r.unavailable = "MPI gave less than MPI_THREAD_MULTIPLE, which answering asks needs";
    return;
  }
  MINIDL_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &r.comm));
  MINIDL_MPI_CHECK(MPI_Comm_set_errhandler(r.comm, MPI_ERRORS_RETURN));
  r.mine = Record{};
  MINIDL_MPI_CHECK(MPI_Irecv(&r.asked, 1, MPI_BYTE, MPI_ANY_SOURCE, kAskTag, r.comm, &r.ask));
  r.unavailable = "";
}

void close_records() {
  Records& r = records();
  if (r.comm == MPI_COMM_NULL) return stop_watchdog();
  publish([](Record& mine) { mine.op = static_cast<uint8_t>(Op::Finalize); });
  // Wait for every rank here, with the watchdog still answering "in
  // MPI_Finalize" to a rank that is stuck in a collective this one has left.
  MPI_Request all;
  MINIDL_MPI_CHECK(MPI_Ibarrier(r.comm, &all));
  for (int done = 0; !done; std::this_thread::sleep_for(std::chrono::milliseconds(1)))
    MINIDL_MPI_CHECK(MPI_Test(&all, &done, MPI_STATUS_IGNORE));
  stop_watchdog();
  MINIDL_MPI_CHECK(MPI_Cancel(&r.ask));
  MINIDL_MPI_CHECK(MPI_Wait(&r.ask, MPI_STATUS_IGNORE));
  for (Answer& a : r.answers) MINIDL_MPI_CHECK(MPI_Wait(&a.request, MPI_STATUS_IGNORE));
  r.answers.clear();
  MINIDL_MPI_CHECK(MPI_Comm_free(&r.comm));
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

struct StartupGuard::State {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread thread;
};

StartupGuard::StartupGuard(int world_rank) {
  const double limit = collective_timeout();
  if (limit <= 0) return;
  state_ = new State;
  state_->thread = std::thread([s = state_, limit, world_rank] {
    std::unique_lock<std::mutex> lock(s->mu);
    if (s->cv.wait_for(lock, std::chrono::duration<double>(limit), [s] { return s->done; })) return;
    std::fprintf(stderr,
                 "minidl: rank %d: MPI start-up (MPI_Init_thread and the world's set-up) has "
                 "taken longer than MINIDL_TIMEOUT=%g s. A rank is stopped or stuck before or in "
                 "its start-up, or was never started. Ending the job.\n",
                 world_rank, limit);
    std::fflush(nullptr);
    std::_Exit(1);  // mpirun ends the other ranks when one exits non-zero
  });
}

StartupGuard::~StartupGuard() {
  if (!state_) return;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->done = true;
  }
  state_->cv.notify_one();
  state_->thread.join();
  delete state_;
}

void start_watchdog(int world_rank) {
  const double limit = collective_timeout();
  Watchdog& w = watchdog();
  if (limit == 0 || w.thread.joinable()) return;
  w.stop = false;
  w.thread = std::thread([&w, world_rank, limit] {
    const auto poll = std::chrono::duration<double>(std::min(kAnswerPoll, limit / 4));
    std::unique_lock lock(w.mutex);
    while (!w.wake.wait_for(lock, poll, [&] { return w.stop; })) {
      answer_asks();
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
