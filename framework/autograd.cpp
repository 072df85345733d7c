#include "framework/autograd.h"

#include <atomic>
#include <cassert>
#include <cmath>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "framework/backend/backend.h"
#include "framework/ops.h"
#include "framework/ops/util.h"
#include "framework/threads.h"

namespace minidl {

static thread_local bool grad_mode = true;
static std::atomic<bool> anomaly_mode{false};
static thread_local const char* scope_now = nullptr;
static NodeObserver node_observer;

bool grad_enabled() { return grad_mode; }
NoGradGuard::NoGradGuard() : prev_(grad_mode) { grad_mode = false; }
NoGradGuard::~NoGradGuard() { grad_mode = prev_; }
void set_node_observer(NodeObserver observer) { node_observer = std::move(observer); }

void set_scope_tracking(bool on) { detail::scope_tracking_on.store(on, std::memory_order_relaxed); }
const char* current_scope() { return scope_now; }
ScopeGuard::ScopeGuard(const char* scope) : prev_(scope_now) { scope_now = scope; }
ScopeGuard::~ScopeGuard() { scope_now = prev_; }

const char* intern_scope(const std::string& name) {
  static std::mutex mutex;
  static auto* names = new std::unordered_set<std::string>;  // never freed; nodes keep
  std::lock_guard lock(mutex);                                 // their elements' addresses
  return names->insert(name).first->c_str();
}

static std::vector<std::pair<int, std::function<void()>>>& end_callbacks() {
  static std::vector<std::pair<int, std::function<void()>>> list;
  return list;
}
int add_backward_end_callback(std::function<void()> callback) {
  static int next_id = 0;
  end_callbacks().emplace_back(++next_id, std::move(callback));
  return next_id;
}
void remove_backward_end_callback(int id) {
  auto& list = end_callbacks();
  std::erase_if(list, [id](const auto& entry) { return entry.first == id; });
}
static void run_end_callbacks() {
  for (auto& [id, callback] : end_callbacks()) callback();
}

void set_detect_anomaly(bool on) { anomaly_mode.store(on); }
bool detect_anomaly() { return anomaly_mode.load(); }

namespace {

// True when a float tensor holds a NaN or an infinity (read on the host).
bool non_finite(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype())) return false;
  for (float v : t.to_float_vector())
    if (!std::isfinite(v)) return true;
  return false;
}

// Throws naming the op (and its layer), which of its tensors went non-finite,
// and whether its inputs already were.
void check_anomaly(const char* pass, const Node& node, const char* what, size_t which,
                   const Tensor& t) {
  if (!non_finite(t)) return;
  std::string inputs;
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (non_finite(node.inputs[i]))
      inputs += cat(inputs.empty() ? "" : ", ", i, " ", node.inputs[i].shape());
  throw Error(cat("detect_anomaly: the ", pass, " of ", node.name,
                  node.scope ? cat(" (in ", node.scope, ")") : std::string(), " produced NaN or inf in ",
                  what, which == size_t(-1) ? std::string() : cat(" ", which), " ", t.shape(),
                  inputs.empty() ? std::string("; its inputs were finite")
                                 : cat("; its inputs ", inputs, " already held NaN or inf")));
}

}  // namespace

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!grad_mode) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

Tensor record(Tensor out, const char* name, std::vector<Tensor> inputs, Node::Backward backward) {
  if (!grad_mode) return out;
  bool any = false;
  for (const Tensor& t : inputs) any = any || (t.defined() && t.requires_grad());
  if (!any) return out;
  out.impl().requires_grad = true;
  out.impl().grad_fn =
      std::make_shared<Node>(Node{name, std::move(inputs), std::move(backward), scope_now});
  if (anomaly_mode.load(std::memory_order_relaxed))
    check_anomaly("forward", *out.impl().grad_fn, "its output", size_t(-1), out);
  return out;
}

// Post-order DFS over non-leaf tensors: inputs before the tensors made from them.
// Holds references, so tensors stay alive until their node has run.
static std::vector<std::shared_ptr<TensorImpl>> topo_order(const std::shared_ptr<TensorImpl>& root) {
  std::vector<std::shared_ptr<TensorImpl>> order;
  std::unordered_map<TensorImpl*, bool> seen;
  std::vector<std::pair<std::shared_ptr<TensorImpl>, size_t>> stack{{root, 0}};
  seen[root.get()] = true;
  while (!stack.empty()) {
    auto& [t, next] = stack.back();
    if (next < t->grad_fn->inputs.size()) {
      const std::shared_ptr<TensorImpl>& in = t->grad_fn->inputs[next++].impl_ptr();
      MINIDL_CHECK(!in || !in->graph_freed, "backward: the graph of an intermediate tensor ",
                   in->shape, " was already freed by an earlier backward() (detach it to reuse it)");
      if (in && in->grad_fn && !seen[in.get()]) {
        seen[in.get()] = true;
        stack.push_back({in, 0});
      }
    } else {
      order.push_back(std::move(t));
      stack.pop_back();
    }
  }
  return order;
}

static void accumulate(Tensor& slot, Tensor g) {
  slot = slot.defined() ? add(slot, g) : std::move(g);
}

// Stores a leaf's final gradient for this pass and fires its ready hooks.
// A gradient that is a view (sum's, expand's, permute's, a slice's) is added
// through its strides where it can be (add_into), not copied out first.
static void finish_leaf(TensorImpl* leaf, Tensor g) {
  if (!g.defined()) return;
  if (g.dtype() != leaf->dtype) g = cast(g, leaf->dtype);
  Tensor grad(leaf->grad);
  if (grad.defined() && grad.dtype() == kFloat32 && g.dtype() == kFloat32 &&
      grad.device() == g.device()) {  // accumulate in place, as PyTorch does
    add_into(grad, g);
  } else {
    g = g.contiguous();  // a view's backward may hand out a view
    if (grad.defined()) {
      g = cast(add(grad, g), leaf->dtype);
    } else if (g.impl_ptr().use_count() > 1 || g.impl().storage.use_count() > 1) {
      g = g.detach().clone();  // the optimizer and reducers update grads in place
    }
    leaf->grad = g.impl_ptr();
    grad = g;
  }
  for (auto& hook : leaf->ready_hooks) hook(grad);
}

void run_backward(const Tensor& root, const Tensor& grad_output) {
  MINIDL_CHECK(!root.impl().graph_freed,
               "backward: the graph was already freed by an earlier backward()");
  MINIDL_CHECK(root.requires_grad(), "backward: tensor ", root.shape(),
               " does not require grad (no parameter or input with requires_grad reached it)");
  Tensor g0 = grad_output;
  if (!g0.defined()) {
    MINIDL_CHECK(root.numel() == 1, "backward: a gradient can be implied only for a scalar "
                 "output, got shape ", root.shape(), "; pass grad_output");
    g0 = Tensor::ones(root.shape(), root.dtype(), root.device());
  }
  MINIDL_CHECK(g0.shape() == root.shape(), "backward: grad_output ", g0.shape(),
               " does not match output ", root.shape());
  adapt_threads();  // once per backward pass: follow the machine's load (threads.h)
  NoGradGuard no_grad;
  TensorImpl* r = root.impl_ptr().get();
  if (!r->grad_fn) {  // backward on a leaf
    finish_leaf(r, g0);
    run_end_callbacks();
    return;
  }
  auto order = topo_order(root.impl_ptr());
  // A leaf's gradient is final once every node that uses it has run.
  std::unordered_map<TensorImpl*, int> leaf_uses;
  std::unordered_map<TensorImpl*, Tensor> grads;
  for (const auto& t : order)
    for (const Tensor& in : t->grad_fn->inputs)
      if (in.defined() && in.requires_grad() && !in.impl().grad_fn) ++leaf_uses[in.impl_ptr().get()];
  grads[r] = g0;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    std::shared_ptr<TensorImpl> owner = std::move(*it);  // released after this node
    TensorImpl* t = owner.get();
    std::shared_ptr<Node> node = std::move(t->grad_fn);
    t->graph_freed = true;
    Tensor g = std::move(grads[t]);
    grads.erase(t);
    std::vector<Tensor> gin;
    if (g.defined()) {
      ScopeGuard scope(node->scope);
      if (node_observer) node_observer(node->name, true);
      gin = node->backward(g.contiguous());  // backward closures read g row-major
      g = Tensor();  // released: an input gradient viewing g (reshape's) now owns its storage
      if (node_observer) node_observer(node->name, false);
      if (anomaly_mode.load(std::memory_order_relaxed))
        for (size_t i = 0; i < gin.size(); ++i)
          check_anomaly("backward", *node, "the gradient of input", i, gin[i]);
      assert(gin.size() == node->inputs.size());
    }
    for (size_t i = 0; i < node->inputs.size(); ++i) {
      const Tensor& in = node->inputs[i];
      if (!in.defined() || !in.requires_grad()) continue;
      TensorImpl* p = in.impl_ptr().get();
      Tensor gi = i < gin.size() ? std::move(gin[i]) : Tensor();
      assert(!gi.defined() || gi.shape() == in.shape());
      if (p->grad_fn) {
        if (gi.defined()) accumulate(grads[p], std::move(gi));
        continue;
      }
      if (gi.defined()) accumulate(grads[p], std::move(gi));
      if (--leaf_uses[p] == 0) {
        auto found = grads.find(p);
        if (found != grads.end()) {
          Tensor done = std::move(found->second);
          grads.erase(found);
          finish_leaf(p, std::move(done));
        }
      }
    }
  }
  run_end_callbacks();
}

}  // namespace minidl
