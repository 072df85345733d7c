// Device memory from CUDA's stream-ordered allocator (cudaMallocFromPoolAsync
// on a pool of the process's GPU whose release threshold keeps freed blocks for reuse
// instead of returning them to the driver at each synchronisation), copies on
// the compute stream, the byte counts memory_stats() reports, and the pinned
// host blocks the input pipeline stages batches in.
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "framework/backend/byte_count.h"
#include "framework/backend/cuda/runtime.h"

namespace minidl::cuda {
namespace {

cudaMemPool_t pool() {
  static cudaMemPool_t p = [] {
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = bind();
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

// Page-locked host blocks for staging copies to the device. A block given
// back is tagged with an event recorded on the compute stream and handed out
// again only after that event has completed, so a copy queued from it before
// still reads what it was given. Up to 256 MiB stay cached; a block beyond
// that is freed once its event completes. Never destroyed (like the pool).
class PinnedCache {
 public:
  static PinnedCache& get() {
    static PinnedCache* cache = new PinnedCache;
    return *cache;
  }

  void* allocate(size_t bytes) {
    bind();  // pinned blocks and events belong to the process's GPU's context
    {
      std::lock_guard lock(mutex_);
      std::vector<Block>& blocks = free_[bytes];
      for (size_t i = 0; i < blocks.size(); ++i) {
        const cudaError_t e = cudaEventQuery(blocks[i].done);
        if (e == cudaErrorNotReady) {
          (void)cudaGetLastError();  // not an error: the stream has not got there yet
          continue;
        }
        CUDA_CHECK(e);
        const Block b = blocks[i];
        blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
        cached_ -= bytes;
        live_[b.p] = b.done;
        return b.p;
      }
    }
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      throw std::bad_alloc();
    }
    CUDA_CHECK(e);
    cudaEvent_t done = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    std::lock_guard lock(mutex_);
    live_[p] = done;
    return p;
  }

  // Called from destructors: reports failures instead of throwing.
  void release(void* p, size_t bytes) {
    std::lock_guard lock(mutex_);
    const auto it = live_.find(p);
    if (it == live_.end()) return;  // not one of ours: nothing safe to do
    const cudaEvent_t done = it->second;
    live_.erase(it);
    CUDA_WARN(cudaEventRecord(done, stream()));
    if (cached_ + bytes <= kMaxCached) {
      free_[bytes].push_back({p, done});
      cached_ += bytes;
      return;
    }
    CUDA_WARN(cudaEventSynchronize(done));
    CUDA_WARN(cudaEventDestroy(done));
    CUDA_WARN(cudaFreeHost(p));
  }

 private:
  struct Block {
    void* p;
    cudaEvent_t done;  // recorded on the stream when the block was given back
  };
  static constexpr size_t kMaxCached = size_t(256) << 20;
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<Block>> free_;
  std::unordered_map<void*, cudaEvent_t> live_;  // handed out, with the event each owns
  size_t cached_ = 0;
};

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
  note_allocated(p);
  return p;
}

// Called from destructors: reports a failure instead of throwing.
void deallocate(void* p, size_t bytes) {
  if (!free_later(p)) CUDA_WARN(cudaFreeAsync(p, stream()));
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

// Batches go up on a stream of their own while the compute stream works.
// The block comes from the pool in the copy stream's order, so the pool
// hands out no block the compute stream may still be using; the compute
// stream then waits for the copy, uses the block and frees it in its order.
void* upload(const void* src, size_t n) {
  bind();  // this thread's current device, before the pool and the copy
  static cudaStream_t copies = [] {
    cudaStream_t created = nullptr;
    CUDA_CHECK(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking));
    return created;
  }();
  void* p = nullptr;
  cudaError_t e = cudaMallocFromPoolAsync(&p, n ? n : 1, pool(), copies);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    throw std::bad_alloc();
  }
  CUDA_CHECK(e);
  counted.add(static_cast<int64_t>(n));
  note_allocated(p, false);
  cudaEvent_t copied = nullptr;
  e = n ? cudaMemcpyAsync(p, src, n, cudaMemcpyHostToDevice, copies) : cudaSuccess;
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&copied, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventRecord(copied, copies);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(stream(), copied, 0);
  if (copied) CUDA_WARN(cudaEventDestroy(copied));  // released once it has completed
  if (e != cudaSuccess) {
    CUDA_WARN(cudaFreeAsync(p, copies));
    counted.add(-static_cast<int64_t>(n));
  }
  CUDA_CHECK(e);
  return p;
}

void* allocate_pinned(size_t bytes) { return PinnedCache::get().allocate(bytes); }
void deallocate_pinned(void* p, size_t bytes) { PinnedCache::get().release(p, bytes); }

void wait_stream() { CUDA_CHECK(cudaStreamSynchronize(stream())); }

int64_t current_bytes() { return counted.current(); }
int64_t peak_bytes() { return counted.peak(); }
void reset_peak() { counted.reset_peak(); }

}  // namespace minidl::cuda
