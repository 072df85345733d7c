// Timeline (parallel/timeline.h) under mpirun -np 2, and alone.
//
// The central property: a few steps of DataParallel training in the automatic
// style, written as a Chrome trace, show every rank's forward, per-layer
// backward, per-bucket allreduces and optimizer steps, and on more than one
// rank at least one allreduce that starts before that step's backward ends.
// Every bucket's allreduce is split into waiting for the last rank to start it
// and the transfer after, at the same moment on every rank.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "nets.h"
#include "data/dataset.h"
#include "framework/autograd.h"
#include "framework/ops.h"
#include "framework/random.h"
#include "nn/dense.h"
#include "nn/loss.h"
#include "parallel/adasum.h"
#include "optim/sgd.h"
#include "parallel/data_parallel.h"
#include "parallel/init.h"
#include "parallel/train/model.h"
#include "parallel/timeline.h"

using namespace minidl;
using namespace minidl::testing;
using nlohmann::json;
using parallel::Timeline;
using parallel::TimelineScope;

namespace {


// A file name of this job's own (ctest may run the np2 and local jobs at once).
std::string trace_path(const std::string& stem) {
  return stem + "_np" + std::to_string(N()) + ".json";
}

json read_json(const std::string& path) {
  std::ifstream f(path);
  REQUIRE(f);
  return json::parse(f);  // throws (fails the test) on invalid JSON
}

double end_of(const json& e) { return e["ts"].get<double>() + e["dur"].get<double>(); }

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}
}  // namespace

TEST_CASE("a DataParallel run's timeline: every rank, every kind of event, and overlap") {
  constexpr int kDepth = 4, kSteps = 3;
  constexpr int64_t kPerRank = 8;
  manual_seed(1);
  Tensor x = Tensor::randn({kPerRank * N() * kSteps, 6});
  Tensor y = Tensor::randint(0, 4, {kPerRank * N() * kSteps});
  auto train = data::Dataset(x, y).shard(R(), N()).batch(kPerRank);
  manual_seed(2);
  Deep net(kDepth, /*width=*/32, /*out=*/4);
  parallel::DataParallel dp(net, {.bucket_bytes = 0});  // one bucket per parameter
  const int64_t buckets = static_cast<int64_t>(dp.buckets().size());
  nn::CrossEntropyLoss loss;
  optim::SGD opt(dp.trainable_params(), /*lr=*/0.1);
  Model model(dp, loss, opt);

  Timeline::enable();
  model.train(/*epochs=*/1, train, {}, {.max_steps = kSteps});
  Timeline::disable();
  for (const auto& e : Timeline::events()) CHECK(e.end_ns >= e.begin_ns);  // all closed

  const std::string path = trace_path("timeline_test");
  Timeline::write(path);
  json trace = read_json(path);  // every rank reads rank 0's file
  REQUIRE(trace.contains("traceEvents"));
  const json& events = trace["traceEvents"];
  REQUIRE(events.is_array());

  // One process per rank, named "rank R"; rows named by track.
  std::map<int, std::string> process_names;
  std::map<std::pair<int, int>, std::string> row_names;
  for (const auto& e : events)
    if (e["ph"] == "M" && e["name"] == "process_name")
      process_names[e["pid"].get<int>()] = e["args"]["name"];
    else if (e["ph"] == "M" && e["name"] == "thread_name")
      row_names[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
  REQUIRE(static_cast<int>(process_names.size()) == N());
  for (int r = 0; r < N(); ++r) CHECK(process_names[r] == "rank " + std::to_string(r));

  // Per rank: the events of each kind, the backward layers, and overlap.
  std::map<std::string, std::set<std::string>> categories;
  int overlapping_steps = 0;
  for (int r = 0; r < N(); ++r) {
    CAPTURE(r);
    std::map<std::string, int> count;
    std::set<std::string> layers;
    std::map<int64_t, double> backward_end;     // step -> when its last backward span ends
    std::map<int64_t, double> first_allreduce;  // step -> when its first allreduce starts
    for (const auto& e : events) {
      if (e["ph"] != "X" || e["pid"] != r) continue;
      const std::string name = e["name"], cat = e["cat"];
      CHECK(e["ts"].get<double>() >= 0);
      CHECK(e["dur"].get<double>() >= 0);
      REQUIRE(e["args"].contains("step"));
      const int64_t step = e["args"]["step"];
      CHECK((step >= 1 && step <= kSteps));
      categories[cat].insert(name);
      const std::string row = row_names[{r, e["tid"].get<int>()}];
      if (starts_with(name, "backward ")) {
        CHECK(cat == "backward");
        CHECK(row == "main");
        CHECK(e["args"]["nodes"].get<int>() >= 1);
        layers.insert(name.substr(9));
        backward_end[step] = std::max(backward_end[step], end_of(e));
        ++count["backward layer"];
      } else if (starts_with(name, "wait allreduce bucket ") ||
                 starts_with(name, "transfer allreduce bucket ")) {
        CHECK(cat == name.substr(0, name.find(' ')));  // "wait" or "transfer"
        CHECK(starts_with(row, "communication"));
        ++count[cat];
      } else if (starts_with(name, "allreduce bucket ")) {
        CHECK(cat == "communication");
        CHECK(starts_with(row, "communication"));
        CHECK(e["args"]["bytes"].get<int64_t>() > 0);
        double ts = e["ts"];
        first_allreduce[step] =
            first_allreduce.count(step) ? std::min(first_allreduce[step], ts) : ts;
        ++count["allreduce"];
      } else {
        ++count[name];
      }
    }
    CHECK(count["step"] == kSteps);
    CHECK(count["forward"] == kSteps);
    CHECK(count["backward"] == kSteps);
    CHECK(count["optimizer step"] == kSteps);
    CHECK(count["backward layer"] >= kSteps * (kDepth + 1));
    // Layers by registration path inside the wrapper, the loss by its type.
    for (int i = 0; i < kDepth; ++i) CHECK(layers.count("module.fc" + std::to_string(i)) == 1);
    CHECK(layers.count("CrossEntropyLoss") == 1);
    if (N() > 1) {
      CHECK(count["allreduce"] == kSteps * buckets);
      CHECK(count["wait"] == kSteps * buckets);
      CHECK(count["transfer"] == kSteps * buckets);
      CHECK(count["finish allreduce"] == kSteps);
      for (auto& [step, start] : first_allreduce)
        if (start < backward_end[step]) ++overlapping_steps;
    } else {
      CHECK(count["allreduce"] == 0);
      CHECK(count["wait"] == 0);
    }
  }
  MESSAGE(N(), " ranks: ", events.size(),
          " trace events; steps whose first allreduce started "
          "before their backward ended, over all ranks: ",
          overlapping_steps);
  if (N() > 1) CHECK(overlapping_steps >= 1);
  CHECK(categories.count("compute") == 1);

  // Wait and transfer: per (step, bucket) and rank, the allreduce, its wait and
  // its transfer. The wait runs from the rank's start to the last rank's start
  // (the latest of the ranks' starts), the transfer from there to the end.
  using Key = std::pair<int64_t, int64_t>;  // step, bucket
  std::map<Key, std::map<int, std::map<std::string, const json*>>> parts;
  for (const auto& e : events)
    if (e["ph"] == "X" && e["args"].contains("bucket")) {
      const std::string name = e["name"];
      parts[{e["args"]["step"], e["args"]["bucket"]}][e["pid"]]
           [starts_with(name, "allreduce") ? "allreduce" : name.substr(0, name.find(' '))] = &e;
    }
  if (N() > 1) CHECK(static_cast<int64_t>(parts.size()) == kSteps * buckets);
  constexpr double kRound = 0.002;  // us: the file's times are ns / 1e3 as doubles
  double waited = 0, moved = 0;
  for (const auto& part : parts) {
    const auto& key = part.first;  // (not structured bindings: clang 14 cannot capture them)
    const auto& by_rank = part.second;
    CAPTURE(key.first);
    CAPTURE(key.second);
    REQUIRE(static_cast<int>(by_rank.size()) == N());
    double last_start = 0;
    for (const auto& [r, p] : by_rank)
      last_start = std::max(last_start, (*p.at("allreduce"))["ts"].get<double>());
    std::set<int> last_ranks;
    for (const auto& rank_parts : by_rank) {
      const int r = rank_parts.first;
      const auto& p = rank_parts.second;
      CAPTURE(r);
      REQUIRE(p.size() == 3);
      const json &all = *p.at("allreduce"), &wait = *p.at("wait"), &transfer = *p.at("transfer");
      CHECK(std::abs(wait["ts"].get<double>() - all["ts"].get<double>()) <= kRound);
      CHECK(std::abs(end_of(wait) - transfer["ts"].get<double>()) <= kRound);
      CHECK(std::abs(end_of(transfer) - end_of(all)) <= kRound);
      CHECK(wait["dur"].get<double>() + transfer["dur"].get<double>() <=
            all["dur"].get<double>() + kRound);
      // The transfer starts when the last rank started (unless this rank's
      // allreduce ended first on the aligned clocks: then it is empty at the end).
      const double expected = std::min(std::max(last_start, all["ts"].get<double>()), end_of(all));
      CHECK(std::abs(transfer["ts"].get<double>() - expected) <= kRound);
      const int last = wait["args"]["last_rank"];
      CHECK((last >= 0 && last < N()));
      last_ranks.insert(last);
      CHECK(wait["args"]["bytes"] == all["args"]["bytes"]);
      waited += wait["dur"].get<double>();
      moved += transfer["dur"].get<double>();
    }
    CHECK(last_ranks.size() == 1);  // every rank names the same one
    const int last = *last_ranks.begin();
    CHECK((*by_rank.at(last).at("wait"))["dur"].get<double>() <= kRound);  // it waited for no one
  }
  MESSAGE("allreduce time over all ranks and buckets: ", waited, " us waiting for the last rank, ",
          moved, " us after it started");

  // On every row the events nest or are disjoint, as trace viewers need.
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> rows;
  for (const auto& e : events)
    if (e["ph"] == "X")
      rows[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back({e["ts"], end_of(e)});
  for (auto& [key, spans] : rows) {
    std::sort(spans.begin(), spans.end(), [](auto a, auto b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<double> open;
    constexpr double kUlp = 1e-6;  // us: a wait's ts + dur against its transfer's ts, in doubles
    for (auto [b, e] : spans) {
      while (!open.empty() && open.back() <= b + kUlp) open.pop_back();
      CHECK((open.empty() || e <= open.back() + kUlp));
      open.push_back(e);
    }
  }
  parallel::barrier();  // everyone has read it
  if (R() == 0) std::remove(path.c_str());
}

TEST_CASE("autograd nodes carry the registration path of the layer that recorded them") {
  struct Block : nn::Cell {
    nn::Dense fc{3, 3};
    Block() { register_cells({{"fc", fc}}); }
    Tensor forward(const Tensor& x) override { return relu(fc(x)); }
  };
  struct Net : nn::Cell {
    Block block;
    nn::Dense head{3, 2};
    Net() { register_cells({{"block", block}, {"head", head}}); }
    Tensor forward(const Tensor& x) override { return head(block(x)) * 2.0; }
  };
  Net net;
  Tensor x = Tensor::randn({2, 3});
  CHECK(net.block(x).impl().grad_fn->scope == nullptr);  // tracking off: no scope

  set_scope_tracking(true);
  Tensor out = net(x);
  std::vector<std::string> seen;
  set_node_observer([&](const char* name, bool begin) {
    if (begin) seen.push_back(std::string(name) + "@" + (current_scope() ? current_scope() : "-"));
  });
  out.sum().backward();
  set_node_observer(nullptr);
  set_scope_tracking(false);
  CHECK(current_scope() == nullptr);
  // sum (no layer), then the root's own "* 2", head, block's relu, block.fc
  REQUIRE(seen.size() >= 4);
  CHECK(seen.front() == "sum@-");
  CHECK(seen[1] == "mul@Net");
  auto has = [&](const std::string& scope) {
    return std::any_of(seen.begin(), seen.end(),
                       [&](const std::string& s) { return s.substr(s.find('@') + 1) == scope; });
  };
  CHECK(has("head"));
  CHECK(has("block"));     // relu, recorded in Block::forward
  CHECK(has("block.fc"));  // the Dense inside it
  // Equal names share one interned string.
  CHECK(intern_scope("block.fc") == intern_scope(std::string("block.") + "fc"));
}

TEST_CASE("begin/end across threads, explicit tracks, and rows for overlapping events") {
  Timeline::enable();
  Timeline::set_step(7);
  int64_t a = Timeline::begin("first", "test", {{"n", 1}}, Timeline::kCommunication);
  int64_t b = Timeline::begin("second", "test", {}, Timeline::kCommunication);
  REQUIRE(a >= 0);
  REQUIRE(b >= 0);
  Timeline::end(a);  // a ends before b: overlapping, not nested
  std::thread other([b] {
    TimelineScope scope("on a thread", "test");
    Timeline::end(b);  // ended by another thread than began it
  });
  other.join();
  int built = 0;
  {
    TimelineScope scope([&] { return "on main " + std::to_string(++built); }, "test");
  }
  Timeline::end(a);   // a second end changes nothing
  Timeline::end(-1);  // the id of a disabled begin
  Timeline::set_step(0);
  Timeline::disable();
  { TimelineScope scope("disabled", "test"); }
  {
    TimelineScope scope([&] { return "disabled " + std::to_string(++built); }, "test");
  }
  CHECK(built == 1);  // the name is built only while enabled
  CHECK(Timeline::begin("disabled", "test") == -1);

  auto events = Timeline::events();
  REQUIRE(events.size() == 4);
  CHECK(events[0].name == "first");
  CHECK(events[0].step == 7);
  CHECK(events[0].args.size() == 1);
  CHECK(events[1].end_ns >= events[0].end_ns);
  CHECK(events[2].thread != events[3].thread);
  CHECK(events[3].name == "on main 1");

  const std::string path = trace_path("timeline_rows");
  Timeline::write(path);
  json trace = read_json(path);
  std::set<std::string> rank0_rows;
  std::map<std::string, int> tid_of;
  for (const auto& e : trace["traceEvents"])
    if (e["pid"] == 0 && e["name"] == "thread_name") {
      rank0_rows.insert(e["args"]["name"].get<std::string>());
      tid_of[e["args"]["name"]] = e["tid"];
    }
  CHECK(rank0_rows ==
        std::set<std::string>{"main", "thread 1", "communication", "communication (2)"});
  for (const auto& e : trace["traceEvents"])
    if (e["pid"] == 0 && e["name"] == "second") CHECK(e["tid"] == tid_of["communication (2)"]);
  CHECK(trace["otherData"]["ranks"] == N());
  parallel::barrier();
  if (R() == 0) std::remove(path.c_str());
}

TEST_CASE("write to a directory that does not exist: the same error on every rank") {
  Timeline::enable();
  { TimelineScope scope("something", "test"); }
  Timeline::disable();
  CHECK_THROWS_WITH_AS(Timeline::write("/nonexistent-minidl-dir/t.json"),
                       doctest::Contains("Timeline::write: rank 0 cannot write "
                                         "/nonexistent-minidl-dir/t.json.tmp"),
                       Error);
}

TEST_CASE("disabled, the timeline records nothing and costs one branch") {
  Timeline::enable();
  Timeline::disable();
  REQUIRE_FALSE(Timeline::enabled());
  CHECK_FALSE(scope_tracking());
  Deep net(2, /*width=*/32, /*out=*/4);
  nn::MSELoss mse;
  mse(net(Tensor::randn({4, 6})), Tensor::randn({4, 4})).backward();
  { TimelineScope scope("nothing", "test"); }
  CHECK(Timeline::events().empty());
  CHECK(net.layers[0]->weight.grad().defined());
}

TEST_CASE("past max_events, events are dropped and the file says how many") {
  Timeline::enable(/*max_events=*/3);
  for (int i = 0; i < 5; ++i) TimelineScope scope("tick", "test");
  Timeline::disable();
  CHECK(Timeline::events().size() == 3);
  CHECK(Timeline::dropped() == 2);
  const std::string path = trace_path("timeline_dropped");
  Timeline::write(path);
  json trace = read_json(path);
  CHECK(trace["otherData"]["dropped_events"] == 2 * N());
  parallel::barrier();
  if (R() == 0) std::remove(path.c_str());
}

TEST_CASE("a collective started late by one rank: the others wait for it, and it waits for none") {
  // Rank r starts it 30 ms after rank r - 1 did (a message says when): the
  // last rank is the one every rank names.
  parallel::barrier();
  Timeline::enable();
  Timeline::set_step(1);
  int token = 0;
  if (R() > 0) {
    parallel::world().recv(&token, sizeof token, R() - 1, /*tag=*/7);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  int64_t id = Timeline::begin_collective("probe", "communication", N(), {{"n", 1}});
  int64_t other = Timeline::begin_collective("probe of another group", "communication", N() + 1);
  if (R() + 1 < N()) parallel::world().send(&token, sizeof token, R() + 1, /*tag=*/7);
  parallel::barrier();  // the collective: it ends on every rank once the last has started
  Timeline::end(id);
  Timeline::end(other);
  Timeline::set_step(0);
  Timeline::disable();
  CHECK(Timeline::events().size() == 2);  // the split is made by write(), in the file only

  const std::string path = trace_path("timeline_wait");
  Timeline::write(path);
  json trace = read_json(path);
  std::map<std::string, std::map<int, json>> by_name;  // name -> rank -> event
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") by_name[e["name"]][e["pid"].get<int>()] = e;
  REQUIRE(by_name["wait probe"].size() == static_cast<size_t>(N()));
  REQUIRE(by_name["transfer probe"].size() == static_cast<size_t>(N()));
  for (int r = 0; r < N(); ++r) {
    CAPTURE(r);
    const json &wait = by_name["wait probe"][r], &transfer = by_name["transfer probe"][r];
    CHECK(wait["cat"] == "wait");
    CHECK(transfer["cat"] == "transfer");
    CHECK(wait["args"]["last_rank"] == N() - 1);
    CHECK(wait["args"]["n"] == 1);  // the collective's own arguments
    CHECK(wait["args"]["step"] == 1);
    // Waited 30 ms or more per later rank (up to the clocks' alignment at write()).
    if (r < N() - 1) CHECK(wait["dur"].get<double>() >= 30e3 * (N() - 1 - r) - 5e3);
    if (r == N() - 1) CHECK(wait["dur"].get<double>() <= 2e-3);
    CHECK(std::abs(end_of(wait) - transfer["ts"].get<double>()) <= 2e-3);
  }
  // Recorded by N ranks but said to span N + 1: not one collective, not split.
  CHECK(by_name["probe of another group"].size() == static_cast<size_t>(N()));
  CHECK(by_name.count("wait probe of another group") == 0);
  parallel::barrier();
  if (R() == 0) std::remove(path.c_str());
}

TEST_CASE("AdaSum's levels and gathers: each a wait for its block or pair, then the exchange") {
  if (N() < 2 || (N() & (N() - 1)) != 0) return;  // AdaSum needs 2, 4, 8, ... ranks
  parallel::AdaSum adasum;
  Timeline::enable();
  for (int step = 1; step <= 2; ++step) {
    Timeline::set_step(step);
    adasum.reduce({Tensor::randn({64}), Tensor::randn({3, 5})});
  }
  Timeline::set_step(0);
  Timeline::disable();
  const std::string path = trace_path("timeline_adasum");
  Timeline::write(path);
  json trace = read_json(path);
  std::map<std::string, int> count;  // over all ranks and steps
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const std::string name = e["name"];
    ++count[name];
    if (e["cat"] == "wait") {
      // The last rank of this rank's block (level l: 2^(l+1) ranks) or pair (gather l).
      const int r = e["pid"], l = e["args"]["level"], last = e["args"]["last_rank"];
      CAPTURE(name);
      if (starts_with(name, "wait adasum level"))
        CHECK(last / (2 << l) == r / (2 << l));
      else
        CHECK((last == r || last == (r ^ (1 << l))));
    }
  }
  for (int l = 0; (1 << l) < N(); ++l)
    for (const char* what : {"level", "gather"}) {
      const std::string name = cat("adasum ", what, " ", l);
      CAPTURE(name);
      CHECK(count[name] == 2 * N());
      CHECK(count["wait " + name] == 2 * N());
      CHECK(count["transfer " + name] == 2 * N());
    }
  parallel::barrier();
  if (R() == 0) std::remove(path.c_str());
}
