#include "framework/graph.h"

#include <unordered_set>
#include <utility>

#include "framework/backend/kernels.h"
#include "framework/error.h"

namespace minidl::cuda {
namespace {

// The capture in progress on this thread: device blocks made inside and not
// yet freed, and blocks from before it freed inside.
struct Capture {
  std::unordered_set<const void*> made;
  int64_t freed_older = 0;
};
thread_local Capture* active = nullptr;

const Kernels& graph_kernels() {
  const Kernels& k = kernels(Device::CUDA);  // throws without CUDA
  MINIDL_CHECK(k.capture_begin, "cuda::Graph: the '", k.name, "' device cannot capture graphs");
  return k;
}

}  // namespace

bool is_capturing() { return active != nullptr; }
void note_made(const void* p) {
  if (active) active->made.insert(p);
}
void note_freed(const void* p) {
  if (active && active->made.erase(p) == 0) ++active->freed_older;
}

Graph::~Graph() { reset(); }

void Graph::reset() {
  if (graph_) kernels(Device::CUDA).destroy_graph(std::exchange(graph_, nullptr));
}

void Graph::capture(const std::function<void()>& work) {
  const Kernels& k = graph_kernels();
  MINIDL_CHECK(!active, "cuda::Graph::capture: a capture is already in progress on this thread");
  reset();
  Capture c;
  k.capture_begin();
  active = &c;
  try {
    work();
  } catch (...) {
    active = nullptr;
    try {
      k.destroy_graph(k.capture_end());
    } catch (const Error&) {  // the capture broke too: the first error tells why
    }
    throw;
  }
  active = nullptr;
  void* graph = k.capture_end();
  if (c.made.empty() && c.freed_older == 0) {
    graph_ = graph;
    return;
  }
  k.destroy_graph(graph);
  MINIDL_CHECK(c.made.empty(), "cuda::Graph::capture: ", c.made.size(), " tensor(s) made inside "
               "the capture outlive it (their memory is the graph's); copy results into tensors "
               "made before the capture, and keep gradients allocated (zero_grad(false))");
  throw Error(cat("cuda::Graph::capture: ", c.freed_older, " tensor(s) made before the capture "
                  "died inside it (the graph would free them at every replay); keep them alive "
                  "until the capture ends, e.g. zero gradients with zero_grad(false)"));
}

int64_t Graph::kernel_launches() const {
  return graph_ ? minidl::kernels(Device::CUDA).graph_kernels(graph_) : 0;
}

void Graph::replay() {
  MINIDL_CHECK(graph_, "cuda::Graph::replay: nothing captured");
  kernels(Device::CUDA).replay(graph_);
}

void Graph::feed(const std::function<void()>& host) {
  MINIDL_CHECK(graph_, "cuda::Graph::feed: nothing captured");
  const Kernels& k = kernels(Device::CUDA);
  k.feed_begin(graph_);
  try {
    host();
  } catch (...) {
    k.feed_end(graph_);
    throw;
  }
  k.feed_end(graph_);
}

}  // namespace minidl::cuda
