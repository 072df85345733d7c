// An emulated CUDA device for machines without a GPU: the CPU's kernel
// table over its own allocator (counted), installed under Device::CUDA with
// register_backend, so CUDA code paths above the kernels (allocation, copies
// between devices, pinned staging, host reads) run here and must give the
// CPU's bits exactly. Shared by tests/framework/test_device.cpp and the
// multi-rank suites in tests/parallel.
//
//   if (!testing::emulate()) { MESSAGE("a real CUDA device is present"); return; }
//   Tensor t = Tensor::ones({2}, kFloat32, Device::CUDA);   // emulated
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

#include "cuda_on_cpu/graphs.h"
#ifdef MINIDL_CUDA_ON_CPU
#include "cuda_on_cpu/runtime.h"
#endif
#include "framework/backend/backend.h"

namespace minidl::testing {

struct Emulated {
  static inline std::atomic<int64_t> live{0}, peak{0}, to_host{0};
  // Pinned blocks handed out and not given back, every one handed out, and
  // the host-to-device copies whose source lay in a live pinned block or not.
  static inline std::mutex pinned_mu;
  static inline std::map<const char*, size_t> pinned_live;  // start -> bytes
  static inline int64_t pinned_allocs = 0, bad_frees = 0, from_pinned = 0, from_pageable = 0;
  static inline std::atomic<int64_t> uploads{0};  // calls of upload (the copy-stream path)
  static bool in_pinned(const void* p) {
    const char* c = static_cast<const char*>(p);
    auto it = pinned_live.upper_bound(c);
    return it != pinned_live.begin() && c < std::prev(it)->first + std::prev(it)->second;
  }
  static void* allocate(size_t n) {
    live += static_cast<int64_t>(n);
    peak = std::max<int64_t>(peak, live);
    return std::aligned_alloc(64, (n + 63) / 64 * 64 + 64);
  }
  static void count_upload(const void* src) {
    std::lock_guard lock(pinned_mu);
    ++(in_pinned(src) ? from_pinned : from_pageable);
  }
  Allocator memory{};
  Kernels table;
  GraphOps graphs;
  Backend backend;
  Emulated() : table(kernels(Device::CPU)) {
    memory.allocate = allocate;
    memory.deallocate = [](void* p, size_t n) {
      live -= static_cast<int64_t>(n);
      std::free(p);
    };
    memory.copy = [](void* dst, const void* src, size_t n, CopyKind kind) {
      if (kind == CopyKind::DeviceToHost) ++to_host;
      if (kind == CopyKind::HostToDevice) count_upload(src);
      std::memmove(dst, src, n);
    };
    memory.upload = [](const void* src, size_t n) {  // the same, as one call here
      count_upload(src);
      ++uploads;
      void* p = allocate(n);
      std::memcpy(p, src, n);
      return p;
    };
    memory.allocate_pinned = [](size_t n) {
      void* p = std::aligned_alloc(64, (n + 63) / 64 * 64 + 64);
      std::lock_guard lock(pinned_mu);
      pinned_live[static_cast<const char*>(p)] = n;
      ++pinned_allocs;
      return p;
    };
    memory.deallocate_pinned = [](void* p, size_t) {
      {
        std::lock_guard lock(pinned_mu);
        bad_frees += pinned_live.erase(static_cast<const char*>(p)) != 1;
      }
      std::free(p);
    };
    memory.current_bytes = [] { return live.load(); };
    memory.peak_bytes = [] { return peak.load(); };
    memory.reset_peak = [] { peak = live.load(); };
    memory.synchronize = [] {};
    graphs = emulate_graphs(memory, table);
    backend = {"emulated", &memory, &table, &graphs};
  }
};

// Installs the emulated device for the process, unless a real one is here;
// false when a real one is (tests then use it, or step aside). Built with
// MINIDL_CUDA_ON_CPU, the device is the CUDA backend's own kernel code run by
// tools/cuda_on_cpu, which the tests treat as a real one.
inline bool emulate() {
#ifdef MINIDL_CUDA_ON_CPU
  static const bool installed = (install_cuda_on_cpu(), true);
  return !installed;
#endif
  static const bool real = device_available(Device::CUDA);
  static Emulated emulated;
  if (!real) register_backend(Device::CUDA, &emulated.backend);
  return !real;
}

}  // namespace minidl::testing
