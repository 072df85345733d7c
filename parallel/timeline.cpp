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
std::string serialize(const State& s, const std::vector<TimelineEvent>& events, int rank,
                      int64_t shift_ns) {
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
  for (const TimelineEvent& e : events) {
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

// ---- write(): clocks, and waiting apart from transfer in each collective ----

// Per rank: its clock minus rank 0's (collective). Rank 0 sends each rank a
// few pings; the rank answers with its clock, taken as read at the middle of
// the round trip; the round with the shortest trip wins (a rank descheduled in
// a round only lengthens that round), so the error is half the shortest trip:
// microseconds on one machine, even when it is busy.
std::vector<int64_t> clock_offsets(Communicator& group) {
  constexpr int kRounds = 8;
  std::vector<int64_t> offset(static_cast<size_t>(group.size()), 0);
  if (group.rank() == 0) {
    for (int r = 1; r < group.size(); ++r) {
      int64_t best_trip = std::numeric_limits<int64_t>::max();
      for (int k = 0; k < kRounds; ++k) {
        const int64_t sent = Timeline::now_ns();
        int64_t theirs = 0;
        group.send(&sent, sizeof sent, r, kTag + 1);
        group.recv(&theirs, sizeof theirs, r, kTag + 1);
        const int64_t back = Timeline::now_ns();
        if (back - sent < best_trip) {
          best_trip = back - sent;
          offset[r] = theirs - (sent + (back - sent) / 2);
        }
      }
    }
  } else {
    for (int k = 0; k < kRounds; ++k) {
      int64_t ping = 0;
      group.recv(&ping, sizeof ping, 0, kTag + 1);
      const int64_t now = Timeline::now_ns();
      group.send(&now, sizeof now, 0, kTag + 1);
    }
  }
  group.broadcast(offset.data(), offset.size() * sizeof(int64_t), 0);
  return offset;
}

// ---- write(): waiting apart from transfer in each collective ----

// The name that matches one collective across ranks: its name, step,
// occurrence (the n-th of that name in that step on this rank) and group, per
// closed collective event of `events` (empty for other events).
std::vector<std::string> collective_keys(const std::vector<TimelineEvent>& events) {
  std::map<std::pair<std::string, int64_t>, int> seen;
  std::vector<std::string> keys(events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    const TimelineEvent& e = events[i];
    if (e.collective_ranks == 0 || e.end_ns < 0) continue;
    const int n = seen[{e.name, e.step}]++;
    keys[i] = cat(e.name, "\n", e.step, "\n", n, "\n", e.collective_group);
  }
  return keys;
}

// Rank 0 gets every rank's `text`, by rank; the other ranks get an empty list.
std::vector<std::string> gather_text(Communicator& group, std::string text) {
  if (group.rank() != 0) {
    uint64_t n = text.size();
    group.send(&n, sizeof n, 0, kTag);
    group.send(text.data(), n, 0, kTag);
    return {};
  }
  std::vector<std::string> all{std::move(text)};
  for (int r = 1; r < group.size(); ++r) {
    uint64_t n = 0;
    group.recv(&n, sizeof n, r, kTag);
    std::string part(n, '\0');
    group.recv(part.data(), n, r, kTag);
    all.push_back(std::move(part));
  }
  return all;
}

// Collective over `group`: `events` (this rank's, closed or not) with a "wait"
// and a "transfer" event added inside every collective that exactly its
// `collective_ranks` ranks recorded. `shift_ns` turns this rank's clock into
// the file's axis (rank 0's clock, aligned by write()).
std::vector<TimelineEvent> split_collectives(Communicator& group, std::vector<TimelineEvent> events,
                                             int64_t shift_ns) {
  using nlohmann::json;
  const std::vector<std::string> keys = collective_keys(events);
  json starts = json::array();  // [key, start on the file's axis]
  for (size_t i = 0; i < events.size(); ++i)
    if (!keys[i].empty()) starts.push_back({keys[i], events[i].begin_ns - shift_ns});

  // Rank 0: per key, how many ranks started it, the last start and its rank.
  json last = json::object();
  std::vector<std::string> all = gather_text(group, starts.dump());
  for (size_t r = 0; r < all.size(); ++r)
    for (const json& start : json::parse(all[r])) {
      json& l = last[start[0].get<std::string>()];
      const int64_t t = start[1];
      if (l.is_null()) l = {0, t, r};
      l[0] = l[0].get<int>() + 1;
      if (t > l[1].get<int64_t>()) {
        l[1] = t;
        l[2] = r;
      }
    }
  last = json::parse(group.broadcast(last.dump(), 0));

  const size_t n = events.size();
  for (size_t i = 0; i < n; ++i) {
    if (keys[i].empty() || !last.contains(keys[i])) continue;
    const json& l = last[keys[i]];
    if (l[0].get<int>() != events[i].collective_ranks) continue;  // not one collective: no split
    TimelineEvent wait = events[i];  // the same row, step and args, nested in it
    wait.collective_ranks = 0;
    wait.collective_group = 0;
    wait.args.emplace_back("last_rank", l[2].get<int64_t>());
    TimelineEvent transfer = wait;
    const int64_t arrived = std::clamp(l[1].get<int64_t>() + shift_ns, wait.begin_ns, wait.end_ns);
    wait.name = "wait " + events[i].name;
    wait.category = "wait";
    wait.end_ns = arrived;
    transfer.name = "transfer " + events[i].name;
    transfer.category = "transfer";
    transfer.begin_ns = arrived;
    events.push_back(std::move(wait));
    events.push_back(std::move(transfer));
  }
  return events;
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
  return begin_collective(std::move(name), category, /*ranks=*/0, args, track);
}

int64_t Timeline::begin_collective(std::string name, const char* category, int ranks,
                                   std::initializer_list<TimelineArg> args, const char* track,
                                   int64_t group) {
  if (!enabled()) return -1;
  State& s = state();
  const int64_t t = now_ns();
  std::lock_guard lock(s.mutex);
  int64_t index = push(s, std::move(name), category, t, -1, args, track);
  if (index < 0) return -1;
  s.events[static_cast<size_t>(index)].collective_ranks = ranks;
  s.events[static_cast<size_t>(index)].collective_group = group;
  return make_id(s.generation, static_cast<size_t>(index));
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

  const std::vector<int64_t> offset = clock_offsets(group);
  int64_t mine[2] = {0, 0};
  {
    std::lock_guard lock(s.mutex);
    mine[0] = s.origin_ns;
    mine[1] = s.dropped;
  }
  std::vector<int64_t> all(2 * static_cast<size_t>(size));
  group.allgather(mine, all.data(), sizeof mine);
  int64_t origin = std::numeric_limits<int64_t>::max(), dropped = 0;  // on rank 0's clock
  for (int r = 0; r < size; ++r) {
    origin = std::min(origin, all[2 * r] - offset[r]);
    dropped += all[2 * r + 1];
  }
  const int64_t shift = offset[rank] + origin;  // this clock -> the file's axis

  std::vector<TimelineEvent> events;
  {
    std::lock_guard lock(s.mutex);
    events = s.events;
  }
  events = split_collectives(group, std::move(events), shift);
  std::string text;
  {
    std::lock_guard lock(s.mutex);  // the thread table
    text = serialize(s, events, rank, shift);
  }
  std::string error;
  std::vector<std::string> parts = gather_text(group, std::move(text));
  if (rank == 0) {
    text = parts[0];
    for (int r = 1; r < size; ++r) text += ",\n" + parts[r];
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
