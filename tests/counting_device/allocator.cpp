// The counting device's allocator: 64-byte aligned host blocks, counted.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "counting_device/counting_device.h"

namespace minidl::counting {
namespace {

std::atomic<int64_t> live{0}, peak{0}, allocations{0}, to_device{0}, to_host{0}, within{0};

void* allocate(size_t n) {
  void* p = std::aligned_alloc(64, (n + 63) / 64 * 64 + 64);
  if (!p) throw std::bad_alloc();
  ++allocations;
  const int64_t now = live += static_cast<int64_t>(n);
  for (int64_t p0 = peak; now > p0 && !peak.compare_exchange_weak(p0, now);) {
  }
  return p;
}

void deallocate(void* p, size_t n) {
  live -= static_cast<int64_t>(n);
  std::free(p);
}

void copy(void* dst, const void* src, size_t n, CopyKind kind) {
  ++(kind == CopyKind::HostToDevice ? to_device : kind == CopyKind::DeviceToHost ? to_host : within);
  std::memmove(dst, src, n);
}

}  // namespace

const Allocator& allocator() {
  static const Allocator a{
      .allocate = allocate,
      .deallocate = deallocate,
      .copy = copy,
      .upload = nullptr,
      .allocate_pinned = allocate,
      .deallocate_pinned = deallocate,
      .synchronize = [] {},
      .current_bytes = [] { return live.load(); },
      .peak_bytes = [] { return peak.load(); },
      .reset_peak = [] { peak = live.load(); },
  };
  return a;
}

MemoryCounts memory_counts() {
  return {live.load(), allocations.load(), to_device.load(), to_host.load(), within.load()};
}

}  // namespace minidl::counting
