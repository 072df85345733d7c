#include "parallel/timeline.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "framework/autograd.h"
#include "framework/error.h"
#include "parallel/backend/local.h"
#include "parallel/init.h"

namespace minidl::parallel {
namespace {

constexpr int kTag = 0x7100;  // point-to-point tag of write()'s gather

struct State {
  std::mutex mutex;
  std::vector<TimelineEvent> events;
  std::vector<std::thread::id> threads;  // by TimelineEvent::thread
  std::thread::id main_thread;           // the one that called enable()
  size_t max_events = 0;
  int64_t dropped = 0;
  int64_t generation = 0;  // bumped by enable(): ids of older events go stale
  int64_t origin_ns = 0;   // when enable() was called
  int end_callback = 0;    // autograd's end-of-backward callback, while enabled
};
State& state() {
  static auto* s = new State;  // never destroyed: hooks may record during exit
  return *s;
}
std::atomic<int64_t> current_step{0};

constexpr int kIndexBits = 40;
int64_t make_id(int64_t generation, size_t index) {
  return (generation << kIndexBits) | static_cast<int64_t>(index);
}

int thread_index(State& s) {  // with s.mutex held
  auto me = std::this_thread::get_id();
  auto it = std::find(s.threads.begin(), s.threads.end(), me);
  if (it != s.threads.end()) return static_cast<int>(it - s.threads.begin());
  s.threads.push_back(me);
  return static_cast<int>(s.threads.size() - 1);
}

// Appends an event (with s.mutex held); returns its index, or -1 when full.
int64_t push(State& s, std::string name, const char* category, int64_t begin_ns, int64_t end_ns,
             std::initializer_list<TimelineArg> args, const char* track) {
  if (s.events.size() >= s.max_events) {
    ++s.dropped;
    return -1;
  }
  TimelineEvent e{.name = std::move(name),
                  .category = category,
                  .track = track,
                  .thread = thread_index(s),
                  .step = current_step.load(),
                  .begin_ns = begin_ns,
                  .end_ns = end_ns,
                  .args = {}};
  for (const TimelineArg& a : args) e.args.emplace_back(a.key, a.value);
  s.events.push_back(std::move(e));
  return static_cast<int64_t>(s.events.size() - 1);
}

// ---- backward spans: contiguous runs of autograd nodes recorded by one layer ----
struct Span {
  bool open = false;
  const char* scope = nullptr;
  int64_t begin_ns = 0, last_end_ns = 0, nodes = 0;
};
thread_local Span span;

void flush_span() {
  if (!span.open) return;
  span.open = false;
  std::string layer = span.scope ? span.scope : "(outside layers)";
  Timeline::complete("backward " + layer, "backward", span.begin_ns, span.last_end_ns,
                     {{"nodes", span.nodes}});
}

void on_node(const char*, bool begin) {
  const int64_t t = Timeline::now_ns();
  if (!begin) {
    span.last_end_ns = t;
    return;
  }
  const char* scope = current_scope();  // the node's: run_backward sets it
  if (span.open && span.scope == scope) {
    ++span.nodes;
    return;
  }
  flush_span();
  span = {true, scope, t, t, 1};
}

// ---- write(): this rank's events as Chrome trace lines ----

// Spreads a track's events over rows ("lanes") on which every pair of events
// is either disjoint or nested, as trace viewers need. Returns each event's lane.
std::vector<int> assign_lanes(const std::vector<const TimelineEvent*>& sorted) {
  std::vector<std::vector<int64_t>> open_ends;  // per lane: ends of the enclosing events
  std::vector<int> lane_of;
  for (const TimelineEvent* e : sorted) {
    size_t lane = 0;
    for (; lane < open_ends.size(); ++lane) {
      auto& ends = open_ends[lane];
      while (!ends.empty() && ends.back() <= e->begin_ns) ends.pop_back();
      if (ends.empty() || e->end_ns <= ends.back()) break;
    }
    if (lane == open_ends.size()) open_ends.emplace_back();
    open_ends[lane].push_back(e->end_ns);
    lane_of.push_back(static_cast<int>(lane));
  }
  return lane_of;
}

// One JSON object per line, without the enclosing array. `shift_ns` turns this
// rank's clock into microseconds of the file's time axis.
std::string serialize(const State& s, int rank, int64_t shift_ns) {
  using nlohmann::json;
  std::vector<std::string> lines;
  auto metadata = [&](const char* name, int tid, json args) {
    lines.push_back(
        json{{"name", name}, {"ph", "M"}, {"pid", rank}, {"tid", tid}, {"args", args}}.dump());
  };
  metadata("process_name", 0, {{"name", "rank " + std::to_string(rank)}});
  metadata("process_sort_index", 0, {{"sort_index", rank}});

  // Tracks: threads by index first, then named tracks in order of appearance.
  std::map<std::pair<int, std::string>, std::vector<const TimelineEvent*>> tracks;
  std::map<std::string, int> named_order;
  for (const TimelineEvent& e : s.events) {
    if (e.end_ns < 0) continue;  // still open: not part of the picture yet
    std::pair<int, std::string> key{e.thread, ""};
    if (e.track) {
      auto [it, added] = named_order.emplace(e.track, static_cast<int>(named_order.size()));
      key = {(1 << 20) | it->second, e.track};
    }
    tracks[key].push_back(&e);
  }
  int next_tid = 1;
  for (auto& [key, list] : tracks) {
    std::stable_sort(list.begin(), list.end(), [](const TimelineEvent* a, const TimelineEvent* b) {
      return a->begin_ns != b->begin_ns ? a->begin_ns < b->begin_ns : a->end_ns > b->end_ns;
    });
    std::string row = key.second;
    if (row.empty())
      row = s.threads[key.first] == s.main_thread ? "main" : "thread " + std::to_string(key.first);
    std::vector<int> lanes = assign_lanes(list);
    const int lane_count = lanes.empty() ? 0 : *std::max_element(lanes.begin(), lanes.end()) + 1;
    for (int lane = 0; lane < lane_count; ++lane) {
      std::string name = lane == 0 ? row : row + " (" + std::to_string(lane + 1) + ")";
      metadata("thread_name", next_tid + lane, {{"name", name}});
      metadata("thread_sort_index", next_tid + lane, {{"sort_index", next_tid + lane}});
    }
    for (size_t i = 0; i < list.size(); ++i) {
      const TimelineEvent& e = *list[i];
      json args = json::object();
      if (e.step > 0) args["step"] = e.step;
      for (const auto& [k, v] : e.args) args[k] = v;
      lines.push_back(json{
          {"name", e.name},
          {"cat", e.category},
          {"ph", "X"},
          {"ts", static_cast<double>(e.begin_ns - shift_ns) / 1e3},
          {"dur", static_cast<double>(e.end_ns - e.begin_ns) / 1e3},
          {"pid", rank},
          {"tid", next_tid + lanes[i]},
          {"args", args}}.dump());
    }
    next_tid += lane_count;
  }
  std::string text;
  for (const std::string& line : lines) text += (text.empty() ? "" : ",\n") + line;
  return text;
}

}  // namespace

int64_t Timeline::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Timeline::enable(size_t max_events) {
  State& s = state();
  {
    std::lock_guard lock(s.mutex);
    s.events.clear();
    s.dropped = 0;
    ++s.generation;
    s.max_events = max_events;
    s.main_thread = std::this_thread::get_id();
    s.origin_ns = now_ns();
  }
  span.open = false;
  if (!on_.load()) {
    set_node_observer(on_node);
    set_scope_tracking(true);
    s.end_callback = add_backward_end_callback(flush_span);
  }
  on_.store(true);
}

void Timeline::disable() {
  if (!on_.load()) return;
  flush_span();
  on_.store(false);
  set_node_observer(nullptr);
  set_scope_tracking(false);
  remove_backward_end_callback(state().end_callback);
}

void Timeline::set_step(int64_t step) { current_step.store(step); }
int64_t Timeline::step() { return current_step.load(); }

int64_t Timeline::begin(std::string name, const char* category,
                        std::initializer_list<TimelineArg> args, const char* track) {
  if (!enabled()) return -1;
  State& s = state();
  const int64_t t = now_ns();
  std::lock_guard lock(s.mutex);
  int64_t index = push(s, std::move(name), category, t, -1, args, track);
  return index < 0 ? -1 : make_id(s.generation, static_cast<size_t>(index));
}

void Timeline::end_event(int64_t id) {
  const int64_t t = now_ns();
  State& s = state();
  std::lock_guard lock(s.mutex);
  const size_t index = static_cast<size_t>(id & ((int64_t{1} << kIndexBits) - 1));
  if ((id >> kIndexBits) != s.generation || index >= s.events.size()) return;  // stale
  if (s.events[index].end_ns < 0) s.events[index].end_ns = t;
}

void Timeline::complete(std::string name, const char* category, int64_t begin_ns, int64_t end_ns,
                        std::initializer_list<TimelineArg> args, const char* track) {
  if (!enabled()) return;
  State& s = state();
  std::lock_guard lock(s.mutex);
  push(s, std::move(name), category, begin_ns, std::max(begin_ns, end_ns), args, track);
}

std::vector<TimelineEvent> Timeline::events() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  std::vector<TimelineEvent> out = s.events;
  std::stable_sort(out.begin(), out.end(), [](const TimelineEvent& a, const TimelineEvent& b) {
    return a.begin_ns < b.begin_ns;
  });
  return out;
}

int64_t Timeline::dropped() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.dropped;
}

void Timeline::write(const std::string& path, Communicator& group) {
  const int rank = group.rank(), size = group.size();
  MINIDL_CHECK(rank >= 0, "Timeline::write: this process is not a member of the group");
  State& s = state();

  // Align clocks: right after a barrier every rank reads its clock.
  group.barrier();
  int64_t mine[3] = {now_ns(), 0, 0};
  {
    std::lock_guard lock(s.mutex);
    mine[1] = s.origin_ns;
    mine[2] = s.dropped;
  }
  std::vector<int64_t> all(3 * static_cast<size_t>(size));
  group.allgather(mine, all.data(), sizeof mine);
  int64_t origin = std::numeric_limits<int64_t>::max(), dropped = 0;  // on rank 0's clock
  for (int r = 0; r < size; ++r) {
    origin = std::min(origin, all[3 * r + 1] - (all[3 * r] - all[0]));
    dropped += all[3 * r + 2];
  }
  const int64_t shift = (mine[0] - all[0]) + origin;  // this clock -> the file's axis

  std::string text;
  {
    std::lock_guard lock(s.mutex);
    text = serialize(s, rank, shift);
  }
  std::string error;
  if (rank != 0) {
    uint64_t n = text.size();
    group.send(&n, sizeof n, 0, kTag);
    group.send(text.data(), n, 0, kTag);
  } else {
    for (int r = 1; r < size; ++r) {
      uint64_t n = 0;
      group.recv(&n, sizeof n, r, kTag);
      std::string part(n, '\0');
      group.recv(part.data(), n, r, kTag);
      text += ",\n" + part;
    }
    const std::string tmp = path + ".tmp";
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f << "{\"traceEvents\":[\n"
        << text << "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"producer\":\"minidl\","
        << "\"ranks\":" << size << ",\"dropped_events\":" << dropped << "}}\n";
      f.close();
      if (!f) error = "cannot write " + tmp;
    }
    if (error.empty() && std::rename(tmp.c_str(), path.c_str()) != 0)
      error = "cannot rename " + tmp + " to " + path;
  }
  error = group.broadcast(error, 0);
  MINIDL_CHECK(error.empty(), "Timeline::write: rank 0 ", error,
               " (does the directory exist and is it writable?)");
}

void Timeline::write(const std::string& path) {
  if (is_initialized()) return write(path, world());
  backend::LocalCommunicator alone;
  write(path, alone);
}

}  // namespace minidl::parallel
