// CUDA graphs: stream capture of the compute stream (relaxed mode, so the
// capturing thread may still allocate the slots below), instantiation,
// replay, the argument slots through which a replay gets each step's
// optimizer arguments (runtime.h, ArgSlot), and the bookkeeping of the pool
// blocks a capture makes and frees, which capture_end reports
// (backend/graphs.h, CaptureCounts).
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <utility>
#include <vector>

#include "framework/backend/cuda/runtime.h"
#include "framework/error.h"

namespace minidl::cuda {
namespace {

struct GraphState {
  cudaGraphExec_t exec = nullptr;
  std::deque<ArgSlot> slots;  // in capture order; a deque keeps their addresses
  size_t next = 0;            // the slot the next fed call takes
  cudaEvent_t replayed = nullptr;  // recorded after each replay
  int64_t kernels = 0;             // kernel nodes (launches) in the graph
  bool launched = false;
  std::unordered_set<void*> made;  // pool blocks allocated in the capture, not yet freed
  std::vector<void*> older;        // made before it, freed during it: freed at its end

  ~GraphState() {  // from destroy_graph and error paths: reports, never throws
    if (launched) CUDA_WARN(cudaEventSynchronize(replayed));
    if (exec) CUDA_WARN(cudaGraphExecDestroy(exec));
    if (replayed) CUDA_WARN(cudaEventDestroy(replayed));
    for (const ArgSlot& s : slots) {
      CUDA_WARN(cudaFreeHost(s.host));
      CUDA_WARN(cudaFree(s.device));
    }
  }
};

GraphState* capturing = nullptr;  // one capture at a time, on the one stream
GraphState* feeding = nullptr;
std::mutex blocks_mutex;             // guards capturing's two sets and `never`
std::unordered_set<void*> never;     // made in a capture and live at its end

// Ends the capture's bookkeeping of pool blocks (blocks_mutex held): the
// blocks freed during it are freed now, in stream order; the ones still live
// never existed.
void settle_blocks(GraphState& g) {
  for (void* p : g.older) CUDA_WARN(cudaFreeAsync(p, stream()));
  g.older.clear();
  never.insert(g.made.begin(), g.made.end());
  g.made.clear();
}

}  // namespace

void note_allocated(void* p, bool on_compute_stream) {
  std::lock_guard lock(blocks_mutex);
  never.erase(p);  // the address is a real block again
  if (capturing && on_compute_stream) capturing->made.insert(p);
}

bool capture_in_progress() {
  std::lock_guard lock(blocks_mutex);
  return capturing != nullptr;
}

bool free_later(void* p) {
  std::lock_guard lock(blocks_mutex);
  if (never.erase(p)) return true;
  if (!capturing || capturing->made.erase(p)) return false;
  capturing->older.push_back(p);
  return true;
}

ArgSlot* graph_args(size_t bytes) {
  if (GraphState* g = feeding) {
    MINIDL_CHECK(g->next < g->slots.size(), "CUDA graph: more optimizer steps fed (",
                 g->next + 1, ") than the capture recorded (", g->slots.size(), ")");
    ArgSlot& s = g->slots[g->next++];
    MINIDL_CHECK(s.bytes == bytes, "CUDA graph: an optimizer step fed with ", bytes,
                 " bytes of arguments, but the one captured took ", s.bytes,
                 " (other parameters?)");
    return &s;
  }
  if (!capturing) return nullptr;
  ArgSlot s{nullptr, nullptr, bytes, false};
  CUDA_CHECK(cudaHostAlloc(&s.host, bytes, cudaHostAllocDefault));
  const cudaError_t e = cudaMalloc(&s.device, bytes);
  if (e != cudaSuccess) CUDA_WARN(cudaFreeHost(s.host));
  CUDA_CHECK(e);
  capturing->slots.push_back(s);
  return &capturing->slots.back();
}

void capture_begin() {
  MINIDL_CHECK(!capturing, "CUDA graph: a capture is already in progress");
  auto g = std::make_unique<GraphState>();
  // handles made now, not in the capture (creating one may synchronise)
  (void)blas_handle();
  prepare_cudnn_for_capture();
  CUDA_CHECK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeRelaxed));
  std::lock_guard lock(blocks_mutex);
  capturing = g.release();
}

void* capture_end(CaptureCounts* counts) {
  std::unique_ptr<GraphState> g;
  {
    std::lock_guard lock(blocks_mutex);
    g.reset(std::exchange(capturing, nullptr));
  }
  MINIDL_CHECK(g, "CUDA graph: capture_end without capture_begin");
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream(), &graph);
  {
    std::lock_guard lock(blocks_mutex);
    *counts = {static_cast<int64_t>(g->made.size()), static_cast<int64_t>(g->older.size())};
    settle_blocks(*g);
  }
  CUDA_CHECK(ended);
  size_t count = 0;
  cudaError_t e = cudaGraphGetNodes(graph, nullptr, &count);
  std::vector<cudaGraphNode_t> nodes(count);
  if (e == cudaSuccess && count) e = cudaGraphGetNodes(graph, nodes.data(), &count);
  for (size_t i = 0; e == cudaSuccess && i < count; ++i) {
    cudaGraphNodeType type{};
    e = cudaGraphNodeGetType(nodes[i], &type);
    g->kernels += type == cudaGraphNodeTypeKernel;
  }
  if (e == cudaSuccess) e = cudaGraphInstantiate(&g->exec, graph, 0);
  CUDA_WARN(cudaGraphDestroy(graph));
  CUDA_CHECK(e);
  CUDA_CHECK(cudaEventCreateWithFlags(&g->replayed, cudaEventDisableTiming));
  for (ArgSlot& s : g->slots) s.fed = true;  // from now on a call takes a slot to feed
  return g.release();
}

void replay(void* graph) {
  auto* g = static_cast<GraphState*>(graph);
  CUDA_CHECK(cudaGraphLaunch(g->exec, stream()));
  CUDA_CHECK(cudaEventRecord(g->replayed, stream()));
  g->launched = true;
}

void feed_begin(void* graph) {
  auto* g = static_cast<GraphState*>(graph);
  // the last replay must have read the slots before the host rewrites them
  if (g->launched) CUDA_CHECK(cudaEventSynchronize(g->replayed));
  g->next = 0;
  feeding = g;
}

void feed_end(void*) { feeding = nullptr; }

void destroy_graph(void* graph) { delete static_cast<GraphState*>(graph); }

int64_t graph_kernels(void* graph) { return static_cast<GraphState*>(graph)->kernels; }

int64_t graph_pool_bytes() {
  uint64_t high = 0;
  CUDA_CHECK(cudaDeviceGetGraphMemAttribute(bind(), cudaGraphMemAttrUsedMemHigh, &high));
  return static_cast<int64_t>(high);
}

}  // namespace minidl::cuda
