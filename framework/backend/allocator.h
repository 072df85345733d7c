// A device's memory, apart from its compute (kernels.h): what a Tensor's
// storage, copies between devices and memory_stats() need, as tinygrad's
// Allocator and ggml's buffer type stand apart from the kernels that run on them.
// Every entry is required except `upload`.
#pragma once
#include <cstddef>
#include <cstdint>

namespace minidl {

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };

struct Allocator {
  void* (*allocate)(size_t bytes);  // 64-byte aligned at least; throws std::bad_alloc
  void (*deallocate)(void* p, size_t bytes);
  // n bytes; host memory on the side `kind` names. Queued on the device's
  // stream: DeviceToHost waits for it, the others need not. HostToDevice from
  // ordinary (pageable) host memory returns once the source has been read
  // (CUDA stages it); from a pinned block (allocate_pinned) it returns at
  // once and the copy runs in stream order, the block kept valid by
  // deallocate_pinned.
  void (*copy)(void* dst, const void* src, size_t n, CopyKind kind);
  // Optional. A new block of n bytes (as allocate) holding a copy of the
  // pinned block src, copied on a stream of the device's own so that it
  // overlaps the work queued before; work queued after the call sees the
  // data. Null where the device has no such stream (the front end then
  // allocates and copies).
  void* (*upload)(const void* src, size_t n);
  // Host memory for staging copies to this device (64-byte aligned at least;
  // throws std::bad_alloc): page-locked on CUDA (counted in no device's
  // bytes), on the CPU the ordinary allocate (counted as usual).
  void* (*allocate_pinned)(size_t bytes);
  // Stream-ordered: the block is handed out again only after the device has
  // finished the work queued before this call (a copy from it included).
  void (*deallocate_pinned)(void* p, size_t bytes);
  void (*synchronize)();  // waits until the device has finished all queued work
  // Bytes this allocator holds for live storages, and the peak.
  int64_t (*current_bytes)();
  int64_t (*peak_bytes)();
  void (*reset_peak)();
};

}  // namespace minidl
