// Host-side plumbing shared by the CUDA backend's files: the check macros,
// the one compute stream and cuBLAS handle (created at first use, never
// destroyed: tensors may outlive static destruction), launch sizes and
// scratch buffers from the allocator.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "framework/backend/cuda/cuda.h"

namespace minidl::cuda {

// Throws minidl::Error "file:line: call: library error (description)".
[[noreturn]] void fail(const char* file, int line, const char* call, const char* name,
                       const char* description);
inline void check(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess) fail(file, line, call, cudaGetErrorName(e), cudaGetErrorString(e));
}
// A shared library opened by name (dlopen) and its functions looked up by
// name: cuBLAS, cuDNN and NCCL are opened at their first use, not linked.
// failure() names the first thing missing, the library or an entry; empty
// when all were found.
class Library {
 public:
  explicit Library(const std::string& name);
  template <class F>
  void get(F*& slot, const char* entry) {
    slot = reinterpret_cast<F*>(find(entry));
  }
  const std::string& failure() const { return failure_; }

 private:
  void* find(const char* entry);
  std::string name_, failure_;
  void* handle_;
};

// cuBLAS is opened at its first use (dlopen of libcublas.so.<major>), not
// linked: loading it costs a process about 150 MB of resident memory (a
// program linked with -lcublas starts at 155 MB, with -lcudart at 1.5 MB),
// which a CPU-only run of a CUDA-enabled build should not pay. The entries
// minidl calls; cublas() throws, naming the library, when it cannot be opened.
struct Cublas {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasSetWorkspace_v2) set_workspace;
  decltype(&cublasSgemmStridedBatched_64) sgemm_strided_batched;
  decltype(&cublasGetStatusName) status_name;
  decltype(&cublasGetStatusString) status_string;
};
const Cublas& cublas();

inline void check(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS)
    fail(file, line, call, cublas().status_name(s), cublas().status_string(s));
}
// For destructors and other places that must not throw: prints the same
// message to stderr instead, and nothing while the runtime shuts down.
void warn(cudaError_t e, const char* call, const char* file, int line);

}  // namespace minidl::cuda

// CUDA_CHECK(cudaX(...)) and CUBLAS_CHECK(cublasX(...)): throw on failure,
// naming file:line, the call and the library's own error string.
#define CUDA_CHECK(call) ::minidl::cuda::check((call), #call, __FILE__, __LINE__)
#define CUBLAS_CHECK(call) ::minidl::cuda::check((call), #call, __FILE__, __LINE__)
#define CUDA_WARN(call) ::minidl::cuda::warn((call), #call, __FILE__, __LINE__)
// After a kernel launch: a bad launch configuration is reported here, at the
// launch; faults inside the kernel surface at the next synchronising call.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

namespace minidl::cuda {

// The process's GPU (cuda::device() at the first call, then fixed), made the
// calling host thread's current device before its first CUDA call.
int bind();
cudaStream_t stream();         // the compute stream of the process's GPU (binds)
// bound to stream(), with a workspace of its own (cuBLAS then picks the same
// kernels inside a CUDA graph capture as outside, and allocates nothing there)
cublasHandle_t blas_handle();

// A kernel's arguments in device memory that a CUDA graph refreshes at each
// replay (the optimizer's: graph.cpp). graph_args returns null outside
// graphs (the caller stages its arguments itself). While capturing: a new
// slot of `bytes`, page-locked host and device memory the graph owns; the
// caller writes the host side and queues (records) its copy to the device
// before the kernel. While feeding (fed): the graph's next slot in capture
// order, whose host side the caller rewrites; the recorded copy takes it to
// the device at the next replay. Throws when the sizes differ.
struct ArgSlot {
  void* host;
  void* device;
  size_t bytes;
  bool fed;
};
ArgSlot* graph_args(size_t bytes);

// ---- graphs (graph.cpp), for memory.cpp: pool blocks and a capture ----
// A free inside a capture becomes a node of the graph, and CUDA lets such a
// node free only a block allocated in that capture. So while capturing,
// memory.cpp notes each block it allocates (note_allocated), and asks
// free_later(p) before freeing one: true when graph.cpp takes it instead,
// either a block made before the capture (freed when the capture ends) or
// one made in a capture and still live at its end (the graph is never
// launched, the front end refuses it, so that block never existed).
// An upload's block is on the copy stream, never captured: note_allocated(p,
// false) only tells graph.cpp the address is a real block again.
void note_allocated(void* p, bool on_compute_stream = true);
bool free_later(void* p);
bool capture_in_progress();  // between capture_begin and capture_end

// ---- graphs (graph.cpp): the backend's GraphOps entries (backend/graphs.h) ----
void capture_begin();
void* capture_end(CaptureCounts* counts);
void replay(void* graph);
void feed_begin(void* graph);
void feed_end(void* graph);
void destroy_graph(void* graph);
int64_t graph_kernels(void* graph);
int64_t graph_pool_bytes();

// Threads per block for the simple kernels, and a grid for a grid-stride loop
// over n items (capped: each thread then takes several).
// (The CUDA-on-CPU tests lower the cap, so that grid-stride loops and the
// barriers between their turns run on small tensors.)
#ifndef MINIDL_CUDA_MAX_BLOCKS
#define MINIDL_CUDA_MAX_BLOCKS 65536
#endif
inline constexpr int kThreads = 256;
inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1                        ? 1
                               : blocks > MINIDL_CUDA_MAX_BLOCKS ? MINIDL_CUDA_MAX_BLOCKS
                                                                 : blocks);
}

// An uninitialised device buffer of n T's from the allocator (counted like a
// tensor), freed in stream order: kernels queued before the destructor runs
// still see it.
template <class T>
class Scratch {
 public:
  explicit Scratch(int64_t n)
      : bytes_(static_cast<size_t>(n) * sizeof(T)), data_(static_cast<T*>(allocate(bytes_))) {}
  ~Scratch() { deallocate(data_, bytes_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T* data() const { return data_; }

 private:
  size_t bytes_;
  T* data_;
};

}  // namespace minidl::cuda
