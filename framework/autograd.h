// Define-by-run autograd.
//
// Every op whose inputs require grad (while grad mode is on) gives its output
// a Node: the inputs and a closure mapping the output's gradient to the
// inputs' gradients. Tensor::backward() sorts the graph topologically, walks
// it once in reverse, accumulates leaf gradients into .grad(), fires each
// leaf's grad-ready hooks as soon as its gradient is final, and frees the
// graph.
#pragma once
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "framework/tensor.h"

namespace minidl {

struct Node {
  // Returns one gradient per input (undefined where an input needs none).
  using Backward = std::function<std::vector<Tensor>(const Tensor& grad)>;
  const char* name = "";
  std::vector<Tensor> inputs;
  Backward backward;
  const char* scope = nullptr;  // the layer that recorded it (see "scopes" below), or null
};

bool grad_enabled();

// Disables graph recording in its scope (inference, optimizer updates).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// Anomaly detection (PyTorch's detect_anomaly), off by default: while on,
// every recorded op's output and every gradient backward computes are read on
// the host, and the first holding NaN or inf throws minidl::Error naming the
// op, its layer (with scope tracking on), the tensor, and whether the op's
// inputs already held NaN or inf (then the culprit is a leaf: data or a
// parameter). Slow: for finding where a NaN comes from, not for training.
void set_detect_anomaly(bool on);
bool detect_anomaly();

// True when any input requires grad and grad mode is on.
bool needs_grad(std::initializer_list<const Tensor*> inputs);

// Attaches a node to `out` if any input requires grad; returns out.
Tensor record(Tensor out, const char* name, std::vector<Tensor> inputs, Node::Backward backward);

// Runs backward from `root` (see Tensor::backward).
void run_backward(const Tensor& root, const Tensor& grad_output);

// Called at the end of every backward(), after the last node and hook: the
// data-parallel wrapper waits for its in-flight allreduces here. Returns an id
// for remove_backward_end_callback.
int add_backward_end_callback(std::function<void()> callback);
void remove_backward_end_callback(int id);

// Observers of backward progress, for timelines: called before and after each
// node's closure with the node's name; current_scope() is the node's scope
// meanwhile. One observer at a time (parallel::Timeline::enable() takes it).
using NodeObserver = std::function<void(const char* name, bool begin)>;
void set_node_observer(NodeObserver observer);

// ---- scopes: which layer recorded a node, for timelines ----
// A per-thread name that record() stores in each new Node::scope. While scope
// tracking is on, nn::Cell::operator() sets it to the cell's registration path
// ("conv1", "module.fc2") for the duration of its forward; run_backward sets
// it to each node's scope while that node runs. Off (the default) nothing sets
// it and Node::scope stays null. Scope names must live for the whole program:
// pass them through intern_scope().
namespace detail {
inline std::atomic<bool> scope_tracking_on{false};
}
inline bool scope_tracking() { return detail::scope_tracking_on.load(std::memory_order_relaxed); }
void set_scope_tracking(bool on);
const char* current_scope();
// Returns a pointer to a program-lifetime copy of `name`; equal names give equal pointers.
const char* intern_scope(const std::string& name);
// Makes `scope` (interned, or null) the current scope for its lifetime.
class ScopeGuard {
 public:
  explicit ScopeGuard(const char* scope);
  ~ScopeGuard();
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  const char* prev_;
};

}  // namespace minidl
