// Device memory from CUDA's stream-ordered allocator (cudaMallocFromPoolAsync
// on a pool of device 0 whose release threshold keeps freed blocks for reuse
// instead of returning them to the driver at each synchronisation), copies on
// the compute stream, and the byte counts memory_stats() reports.
#include <cstdint>
#include <new>

#include "framework/backend/byte_count.h"
#include "framework/backend/cuda/runtime.h"

namespace minidl::cuda {
namespace {

cudaMemPool_t pool() {
  static cudaMemPool_t p = [] {
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t created = nullptr;
    CUDA_CHECK(cudaMemPoolCreate(&created, &props));
    // Keep everything freed: a training step allocates the same sizes every
    // step, and memory returned to the driver costs a fresh mapping next time.
    uint64_t threshold = UINT64_MAX;
    CUDA_CHECK(cudaMemPoolSetAttribute(created, cudaMemPoolAttrReleaseThreshold, &threshold));
    return created;
  }();
  return p;
}

ByteCount counted;  // current and peak bytes of live storages

}  // namespace

// The pool's blocks are 256-byte aligned at least (kernels.h asks for 64).
void* allocate(size_t bytes) {
  void* p = nullptr;
  cudaError_t e = cudaMallocFromPoolAsync(&p, bytes ? bytes : 1, pool(), stream());
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear it: running out is the caller's to handle
    throw std::bad_alloc();
  }
  CUDA_CHECK(e);
  counted.add(static_cast<int64_t>(bytes));
  return p;
}

// Called from destructors: reports a failure instead of throwing.
void deallocate(void* p, size_t bytes) {
  CUDA_WARN(cudaFreeAsync(p, stream()));
  counted.add(-static_cast<int64_t>(bytes));
}

void copy(void* dst, const void* src, size_t n, CopyKind kind) {
  if (n == 0) return;
  const cudaMemcpyKind k = kind == CopyKind::HostToDevice   ? cudaMemcpyHostToDevice
                           : kind == CopyKind::DeviceToHost ? cudaMemcpyDeviceToHost
                                                            : cudaMemcpyDeviceToDevice;
  CUDA_CHECK(cudaMemcpyAsync(dst, src, n, k, stream()));
  // The host reads the result right after: wait for it (and all queued work).
  if (kind == CopyKind::DeviceToHost) CUDA_CHECK(cudaStreamSynchronize(stream()));
}

void synchronize() { CUDA_CHECK(cudaStreamSynchronize(stream())); }

int64_t current_bytes() { return counted.current(); }
int64_t peak_bytes() { return counted.peak(); }
void reset_peak() { counted.reset_peak(); }

}  // namespace minidl::cuda
