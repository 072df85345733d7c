// CUDA kernels for the table's dtype and elementwise entries: fill, cast
// (float16 through cuda_fp16), strided_copy, and the float32 unary and broadcast
// binary maps. One templated grid-stride kernel per shape of loop; the switch
// on the enum picks the device lambda outside it.
#include <cuda_fp16.h>

#include <type_traits>

#include "framework/backend/activations.h"
#include "framework/backend/broadcast_offsets.h"
#include "framework/backend/cuda/device.cuh"
#include "framework/backend/float_to_int.h"
#include "framework/backend/philox.h"
#include "framework/error.h"

namespace minidl::cuda {
namespace {

// Calls f(T{}) with T the device element type of dtype t (float16 is __half).
template <class F>
void typed(DType t, F f) {
  switch (t) {
    case kFloat32:
      return f(float{});
    case kFloat16:
      return f(__half{});
    case kInt32:
      return f(int32_t{});
    case kInt64:
      return f(int64_t{});
  }
}

// One element converted as the CPU backend does: through float for float16
// (round to nearest even), float to integer saturating (float_to_int.h: NaN
// -> 0, out of range -> max/min, also on the host and the CPU emulator), a
// static_cast otherwise.
template <class To, class From>
__host__ __device__ To convert(From v) {
  if constexpr (std::is_same_v<From, __half>)
    return convert<To>(__half2float(v));
  else if constexpr (std::is_same_v<To, __half>)
    return __float2half_rn(static_cast<float>(v));
  else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>)
    return float_to_int<To>(v);
  else
    return static_cast<To>(v);
}

// dst [n] = value
template <class T>
__global__ void fill_kernel(int64_t n, T value, T* dst) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) dst[i] = value;
}

// dst [n] = start + i * step (in double), converted
template <class T>
__global__ void arange_kernel(int64_t n, double start, double step, T* dst) {
  for (int64_t i = thread_index(); i < n; i += thread_count())
    dst[i] = convert<T>(start + static_cast<double>(i) * step);
}

// src [n] -> dst [n], converted
template <class From, class To>
__global__ void cast_kernel(int64_t n, const From* src, To* dst) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) dst[i] = convert<To>(src[i]);
}

// x [n] += 1
__global__ void increment_kernel(int64_t n, int64_t* x) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) ++x[i];
}

// out [bc.n] = f(a, b) under the broadcast index map
template <class F>
__global__ void broadcast_kernel(Broadcast bc, const float* a, const float* b, float* out, F f) {
  for (int64_t i = thread_index(); i < bc.n; i += thread_count()) {
    const BroadcastOffsets o = broadcast_offsets(bc, i);
    out[i] = f(a[o.a], b[o.b]);
  }
}

// x [n] -> out [n] = x * keep_scale: one thread per Philox block of four
// elements (backend/philox.h), the same words the CPU draws
__global__ void dropout_kernel(uint64_t seed, uint64_t offset, float keep, float scale, int64_t n,
                               const float* x, float* out) {
  const int64_t blocks = (n + 3) / 4;
  for (int64_t b = thread_index(); b < blocks; b += thread_count()) {
    const philox::Words r = philox::block_words(seed, offset + static_cast<uint64_t>(b));
    for (int j = 0; j < 4 && 4 * b + j < n; ++j)
      out[4 * b + j] = x[4 * b + j] * philox::keep_scale(r.w[j], keep, scale);
  }
}

template <class F>
void broadcast(const Broadcast& bc, const float* a, const float* b, float* out, F f) {
  if (bc.n == 0) return;
  broadcast_kernel<<<blocks_for(bc.n), kThreads, 0, stream()>>>(bc, a, b, out, f);
  CUDA_CHECK_LAUNCH();
}

// x [n] -> out [n] = f(x), times g[i] where g is not null
template <class F>
__global__ void map_times_kernel(int64_t n, const float* g, const float* x, float* out, F f) {
  for (int64_t i = thread_index(); i < n; i += thread_count())
    out[i] = g ? g[i] * f(x[i]) : f(x[i]);
}

template <class F>
void map_times(int64_t n, const float* g, const float* x, float* out, F f) {
  if (n == 0) return;
  map_times_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(n, g, x, out, f);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void fill(DType t, int64_t n, double start, double step, void* dst) {
  if (n == 0) return;
  typed(t, [&](auto tag) {
    using T = decltype(tag);
    if (step == 0)
      fill_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(n, convert<T>(start),
                                                            static_cast<T*>(dst));
    else
      arange_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(n, start, step,
                                                              static_cast<T*>(dst));
    CUDA_CHECK_LAUNCH();
  });
}

void increment(int64_t n, int64_t* x) {
  if (n == 0) return;
  increment_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(n, x);
  CUDA_CHECK_LAUNCH();
}

void cast(DType from, DType to, int64_t n, const void* src, void* dst) {
  if (n == 0) return;
  typed(from, [&](auto from_tag) {
    typed(to, [&](auto to_tag) {
      using From = decltype(from_tag);
      using To = decltype(to_tag);
      cast_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(n, static_cast<const From*>(src),
                                                            static_cast<To*>(dst));
      CUDA_CHECK_LAUNCH();
    });
  });
}

// x [n] -> out [n] = f(x), or g f(x) where g is not null (a gradient in one
// pass); plain functions naming each device lambda, as nvcc asks
static void unary_times(UnaryOp op, float s, int64_t n, const float* g, const float* x,
                        float* out) {
  switch (op) {
    case UnaryOp::Neg:
      return map_times(n, g, x, out, [] __device__(float v) { return -v; });
    case UnaryOp::Exp:
      return map_times(n, g, x, out, [] __device__(float v) { return expf(v); });
    case UnaryOp::Log:
      return map_times(n, g, x, out, [] __device__(float v) { return logf(v); });
    case UnaryOp::Sqrt:
      return map_times(n, g, x, out, [] __device__(float v) { return sqrtf(v); });
    // NaN stays NaN (PyTorch's relu); -0 becomes 0
    case UnaryOp::Relu:
      return map_times(n, g, x, out,
                       [] __device__(float v) { return v > 0.f || v != v ? v : 0.f; });
    case UnaryOp::Sigmoid:
      return map_times(n, g, x, out, [] __device__(float v) { return 1.f / (1.f + expf(-v)); });
    case UnaryOp::Tanh:
      return map_times(n, g, x, out, [] __device__(float v) { return tanhf(v); });
    case UnaryOp::Pow:
      return map_times(n, g, x, out, [s] __device__(float v) { return powf(v, s); });
    case UnaryOp::PowGrad:
      return map_times(n, g, x, out, [s] __device__(float v) { return s * powf(v, s - 1); });
    case UnaryOp::Abs:
      return map_times(n, g, x, out, [] __device__(float v) { return fabsf(v); });
    case UnaryOp::Erf:
      return map_times(n, g, x, out, [] __device__(float v) { return erff(v); });
    case UnaryOp::Expm1:
      return map_times(n, g, x, out, [] __device__(float v) { return expm1f(v); });
    case UnaryOp::Log1p:
      return map_times(n, g, x, out, [] __device__(float v) { return log1pf(v); });
    case UnaryOp::Rsqrt:  // not rsqrtf (2 ulp): the CPU's 1 / sqrt
      return map_times(n, g, x, out, [] __device__(float v) { return 1.f / sqrtf(v); });
    case UnaryOp::Sin:
      return map_times(n, g, x, out, [] __device__(float v) { return sinf(v); });
    case UnaryOp::Cos:
      return map_times(n, g, x, out, [] __device__(float v) { return cosf(v); });
    case UnaryOp::LeakyRelu:
      return map_times(n, g, x, out, [s] __device__(float v) { return act::leaky_relu(v, s); });
    case UnaryOp::LeakyReluSlope:
      return map_times(n, g, x, out,
                       [s] __device__(float v) { return act::leaky_relu_slope(v, s); });
    case UnaryOp::Gelu:
      return map_times(n, g, x, out, [] __device__(float v) { return act::gelu(v); });
    case UnaryOp::GeluTanh:
      return map_times(n, g, x, out, [] __device__(float v) { return act::gelu_tanh(v); });
    case UnaryOp::Silu:
      return map_times(n, g, x, out,
                       [] __device__(float v) { return act::silu_of(v, 1.f / (1.f + expf(-v))); });
    case UnaryOp::Elu:
      return map_times(n, g, x, out, [s] __device__(float v) {
        return act::elu_of(v, s, expm1f(v < 0.f ? v : 0.f));
      });
    case UnaryOp::EluSlope:
      return map_times(n, g, x, out,
                       [s] __device__(float v) { return act::elu_slope_of(v, s, expf(v)); });
    case UnaryOp::Softplus:
      return map_times(n, g, x, out, [s] __device__(float z) {
        return act::softplus_of(z, s, log1pf(expf(-fabsf(z))));
      });
    case UnaryOp::SoftplusSlope:
      return map_times(n, g, x, out,
                       [s] __device__(float z) { return act::softplus_slope_of(z, s, expf(-z)); });
    case UnaryOp::SmoothL1:
      return map_times(n, g, x, out, [s] __device__(float d) { return act::smooth_l1(d, s); });
    case UnaryOp::SmoothL1Grad:
      return map_times(n, g, x, out, [s] __device__(float d) { return act::smooth_l1_grad(d, s); });
  }
}

// x [n] -> out [n]
void dropout(uint64_t seed, uint64_t offset, float keep, int64_t n, const float* x, float* out) {
  if (n == 0) return;
  const int64_t blocks = (n + 3) / 4;
  dropout_kernel<<<blocks_for(blocks), kThreads, 0, stream()>>>(seed, offset, keep, 1.f / keep, n,
                                                                x, out);
  CUDA_CHECK_LAUNCH();
}

// a, b -> out under bc

void unary(UnaryOp op, float s, int64_t n, const float* x, float* out) {
  unary_times(op, s, n, nullptr, x, out);
}

void unary_grad(UnaryOp op, float s, int64_t n, const float* g, const float* x, float* out) {
  unary_times(op, s, n, g, x, out);
}

void binary(BinaryOp op, const Broadcast& bc, const float* a, const float* b, float* out) {
  switch (op) {
    case BinaryOp::Add:
      return broadcast(bc, a, b, out, [] __device__(float x, float y) { return x + y; });
    case BinaryOp::Sub:
      return broadcast(bc, a, b, out, [] __device__(float x, float y) { return x - y; });
    case BinaryOp::Mul:
      return broadcast(bc, a, b, out, [] __device__(float x, float y) { return x * y; });
    case BinaryOp::Div:
      return broadcast(bc, a, b, out, [] __device__(float x, float y) { return x / y; });
    case BinaryOp::Equal:
      return broadcast(bc, a, b, out,
                       [] __device__(float x, float y) { return x == y ? 1.f : 0.f; });
    case BinaryOp::ReluGrad:  // g where y > 0, else +0 (the CPU's bit mask gives +0 too)
      return broadcast(bc, a, b, out,
                       [] __device__(float g, float y) { return y > 0.f ? g : 0.f; });
    case BinaryOp::SigmoidGrad:
      return broadcast(bc, a, b, out, [] __device__(float g, float y) { return g * y * (1 - y); });
    case BinaryOp::TanhGrad:
      return broadcast(bc, a, b, out, [] __device__(float g, float y) { return g * (1 - y * y); });
    case BinaryOp::Maximum:  // NaN from either side
      return broadcast(bc, a, b, out,
                       [] __device__(float x, float y) { return x > y || x != x ? x : y; });
    case BinaryOp::Minimum:
      return broadcast(bc, a, b, out,
                       [] __device__(float x, float y) { return x < y || x != x ? x : y; });
    case BinaryOp::GeluGrad:
      return broadcast(bc, a, b, out,
                       [] __device__(float g, float x) { return act::gelu_grad(g, x); });
    case BinaryOp::GeluTanhGrad:
      return broadcast(bc, a, b, out,
                       [] __device__(float g, float x) { return act::gelu_tanh_grad(g, x); });
    case BinaryOp::SiluGrad:
      return broadcast(bc, a, b, out, [] __device__(float g, float x) {
        return act::silu_grad_of(g, x, 1.f / (1.f + expf(-x)));
      });
    case BinaryOp::BceLogits:
      return broadcast(bc, a, b, out, [] __device__(float x, float t) {
        return act::bce_logits_of(x, t, log1pf(expf(-fabsf(x))));
      });
    case BinaryOp::BceLogitsGrad:
      return broadcast(bc, a, b, out, [] __device__(float x, float t) {
        return act::bce_logits_grad_of(t, 1.f / (1.f + expf(-x)));
      });
  }
}

namespace {

// a, b [T] under bc -> out [bc.n] = [a op b] (float16 compared as float)
template <class T>
__global__ void compare_kernel(CompareOp op, Broadcast bc, const T* a, const T* b, float* out) {
  for (int64_t i = thread_index(); i < bc.n; i += thread_count()) {
    const BroadcastOffsets o = broadcast_offsets(bc, i);
    using V = std::conditional_t<std::is_same_v<T, __half>, float, T>;
    const V x = convert<V>(a[o.a]), y = convert<V>(b[o.b]);
    bool r = false;
    switch (op) {
      case CompareOp::Eq: r = x == y; break;
      case CompareOp::Ne: r = x != y; break;
      case CompareOp::Lt: r = x < y; break;
      case CompareOp::Le: r = x <= y; break;
      case CompareOp::Gt: r = x > y; break;
      case CompareOp::Ge: r = x >= y; break;
    }
    out[i] = r ? 1.f : 0.f;
  }
}

}  // namespace

// a, b [dtype] under bc -> out [bc.n] float32
void compare(CompareOp op, DType t, const Broadcast& bc, const void* a, const void* b, float* out) {
  if (bc.n == 0) return;
  typed(t, [&](auto tag) {
    using T = decltype(tag);
    compare_kernel<<<blocks_for(bc.n), kThreads, 0, stream()>>>(
        op, bc, static_cast<const T*>(a), static_cast<const T*>(b), out);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace minidl::cuda

// ---- shape ops (issue 22) ----
namespace minidl::cuda {
namespace {

// dst[map] <- src[map], one element a thread; T an integer of the element's size
template <class T>
__global__ void strided_copy_kernel(int64_t n, StridedCopy m, const T* src, T* dst) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    int64_t rem = i, so = 0, dof = 0;
    for (int d = m.nd - 1; d >= 0; --d) {
      const int64_t idx = rem % m.size[d];
      rem /= m.size[d];
      so += idx * m.src_stride[d];
      dof += idx * m.dst_stride[d];
    }
    dst[dof] = src[so];
  }
}

}  // namespace

// dst[map] <- src[map]
void strided_copy(size_t es, const StridedCopy& m, const void* src, void* dst) {
  int64_t n = 1;
  for (int d = 0; d < m.nd; ++d) n *= m.size[d];
  if (n == 0) return;
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    strided_copy_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(
        n, m, static_cast<const T*>(src), static_cast<T*>(dst));
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

}  // namespace minidl::cuda
