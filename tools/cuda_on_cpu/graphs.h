// CUDA graphs emulated on the CPU, for the CUDA-on-CPU device (runtime.cpp)
// and the tests' emulated device (tests/emulated_device.h), with CUDA's
// semantics as backend/graphs.h states them, so the host logic above them
// (framework/cuda_graph.h, GraphedStep, Model's captured steps) runs here:
// - while capturing, an entry called by the capturing thread is recorded as a
//   closure (its arguments copied, host arrays included), not run;
//   synchronize, and copies between host and device, throw;
// - memory freed inside a capture is kept until the graph dies (the tape
//   still writes it at each replay), as a CUDA graph owns its allocations;
//   blocks made inside and live at its end, and blocks from before freed
//   inside, are counted for capture_end (CaptureCounts);
// - an update is recorded reading its arguments from the graph's feed, which
//   feed_begin/feed_end refresh; while feeding, any other entry throws.
#pragma once
#include <functional>
#include <memory>
#include <set>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "framework/backend/backend.h"
#include "framework/error.h"

namespace minidl::testing {

struct Tape {
  struct Feed {
    UpdateRule rule;
    UpdateArgs args;
    std::vector<UpdateSlice> slices;
  };
  std::vector<std::function<void()>> ops;
  std::vector<std::unique_ptr<Feed>> feeds;  // in capture order
  std::vector<std::pair<void*, size_t>> freed;  // blocks freed inside the capture
  std::set<void*> made;                          // blocks made inside, still live
  int64_t freed_older = 0;                       // blocks from before, freed inside
  size_t next_feed = 0;
};

struct Graphs {
  static inline Tape* recording = nullptr;
  static inline std::thread::id recorder;
  static inline Tape* feeding = nullptr;
  static inline int64_t replays = 0;
  static bool recording_here() { return recording && std::this_thread::get_id() == recorder; }
  static void refuse(const char* what) {
    if (feeding) throw Error(cat("emulated graph: ", what, " while feeding (only update may run)"));
  }
};

// An entry of signature void(A...) under the name M: run, or recorded.
template <auto M, class F>
struct Recorded;
template <auto M, class... A>
struct Recorded<M, void (*)(A...)> {
  static inline void (*run)(A...) = nullptr;
  static void call(A... a) {
    Graphs::refuse("a kernel");
    if (!Graphs::recording_here()) return run(a...);
    Graphs::recording->ops.push_back([=] { run(a...); });
  }
};
template <auto M>
void record(Kernels& t) {
  using F = std::remove_reference_t<decltype(t.*M)>;
  Recorded<M, F>::run = t.*M;
  t.*M = &Recorded<M, F>::call;
}

// Wraps the entries of `t` and `a` so that they record while capturing, and
// returns the graph entries that drive them.
inline GraphOps emulate_graphs(Allocator& a, Kernels& t) {
  record<&Kernels::fill>(t), record<&Kernels::cast>(t), record<&Kernels::increment>(t);
  record<&Kernels::unary>(t), record<&Kernels::unary_grad>(t);
  record<&Kernels::binary>(t), record<&Kernels::dropout>(t), record<&Kernels::reduce>(t);
  record<&Kernels::argmax>(t), record<&Kernels::softmax>(t), record<&Kernels::max_backward>(t);
  record<&Kernels::softmax_backward>(t), record<&Kernels::gemm>(t), record<&Kernels::linear>(t);
  record<&Kernels::scaled_softmax>(t), record<&Kernels::scaled_softmax_backward>(t);
  record<&Kernels::transpose>(t), record<&Kernels::conv2d_forward>(t);
  record<&Kernels::conv2d_backward>(t), record<&Kernels::max_pool_forward>(t);
  record<&Kernels::max_pool_backward>(t), record<&Kernels::avg_pool_forward>(t);
  record<&Kernels::avg_pool_backward>(t), record<&Kernels::conv2d_relu_pool_forward>(t);
  record<&Kernels::conv2d_relu_pool_backward>(t), record<&Kernels::gather>(t);
  record<&Kernels::gather_backward>(t), record<&Kernels::cross_entropy_forward>(t);
  record<&Kernels::cross_entropy_backward>(t), record<&Kernels::binary_cross_entropy_forward>(t);
  record<&Kernels::binary_cross_entropy_backward>(t);
  record<&Kernels::diff_loss_forward>(t), record<&Kernels::diff_loss_backward>(t);
  // ---- shape ops (issue 22): their structs are copied into the closure ----
  record<&Kernels::strided_copy>(t), record<&Kernels::index_select>(t);
  record<&Kernels::index_add>(t), record<&Kernels::gather_dim>(t);
  record<&Kernels::scatter_add_dim>(t), record<&Kernels::where>(t);
  // ---- math (issue 22) ----
  record<&Kernels::compare>(t);
  // ---- convolution family and resizing (issue 22) ----
  record<&Kernels::upsample_nearest_forward>(t), record<&Kernels::upsample_nearest_backward>(t);
  record<&Kernels::upsample_bilinear_forward>(t), record<&Kernels::upsample_bilinear_backward>(t);
  // ---- batch norm (issue 23) ----
  record<&Kernels::batch_norm_forward>(t), record<&Kernels::batch_norm_backward>(t);
  record<&Kernels::layer_norm_forward>(t), record<&Kernels::layer_norm_backward>(t);
  record<&Kernels::group_norm_forward>(t), record<&Kernels::group_norm_backward>(t);
  // ---- the LSTM and GRU cells (issue 23) ----
  record<&Kernels::lstm_cell_forward>(t), record<&Kernels::lstm_cell_backward>(t);
  record<&Kernels::lstm_step_forward>(t), record<&Kernels::lstm_step_backward>(t);
  record<&Kernels::gru_cell_forward>(t), record<&Kernels::gru_cell_backward>(t);
  record<&Kernels::gru_step_forward>(t), record<&Kernels::gru_step_backward>(t);

  static void (*copy)(void*, const void*, size_t, CopyKind) = a.copy;
  a.copy = [](void* dst, const void* src, size_t n, CopyKind kind) {
    Graphs::refuse("copy");
    if (!Graphs::recording_here()) return copy(dst, src, n, kind);
    if (kind != CopyKind::DeviceToDevice) throw Error("emulated graph: a host copy while capturing");
    Graphs::recording->ops.push_back([=] { copy(dst, src, n, kind); });
  };
  static void (*synchronize)() = a.synchronize;
  a.synchronize = [] {
    if (Graphs::recording_here()) throw Error("emulated graph: synchronize while capturing");
    synchronize();
  };
  static void* (*allocate)(size_t) = a.allocate;
  a.allocate = [](size_t n) {
    void* p = allocate(n);
    if (Graphs::recording_here()) Graphs::recording->made.insert(p);
    return p;
  };
  static void (*deallocate)(void*, size_t) = a.deallocate;
  a.deallocate = [](void* p, size_t n) {
    if (!Graphs::recording_here()) return deallocate(p, n);
    Tape& tape = *Graphs::recording;
    if (tape.made.erase(p) == 0) ++tape.freed_older;
    tape.freed.emplace_back(p, n);  // freed when the graph dies
  };
  static void (*update)(UpdateRule, const UpdateArgs&, const UpdateSlice*, int) = t.update;
  t.update = [](UpdateRule rule, const UpdateArgs& args, const UpdateSlice* slices, int count) {
    if (Tape* tape = Graphs::feeding) {
      if (tape->next_feed == tape->feeds.size()) throw Error("emulated graph: more updates fed than captured");
      Tape::Feed& f = *tape->feeds[tape->next_feed++];
      bool same = f.rule == rule && static_cast<int>(f.slices.size()) == count;
      for (int i = 0; same && i < count; ++i)
        same = f.slices[i].p == slices[i].p && f.slices[i].n == slices[i].n;
      if (!same) throw Error("emulated graph: the update fed is not the one captured");
      f.args = args;
      f.slices.assign(slices, slices + count);
      return;
    }
    if (!Graphs::recording_here()) return update(rule, args, slices, count);
    Tape* tape = Graphs::recording;
    tape->feeds.push_back(std::make_unique<Tape::Feed>(
        Tape::Feed{rule, args, std::vector<UpdateSlice>(slices, slices + count)}));
    tape->ops.push_back([f = tape->feeds.back().get()] {
      update(f->rule, f->args, f->slices.data(), static_cast<int>(f->slices.size()));
    });
  };

  GraphOps g{};
  g.capture_begin = [] {
    if (Graphs::recording) throw Error("emulated graph: a capture is already in progress");
    Graphs::recording = new Tape;
    Graphs::recorder = std::this_thread::get_id();
  };
  g.capture_end = [](CaptureCounts* counts) -> void* {
    Tape* tape = std::exchange(Graphs::recording, nullptr);
    *counts = {static_cast<int64_t>(tape->made.size()), tape->freed_older};
    return tape;
  };
  g.capturing = [] { return Graphs::recording != nullptr; };
  g.replay = [](void* graph) {
    ++Graphs::replays;
    for (auto& op : static_cast<Tape*>(graph)->ops) op();
  };
  g.feed_begin = [](void* graph) {
    Graphs::feeding = static_cast<Tape*>(graph);
    Graphs::feeding->next_feed = 0;
  };
  g.feed_end = [](void*) { Graphs::feeding = nullptr; };
  g.destroy = [](void* graph) {
    std::unique_ptr<Tape> tape(static_cast<Tape*>(graph));
    for (auto [p, n] : tape->freed) deallocate(p, n);
  };
  g.kernel_launches = [](void* graph) -> int64_t {  // every entry recorded counts as one
    return static_cast<int64_t>(static_cast<Tape*>(graph)->ops.size());
  };
  return g;
}

}  // namespace minidl::testing
