// Device-side helpers for the CUDA backend's kernels: grid-stride indices,
// warp reductions, the label loader and the elementwise map kernels.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "framework/backend/cuda/runtime.h"

namespace minidl::cuda {

// for (int64_t i = thread_index(); i < n; i += thread_count()): a grid-stride loop
__device__ inline int64_t thread_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t thread_count() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// max that propagates NaN from either side (ReduceOp::Max's rule)
__device__ inline float nan_max(float a, float b) { return b > a || b != b ? b : a; }

inline constexpr int kWarpsPerBlock = kThreads / 32;

// Sum and NaN-propagating max across the 32 lanes of a warp; every lane gets
// the result, folded in the same butterfly order on every lane.
__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ inline double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The sum of v over the block's threads, returned to thread 0 (the others
// get a partial sum): warps first, then warp 0 over the warps' sums, in a
// fixed order (deterministic). blockDim.x is a multiple of 32, at most 1024;
// every thread calls it, and it may be called again at once.
__device__ inline float block_sum(float v) {
  __shared__ float warps[32];
  v = warp_sum(v);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) v = warp_sum(threadIdx.x < blockDim.x / 32 ? warps[threadIdx.x] : 0.f);
  __syncthreads();  // warps is free for the next call
  return v;
}

// One block per channel of x [N, C, S]: f(k) for the offsets k of channel ch
// that this thread takes. Threads run along S within each sample, with no
// division per element (a 64-bit i / S per element made LeNet's conv bias
// gradient 97 us on an H200); an S under a quarter of the block is walked
// flat over N * S instead, so the block's threads stay busy.
template <class F>
__device__ void for_channel(int64_t n, int64_t c, int64_t s, int64_t ch, F f) {
  if (s >= blockDim.x / 4) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = threadIdx.x; j < s; j += blockDim.x) f((i * c + ch) * s + j);
  } else {
    for (int64_t t = threadIdx.x; t < n * s; t += blockDim.x) f((t / s * c + ch) * s + t % s);
  }
}

// labels [N] of int32 or int64 -> labels[i] as int64
__device__ inline int64_t label_at(const void* labels, bool is64, int64_t i) {
  return is64 ? static_cast<const int64_t*>(labels)[i]
              : static_cast<int64_t>(static_cast<const int32_t*>(labels)[i]);
}

// x [n] -> out [n] = f(x[i]), grid-stride
template <class F>
__global__ void map_kernel(int64_t n, const float* x, float* out, F f) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) out[i] = f(x[i]);
}

// Launches map_kernel on the compute stream (host side).
template <class F>
void map(int64_t n, const float* x, float* out, F f) {
  if (n == 0) return;
  map_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(n, x, out, f);
  CUDA_CHECK_LAUNCH();
}

}  // namespace minidl::cuda
