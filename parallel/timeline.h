// Timeline: what every rank did when, as one Chrome trace (JSON) that
// Perfetto (ui.perfetto.dev, "Open trace file") and chrome://tracing open.
//
//   parallel::Timeline::enable();                  // on every rank, before training
//   model.train(epochs, train, callbacks);         // Model, DataParallel, autograd record
//   parallel::Timeline::write("timeline.json");    // collective: rank 0 writes the file
//
// What is recorded while enabled (an event is a span on one track of one rank):
//   name                  category       track          recorded by
//   "step"                step           main           Model::train, one per step
//   "forward"             compute        main           EagerStep (network and loss)
//   "backward"            compute        main           EagerStep (loss.backward())
//   "forward and backward" compute       main           GradAccumulationStep (all micro batches)
//   "step (CUDA graph)"   compute        main           GraphedStep (a whole step)
//   "backward conv1"      backward       main           autograd: a contiguous run of backward
//                                                       nodes recorded by one layer (args: nodes)
//   "allreduce bucket 3"  communication  communication  DataParallel: from the non-blocking
//                                                       start (in a grad-ready hook) to the first
//                                                       moment the rank saw it finished (args:
//                                                       bucket, bytes, params, blocking); a
//                                                       collective: split in two at write(), below
//   "wait allreduce       wait           communication  write(): from this rank's start to the
//    bucket 3"                                          moment the last rank started it (args:
//                                                       last_rank, the one every rank waited for)
//   "transfer allreduce   transfer       communication  write(): from the last rank's start to
//    bucket 3"                                          the end of the collective's event here
//   "adasum", "adasum     communication  main           AdaSum::reduce: the whole of it, each
//    level 0", "adasum                                  level (pairwise exchange, then the dots
//    gather 0"                                          summed over the level's block) and each
//                                                       gather; levels and gathers are
//                                                       collectives (their "wait ..." and
//                                                       "transfer ..." on main, nested in them)
//   "finish allreduce"    communication  main           DataParallel: the end-of-backward wait,
//                                                       averaging and gradient write-back
//   "optimizer step"      compute        main           EagerStep, GradAccumulationStep
//   "reduce metrics"      communication  main           Model::train: loss and accuracy summed
//                                                       over ranks (waits for the slowest rank)
//   "replica check"       check          main           ReplicaCheck (parallel/train/callbacks.h)
// Every event carries the training step it began in (args.step, from set_step).
// Layer names are registration paths (see Node::scope in framework/autograd.h):
// "conv1", or "module.conv1" inside DataParallel; a layer called by no other
// layer is named by its type ("CrossEntropyLoss"). Ops a cell runs in its own
// forward (LeNet5's relu and pooling) count as that cell's ("module" for the
// network inside DataParallel).
//
// Output: {"traceEvents": [...]}, one process per rank (pid = rank, named
// "rank R"), one thread row per track (tid; "main" is the thread that called
// enable(), other threads are "thread N", named tracks keep their name). Events
// that overlap on one track without nesting (allreduces in flight together) are
// spread over extra rows, "communication (2)", ... Times are microseconds from
// the earliest enable() of any rank, with every rank's clock aligned to rank 0's
// at write() (by the shortest of 8 ping-pongs: good to a few microseconds on one
// machine, busy or not).
//
// Waiting apart from moving data: a collective cannot finish before the last
// rank has started it, so an event begun by begin_collective() is split at
// write() into "wait NAME" (this rank's start to the last rank's start: waiting
// for the others, while this rank goes on computing) and "transfer NAME" (the
// rest: the data moving, and with MPI's non-blocking calls also the time until
// the rank next made an MPI call and saw it done, so an upper bound). The
// ranks' start times are matched by name, step, occurrence (the n-th event of
// that name in that step) and group number, gathered by write() and compared
// on the aligned clocks; no collective is added to training. A collective that
// not exactly `ranks` ranks recorded (two sub-groups under one group number, a
// rank that stopped recording) is written whole, without the split.
//
// Cost: disabled, a TimelineScope or an instrumented call site is one relaxed
// atomic load and a branch; enabled, an event costs a mutex and a vector push
// (and each backward node two clock reads). enable() takes autograd's node
// observer (set_node_observer) and turns scope tracking on; disable() gives
// both back. Record from any thread; enable, disable and write from one.
// write() alone adds communication: 8 ping-pongs between rank 0 and each rank,
// the collectives' start times gathered to rank 0 and its verdict broadcast
// (a few kilobytes), then the events themselves.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "parallel/communicator.h"

namespace minidl::parallel {

// An integer argument shown with an event (string literal key).
struct TimelineArg {
  const char* key;
  int64_t value;
};

// One span on this rank. Times are steady_clock nanoseconds (Timeline::now_ns()).
struct TimelineEvent {
  std::string name;
  const char* category = "";
  const char* track = nullptr;        // null: the thread that began it
  int thread = 0;                     // that thread's index (0: the first to record)
  int64_t step = 0;                   // Timeline::step() when it began
  int64_t begin_ns = 0, end_ns = -1;  // end_ns < 0 while still open
  std::vector<std::pair<const char*, int64_t>> args;
  int collective_ranks = 0;  // from begin_collective(): its group's size; 0: not a collective
  int64_t collective_group = 0;  // and the group's number
};

class Timeline {
 public:
  static constexpr const char* kCommunication = "communication";  // the track of allreduces

  // Clears the events of any earlier recording and starts a new one. At most
  // max_events are kept; later ones are counted as dropped (reported in the file).
  static void enable(size_t max_events = size_t{1} << 20);
  // Stops recording; the events stay until the next enable().
  static void disable();
  static bool enabled() noexcept { return on_.load(std::memory_order_relaxed); }

  // The training step (from 1) that events begun from now on belong to; 0: none.
  static void set_step(int64_t step);
  static int64_t step();

  // Opens an event now and returns its id for end() (from any thread);
  // -1 when disabled or full. `category` and `track` must be string literals
  // (or otherwise live as long as the timeline); track null: this thread's row.
  static int64_t begin(std::string name, const char* category,
                       std::initializer_list<TimelineArg> args = {}, const char* track = nullptr);
  // begin() for a collective over a group of `ranks` ranks that every member
  // records under the same name, in the same order within a step: write()
  // splits it into waiting and transfer (see "Waiting apart from moving data").
  // `group`: a number the members share and other groups recording the same
  // name do not (AdaSum's pairs and blocks: their first rank); 0 for one group.
  static int64_t begin_collective(std::string name, const char* category, int ranks,
                                  std::initializer_list<TimelineArg> args = {},
                                  const char* track = nullptr, int64_t group = 0);
  // Closes the event `id` now; nothing for -1 or an already closed event.
  static void end(int64_t id) {
    if (id >= 0) end_event(id);
  }
  // Records an event whose times (now_ns() values) are already known.
  static void complete(std::string name, const char* category, int64_t begin_ns, int64_t end_ns,
                       std::initializer_list<TimelineArg> args = {}, const char* track = nullptr);
  static int64_t now_ns();

  // A copy of this rank's events in order of beginning, open ones included.
  static std::vector<TimelineEvent> events();
  static int64_t dropped();

  // Collective over `group` (every member calls it): aligns clocks, matches the
  // collectives' start times (rank 0 finds each one's last-starting rank), sends
  // each rank's closed events to rank 0, and rank 0 writes `path` (replacing it).
  // Every rank throws the same minidl::Error when rank 0 cannot write the file.
  // Recording goes on; a later write() writes everything again.
  static void write(const std::string& path, Communicator& group);
  // Over parallel::world(), or this process alone before parallel::init().
  static void write(const std::string& path);

 private:
  static void end_event(int64_t id);
  inline static std::atomic<bool> on_{false};
};

// An event from construction to destruction (on this thread's row unless `track`).
//   { parallel::TimelineScope scope("optimizer step", "compute"); opt.step(); }
class TimelineScope {
 public:
  TimelineScope(const char* name, const char* category,
                std::initializer_list<TimelineArg> args = {}, const char* track = nullptr)
      : id_(Timeline::enabled() ? Timeline::begin(name, category, args, track) : -1) {}
  // A name built by make_name(), called only when enabled:
  //   TimelineScope scope([&] { return "adasum level " + std::to_string(l); }, "communication");
  template <class MakeName, class = std::enable_if_t<std::is_invocable_r_v<std::string, MakeName&>>>
  TimelineScope(MakeName&& make_name, const char* category,
                std::initializer_list<TimelineArg> args = {}, const char* track = nullptr)
      : id_(Timeline::enabled() ? Timeline::begin(make_name(), category, args, track) : -1) {}
  // A collective's event (Timeline::begin_collective), named only when enabled:
  //   auto scope = TimelineScope::collective([&] { return "adasum level 0"; }, "communication",
  //                                          /*ranks=*/2, /*group=*/rank & ~1);
  template <class MakeName>
  static TimelineScope collective(MakeName&& make_name, const char* category, int ranks,
                                  int64_t group, std::initializer_list<TimelineArg> args = {}) {
    return TimelineScope(Timeline::enabled() ? Timeline::begin_collective(make_name(), category,
                                                                          ranks, args, nullptr, group)
                                             : -1);
  }
  ~TimelineScope() { Timeline::end(id_); }
  TimelineScope(const TimelineScope&) = delete;
  TimelineScope& operator=(const TimelineScope&) = delete;

 private:
  explicit TimelineScope(int64_t id) : id_(id) {}
  int64_t id_;
};

}  // namespace minidl::parallel
