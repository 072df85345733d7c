#include "framework/cuda_graph.h"

#include <utility>

#include "framework/backend/backend.h"
#include "framework/error.h"

namespace minidl::cuda {
namespace {

const GraphOps& graphs() {
  const Backend& b = backend(Device::CUDA);  // throws without CUDA
  MINIDL_CHECK(b.graphs, "cuda::Graph: the '", b.name, "' device cannot capture graphs");
  return *b.graphs;
}

}  // namespace

bool is_capturing() { return capturing(Device::CUDA); }

Graph::~Graph() { reset(); }

void Graph::reset() {
  if (graph_) graphs().destroy(std::exchange(graph_, nullptr));
}

void Graph::capture(const std::function<void()>& work) {
  const GraphOps& g = graphs();
  MINIDL_CHECK(!g.capturing(), "cuda::Graph::capture: a capture is already in progress");
  reset();
  g.capture_begin();
  try {
    work();
  } catch (...) {
    try {
      CaptureCounts ignored;
      g.destroy(g.capture_end(&ignored));
    } catch (const Error&) {  // the capture broke too: the first error tells why
    }
    throw;
  }
  CaptureCounts c;
  void* graph = g.capture_end(&c);
  if (c.outliving == 0 && c.freed_older == 0) {
    graph_ = graph;
    return;
  }
  g.destroy(graph);
  MINIDL_CHECK(c.outliving == 0, "cuda::Graph::capture: ", c.outliving, " tensor(s) made inside "
               "the capture outlive it (their memory is the graph's); copy results into tensors "
               "made before the capture, and keep gradients allocated (zero_grad(false))");
  throw Error(cat("cuda::Graph::capture: ", c.freed_older, " tensor(s) made before the capture "
                  "died inside it (the graph would free them at every replay); keep them alive "
                  "until the capture ends, e.g. zero gradients with zero_grad(false)"));
}

int64_t Graph::kernel_launches() const { return graph_ ? graphs().kernel_launches(graph_) : 0; }

void Graph::replay() {
  MINIDL_CHECK(graph_, "cuda::Graph::replay: nothing captured");
  graphs().replay(graph_);
}

void Graph::feed(const std::function<void()>& host) {
  MINIDL_CHECK(graph_, "cuda::Graph::feed: nothing captured");
  const GraphOps& g = graphs();
  g.feed_begin(graph_);
  try {
    host();
  } catch (...) {
    g.feed_end(graph_);
    throw;
  }
  g.feed_end(graph_);
}

}  // namespace minidl::cuda
