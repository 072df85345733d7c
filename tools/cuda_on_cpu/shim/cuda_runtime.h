// Stands in for CUDA's cuda_runtime.h in the CUDA-on-CPU emulator
// (tools/cuda_on_cpu/emulator.h): the qualifiers, built-ins and the few
// runtime calls the backend's kernel files make.
#pragma once
#include <math.h>

#include <cstring>

#include "cuda_on_cpu/emulator.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
// a block's shared memory: blocks run one after another on the launching thread
#define __shared__ static thread_local

struct alignas(16) float4 {
  float x, y, z, w;
};

enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidConfiguration = 9 };
enum cudaMemcpyKind {
  cudaMemcpyHostToHost,
  cudaMemcpyHostToDevice,
  cudaMemcpyDeviceToHost,
  cudaMemcpyDeviceToDevice
};

inline cudaError_t cudaGetLastError() {
  return static_cast<cudaError_t>(gpu_emu::take_last_error());
}
inline const char* cudaGetErrorName(cudaError_t e) {
  return e == cudaSuccess ? "cudaSuccess" : "cudaErrorInvalidConfiguration";
}
inline const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "invalid configuration argument";
}
// Device memory is host memory here, and the stream runs at once.
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind,
                                   cudaStream_t) {
  std::memmove(dst, src, n);
  return cudaSuccess;
}

inline void __syncthreads() { gpu_emu::sync_block(); }

// v from lane (this lane ^ lane_mask) of the warp; whole warps only
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(uint64_t));
  gpu_emu::exchange_xor(&v, sizeof v, lane_mask, mask);
  return v;
}

// ---- shape ops (issue 22) ----
// Threads of a block never run at once here, so a plain add is atomic.
inline float atomicAdd(float* address, float v) {
  const float old = *address;
  *address = old + v;
  return old;
}
