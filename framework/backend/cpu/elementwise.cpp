// CPU kernels for the table's elementwise and dtype entries: unary, binary,
// dropout, fill, cast, strided_copy (see backend/kernels.h). One templated loop
// serves every operator; the switch on the enum sits outside it.
#include <algorithm>
#include <bit>
#include <cmath>
#include <type_traits>

#include "framework/backend/activations.h"
#include "framework/backend/cpu/cpu.h"
#include "framework/backend/cpu/dispatch.h"
#include "framework/backend/cpu/vec_math.h"
#include "framework/backend/float_to_int.h"
#include "framework/backend/philox.h"

namespace minidl::cpu {
namespace {

// `if (parallel : ...)`: a plain `if` on a combined `parallel for simd`
// applies to its simd part too (OpenMP 5.0), and GCC then left every loop
// of 65,536 elements and fewer unvectorized: GELU on 16,384 floats took 225
// us, not 25, ReLU 15 us, not 2 (a probe of gelu, relu and mul at 1K-128K
// elements, one thread, 2026-11-29). So in loss.cpp and below.
template <class F>
MINIDL_CLONES void map(int64_t n, const float* x, float* out, F f) {
#pragma omp parallel for simd if (parallel : n > 65536)
  for (int64_t i = 0; i < n; ++i) out[i] = f(x[i]);
}

// out [bc.size] = f(a, b) under the coalesced index map; the inner dim has
// stride 0 or 1 on each side. T: float32, or any dtype for comparisons.
template <class T, class F>
MINIDL_CLONES void broadcast_map(const Broadcast& bc, const T* pa, const T* pb, float* po, F f) {
  const int64_t n = bc.n;
  if (n == 0) return;
  if (bc.nd == 0) {
#pragma omp parallel for simd if (parallel : n > 65536)
    for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
    return;
  }
  const int nd = bc.nd;
  const int64_t inner = bc.size[nd - 1], ia = bc.stride_a[nd - 1], ib = bc.stride_b[nd - 1];
  const int64_t rows = n / inner;
#pragma omp parallel for if (n > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t oa = 0, ob = 0, rem = r;
    for (int d = nd - 2; d >= 0; --d) {
      int64_t idx = rem % bc.size[d];
      rem /= bc.size[d];
      oa += idx * bc.stride_a[d];
      ob += idx * bc.stride_b[d];
    }
    float* o = po + r * inner;
    const T *xa = pa + oa, *xb = pb + ob;
    if (ia == 1 && ib == 1) {
      for (int64_t i = 0; i < inner; ++i) o[i] = f(xa[i], xb[i]);
    } else if (ia == 1) {
      for (int64_t i = 0; i < inner; ++i) o[i] = f(xa[i], xb[0]);
    } else if (ib == 1) {
      for (int64_t i = 0; i < inner; ++i) o[i] = f(xa[0], xb[i]);
    } else {
      for (int64_t i = 0; i < inner; ++i) o[i] = f(xa[0], xb[0]);
    }
  }
}

template <class To, class From>
To convert(From v) {
  if constexpr (std::is_same_v<From, Half>) return convert<To>(half_to_float(v));
  else if constexpr (std::is_same_v<To, Half>) return float_to_half(static_cast<float>(v));
  else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>)
    return float_to_int<To>(v);  // NaN -> 0, out of range -> max/min, as CUDA's cvt.sat
  else return static_cast<To>(v);
}

// Calls f(T*) with dst typed by dtype.
template <class F>
void typed(DType t, void* p, F f) {
  switch (t) {
    case kFloat32: return f(static_cast<float*>(p));
    case kFloat16: return f(static_cast<Half*>(p));
    case kInt32: return f(static_cast<int32_t*>(p));
    case kInt64: return f(static_cast<int64_t*>(p));
  }
}

}  // namespace

namespace {

// m(f) with the op's f(v), a lambda of its own for each op (so that the loop m
// runs it in vectorizes)
template <class M>
void with_unary(UnaryOp op, float s, M m) {
  switch (op) {
    case UnaryOp::Neg: return m([](float v) { return -v; });
    case UnaryOp::Exp: return m([](float v) { return vec::exp(v); });
    case UnaryOp::Log: return m([](float v) { return vec::log(v); });
    case UnaryOp::Sqrt: return m([](float v) { return std::sqrt(v); });
    // NaN stays NaN (PyTorch's relu); written as "below zero" so it vectorizes
    case UnaryOp::Relu: return m([](float v) { return v < 0.f ? 0.f : v; });
    case UnaryOp::Sigmoid: return m([](float v) { return vec::sigmoid(v); });
    case UnaryOp::Tanh: return m([](float v) { return vec::tanh(v); });
    // x^2 and its gradient by multiplication (vectorizes; std::pow does not)
    case UnaryOp::Pow:
      if (s == 2.f) return m([](float v) { return v * v; });
      return m([s](float v) { return std::pow(v, s); });
    case UnaryOp::PowGrad:
      if (s == 2.f) return m([](float v) { return 2.f * v; });
      return m([s](float v) { return s * std::pow(v, s - 1); });
    case UnaryOp::Abs: return m([](float v) { return std::fabs(v); });
    case UnaryOp::Erf: return m([](float v) { return std::erf(v); });
    case UnaryOp::Expm1: return m([](float v) { return std::expm1(v); });
    case UnaryOp::Log1p: return m([](float v) { return std::log1p(v); });
    case UnaryOp::Rsqrt: return m([](float v) { return 1.f / std::sqrt(v); });
    case UnaryOp::Sin: return m([](float v) { return std::sin(v); });
    case UnaryOp::Cos: return m([](float v) { return std::cos(v); });
    case UnaryOp::LeakyRelu: return m([s](float v) { return act::leaky_relu(v, s); });
    case UnaryOp::LeakyReluSlope: return m([s](float v) { return act::leaky_relu_slope(v, s); });
    case UnaryOp::Gelu: return m([](float v) { return v * vec::normal_cdf(v); });
    case UnaryOp::GeluTanh:
      return m([](float v) { return act::gelu_tanh_of(v, vec::tanh(act::gelu_tanh_arg(v))); });
    case UnaryOp::Silu: return m([](float v) { return act::silu_of(v, vec::sigmoid(v)); });
    case UnaryOp::Elu:  // expm1 fed min(x, 0): no overflow on the unused side
      return m(
          [s](float v) { return act::elu_of(v, s, vec::expm1(vec::select(v < 0.f, v, 0.f))); });
    case UnaryOp::EluSlope: return m([s](float v) { return act::elu_slope_of(v, s, vec::exp(v)); });
    case UnaryOp::Softplus:
      return m([s](float z) {
        return act::softplus_of(z, s, vec::log1p_unit(vec::exp_or_zero(-std::fabs(z))));
      });
    case UnaryOp::SoftplusSlope:
      return m([s](float z) { return act::softplus_slope_of(z, s, vec::exp(-z)); });
    case UnaryOp::SmoothL1: return m([s](float d) { return act::smooth_l1(d, s); });
    case UnaryOp::SmoothL1Grad: return m([s](float d) { return act::smooth_l1_grad(d, s); });
  }
}

}  // namespace

// x [n] -> out [n]
void unary(UnaryOp op, float s, int64_t n, const float* x, float* out) {
  with_unary(op, s, [&](auto f) { map(n, x, out, f); });
}

// g, x [n] -> out [n] = g f(x)
void unary_grad(UnaryOp op, float s, int64_t n, const float* g, const float* x, float* out) {
  with_unary(op, s, [&](auto f) {
    broadcast_map(Broadcast{.n = n}, g, x, out, [f](float gv, float v) { return gv * f(v); });
  });
}

// x [n] -> out [n]: whole Philox blocks of four elements in one vectorized
// loop, then the last partial block
MINIDL_CLONES void dropout(uint64_t seed, uint64_t offset, float keep, int64_t n, const float* x,
                           float* out) {
  const float scale = 1.f / keep;
  const int64_t whole = n / 4;
#pragma omp parallel for simd if (parallel : n > 65536)
  for (int64_t b = 0; b < whole; ++b) {
    const philox::Words r = philox::block_words(seed, offset + static_cast<uint64_t>(b));
    for (int j = 0; j < 4; ++j) out[4 * b + j] = x[4 * b + j] * philox::keep_scale(r.w[j], keep, scale);
  }
  if (n % 4 == 0) return;
  const philox::Words r = philox::block_words(seed, offset + static_cast<uint64_t>(whole));
  for (int64_t i = 4 * whole; i < n; ++i) out[i] = x[i] * philox::keep_scale(r.w[i % 4], keep, scale);
}

// a, b -> out under bc
void binary(BinaryOp op, const Broadcast& bc, const float* a, const float* b, float* out) {
  switch (op) {
    case BinaryOp::Add: return broadcast_map(bc, a, b, out, [](float x, float y) { return x + y; });
    case BinaryOp::Sub: return broadcast_map(bc, a, b, out, [](float x, float y) { return x - y; });
    case BinaryOp::Mul: return broadcast_map(bc, a, b, out, [](float x, float y) { return x * y; });
    case BinaryOp::Div: return broadcast_map(bc, a, b, out, [](float x, float y) { return x / y; });
    case BinaryOp::Equal:
      return broadcast_map(bc, a, b, out, [](float x, float y) { return x == y ? 1.f : 0.f; });
    case BinaryOp::ReluGrad:  // g where y > 0, else 0: a bit mask, no branch to mispredict
      return broadcast_map(bc, a, b, out, [](float gv, float yv) {
        uint32_t keep = 0u - static_cast<uint32_t>(yv > 0.f);
        return std::bit_cast<float>(std::bit_cast<uint32_t>(gv) & keep);
      });
    case BinaryOp::SigmoidGrad:
      return broadcast_map(bc, a, b, out, [](float gv, float y) { return gv * y * (1 - y); });
    case BinaryOp::TanhGrad:
      return broadcast_map(bc, a, b, out, [](float gv, float y) { return gv * (1 - y * y); });
    case BinaryOp::Maximum:  // NaN from either side
      return broadcast_map(bc, a, b, out, [](float x, float y) { return x > y || x != x ? x : y; });
    case BinaryOp::Minimum:
      return broadcast_map(bc, a, b, out, [](float x, float y) { return x < y || x != x ? x : y; });
    case BinaryOp::GeluGrad:
      return broadcast_map(bc, a, b, out, [](float g, float x) { return g * vec::gelu_slope(x); });
    case BinaryOp::GeluTanhGrad:
      return broadcast_map(bc, a, b, out, [](float g, float x) {
        return act::gelu_tanh_grad_of(g, x, vec::tanh(act::gelu_tanh_arg(x)));
      });
    case BinaryOp::SiluGrad:
      return broadcast_map(bc, a, b, out, [](float g, float x) {
        return act::silu_grad_of(g, x, vec::sigmoid(x));
      });
    case BinaryOp::BceLogits:
      return broadcast_map(bc, a, b, out, [](float x, float t) {
        return act::bce_logits_of(x, t, vec::log1p_unit(vec::exp_or_zero(-std::fabs(x))));
      });
    case BinaryOp::BceLogitsGrad:
      return broadcast_map(bc, a, b, out, [](float x, float t) {
        return act::bce_logits_grad_of(t, vec::sigmoid(x));
      });
  }
}

namespace {

// a, b of T under bc -> out = [a op b]; T's own comparison (Half through float)
template <class T>
void compare_as(CompareOp op, const Broadcast& bc, const T* a, const T* b, float* out) {
  using V = std::conditional_t<std::is_same_v<T, Half>, float, T>;
  auto run = [&](auto cmp) {  // rows, as the float ops (not an index division per element)
    broadcast_map(bc, a, b, out,
                  [cmp](T x, T y) { return cmp(convert<V>(x), convert<V>(y)) ? 1.f : 0.f; });
  };
  switch (op) {
    case CompareOp::Eq: return run([](auto x, auto y) { return x == y; });
    case CompareOp::Ne: return run([](auto x, auto y) { return x != y; });
    case CompareOp::Lt: return run([](auto x, auto y) { return x < y; });
    case CompareOp::Le: return run([](auto x, auto y) { return x <= y; });
    case CompareOp::Gt: return run([](auto x, auto y) { return x > y; });
    case CompareOp::Ge: return run([](auto x, auto y) { return x >= y; });
  }
}

}  // namespace

// a, b [dtype] under bc -> out [bc.n] float32
void compare(CompareOp op, DType t, const Broadcast& bc, const void* a, const void* b, float* out) {
  typed(t, const_cast<void*>(a), [&](auto* pa) {
    using T = std::remove_pointer_t<decltype(pa)>;
    compare_as<T>(op, bc, pa, static_cast<const T*>(b), out);
  });
}

// dst [n] = start + i * step (in double), converted to dtype
void fill(DType t, int64_t n, double start, double step, void* dst) {
  typed(t, dst, [&](auto* p) {
    using T = std::remove_pointer_t<decltype(p)>;
    if (step == 0) return std::fill(p, p + n, convert<T>(start));
    for (int64_t i = 0; i < n; ++i) p[i] = convert<T>(start + static_cast<double>(i) * step);
  });
}

// x [n] += 1
void increment(int64_t n, int64_t* x) {
  for (int64_t i = 0; i < n; ++i) ++x[i];
}

// src [n] of `from` -> dst [n] of `to`
void cast(DType from, DType to, int64_t n, const void* src, void* dst) {
  typed(from, const_cast<void*>(src), [&](auto* s) {
    typed(to, dst, [&](auto* d) {
      using T = std::remove_pointer_t<decltype(d)>;
      for (int64_t i = 0; i < n; ++i) d[i] = convert<T>(s[i]);
    });
  });
}

}  // namespace minidl::cpu

// ---- shape ops (issue 22) ----
namespace minidl::cpu {

// dst[map] <- src[map]: the last dim as an inner loop of T (an integer of the element's size)
void strided_copy(size_t es, const StridedCopy& m, const void* src, void* dst) {
  int64_t n = 1;
  for (int d = 0; d < m.nd; ++d) n *= m.size[d];
  if (n == 0) return;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* s = static_cast<const T*>(src);
    T* o = static_cast<T*>(dst);
    if (m.nd == 0) {
      o[0] = s[0];
      return;
    }
    const int nd = m.nd;
    const int64_t inner = m.size[nd - 1], si = m.src_stride[nd - 1], di = m.dst_stride[nd - 1];
    const int64_t rows = n / inner;
#pragma omp parallel for if (n > 65536)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t so = 0, dof = 0, rem = r;
      for (int d = nd - 2; d >= 0; --d) {
        const int64_t idx = rem % m.size[d];
        rem /= m.size[d];
        so += idx * m.src_stride[d];
        dof += idx * m.dst_stride[d];
      }
      if (di == 1 && si == 1) std::copy(s + so, s + so + inner, o + dof);
      else if (di == 1 && si == 0) std::fill(o + dof, o + dof + inner, s[so]);  // expand's
      else
        for (int64_t i = 0; i < inner; ++i) o[dof + i * di] = s[so + i * si];
    }
  };
  switch (es) {
    case 2:
      return run(uint16_t{});
    case 4:
      return run(uint32_t{});
    case 8:
      return run(uint64_t{});
  }
}

}  // namespace minidl::cpu
