// CUDA kernels for the table's index entries (issue 22): index_select and
// index_add (atomicAdd), gather_dim and scatter_add_dim (atomicAdd), and the
// ternary select `where`. Indices are int32 or int64; the front end checks
// them only on the host, so one outside [0, D) is caught here: select and
// gather write all-ones bits (NaN for floats), the adds skip it. Letters:
// OUTER, D, INNER the dims around the indexed one, I the number of indices.
#include <cmath>

#include "framework/backend/cuda/cuda.h"
#include "framework/backend/cuda/device.cuh"

namespace minidl::cuda {
namespace {

// cond element i of float32, int32 or int64 as a bool
__device__ inline bool cond_at(const void* cond, DType t, int64_t i) {
  return t == kInt64   ? static_cast<const int64_t*>(cond)[i] != 0
         : t == kInt32 ? static_cast<const int32_t*>(cond)[i] != 0
                       : static_cast<const float*>(cond)[i] != 0.f;
}

// x [OUTER, D, INNER], index [I] -> out [OUTER, I, INNER]; T of the element's size
template <class T>
__global__ void index_select_kernel(int64_t outer, int64_t d, int64_t inner, const T* x,
                                    int64_t count, const void* index, bool is64, T* out) {
  const int64_t n = outer * count * inner;
  for (int64_t e = thread_index(); e < n; e += thread_count()) {
    const int64_t k = e % inner, i = (e / inner) % count, o = e / (inner * count);
    const int64_t j = label_at(index, is64, i);
    out[e] = j >= 0 && j < d ? x[(o * d + j) * inner + k] : static_cast<T>(~T{0});
  }
}

// src [OUTER, I, INNER] -> out [OUTER, D, INNER] += at index[i]
__global__ void index_add_kernel(int64_t outer, int64_t d, int64_t inner, int64_t count,
                                 const void* index, bool is64, const float* src, float* out) {
  const int64_t n = outer * count * inner;
  for (int64_t e = thread_index(); e < n; e += thread_count()) {
    const int64_t k = e % inner, i = (e / inner) % count, o = e / (inner * count);
    const int64_t j = label_at(index, is64, i);
    if (j >= 0 && j < d) atomicAdd(out + (o * d + j) * inner + k, src[e]);
  }
}

// x [OUTER, D, INNER], index [OUTER, I, INNER] -> out [OUTER, I, INNER]
__global__ void gather_dim_kernel(int64_t outer, int64_t d, int64_t inner, int64_t count,
                                  const float* x, const void* index, bool is64, float* out) {
  const int64_t n = outer * count * inner;
  for (int64_t e = thread_index(); e < n; e += thread_count()) {
    const int64_t k = e % inner, o = e / (inner * count), j = label_at(index, is64, e);
    out[e] = j >= 0 && j < d ? x[(o * d + j) * inner + k] : NAN;
  }
}

// src, index [OUTER, I, INNER] -> out [OUTER, D, INNER] += src
__global__ void scatter_add_dim_kernel(int64_t outer, int64_t d, int64_t inner, int64_t count,
                                       const void* index, bool is64, const float* src,
                                       float* out) {
  const int64_t n = outer * count * inner;
  for (int64_t e = thread_index(); e < n; e += thread_count()) {
    const int64_t k = e % inner, o = e / (inner * count), j = label_at(index, is64, e);
    if (j >= 0 && j < d) atomicAdd(out + (o * d + j) * inner + k, src[e]);
  }
}

// out [s.n] = cond ? a : b under the index map s
__global__ void where_kernel(Select s, const void* cond, DType ct, const float* a,
                             const float* b, float* out) {
  for (int64_t e = thread_index(); e < s.n; e += thread_count()) {
    int64_t rem = e, oc = 0, oa = 0, ob = 0;
    for (int d = s.nd - 1; d >= 0; --d) {
      const int64_t idx = rem % s.size[d];
      rem /= s.size[d];
      oc += idx * s.stride_c[d];
      oa += idx * s.stride_a[d];
      ob += idx * s.stride_b[d];
    }
    out[e] = cond_at(cond, ct, oc) ? a[oa] : b[ob];
  }
}

}  // namespace

void index_select(size_t es, int64_t outer, int64_t d, int64_t inner, const void* x,
                  int64_t count, const void* index, DType it, void* out) {
  const int64_t n = outer * count * inner;
  if (n == 0) return;
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    index_select_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(
        outer, d, inner, static_cast<const T*>(x), count, index, it == kInt64,
        static_cast<T*>(out));
    CUDA_CHECK_LAUNCH();
  };
  switch (es) {  // the dtypes' sizes
    case 2:
      return launch(uint16_t{});
    case 4:
      return launch(uint32_t{});
    case 8:
      return launch(uint64_t{});
  }
}

void index_add(int64_t outer, int64_t d, int64_t inner, int64_t count, const void* index,
               DType it, const float* src, float* out) {
  const int64_t n = outer * count * inner;
  if (n == 0) return;
  index_add_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(outer, d, inner, count, index,
                                                             it == kInt64, src, out);
  CUDA_CHECK_LAUNCH();
}

void gather_dim(int64_t outer, int64_t d, int64_t inner, int64_t count, const float* x,
                const void* index, DType it, float* out) {
  const int64_t n = outer * count * inner;
  if (n == 0) return;
  gather_dim_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(outer, d, inner, count, x, index,
                                                              it == kInt64, out);
  CUDA_CHECK_LAUNCH();
}

void scatter_add_dim(int64_t outer, int64_t d, int64_t inner, int64_t count, const void* index,
                     DType it, const float* src, float* out) {
  const int64_t n = outer * count * inner;
  if (n == 0) return;
  scatter_add_dim_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(outer, d, inner, count,
                                                                   index, it == kInt64, src, out);
  CUDA_CHECK_LAUNCH();
}

void where(const Select& s, const void* cond, DType ct, const float* a, const float* b,
           float* out) {
  if (s.n == 0) return;
  where_kernel<<<blocks_for(s.n), kThreads, 0, stream()>>>(s, cond, ct, a, b, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace minidl::cuda
