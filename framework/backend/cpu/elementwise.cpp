// CPU kernels for the table's elementwise, reduction, softmax, label and
// dtype entries (see backend/kernels.h). One templated loop serves every
// operator; the switch on the enum sits outside it.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "framework/backend/cpu/cpu.h"
#include "framework/backend/cpu/dispatch.h"
#include "framework/backend/philox.h"

namespace minidl::cpu {
namespace {

template <class F>
MINIDL_CLONES void map(int64_t n, const float* x, float* out, F f) {
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) out[i] = f(x[i]);
}

// out [bc.size] = f(a, b) under the coalesced index map; the inner dim has
// stride 0 or 1 on each side.
template <class F>
MINIDL_CLONES void broadcast_map(const Broadcast& bc, const float* pa, const float* pb, float* po, F f) {
  const int64_t n = bc.n;
  if (n == 0) return;
  if (bc.nd == 0) {
#pragma omp parallel for simd if (n > 65536)
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
    const float *xa = pa + oa, *xb = pb + ob;
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

template <class L>
int64_t label_at(const void* labels, int64_t i) {
  return static_cast<int64_t>(static_cast<const L*>(labels)[i]);
}
int64_t label(const void* labels, DType t, int64_t i) {
  return t == kInt64 ? label_at<int64_t>(labels, i) : label_at<int32_t>(labels, i);
}

template <class To, class From>
To convert(From v) {
  if constexpr (std::is_same_v<From, Half>) return convert<To>(half_to_float(v));
  else if constexpr (std::is_same_v<To, Half>) return float_to_half(static_cast<float>(v));
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

// x [n] -> out [n]
void unary(UnaryOp op, float s, int64_t n, const float* x, float* out) {
  switch (op) {
    case UnaryOp::Neg: return map(n, x, out, [](float v) { return -v; });
    case UnaryOp::Exp: return map(n, x, out, [](float v) { return std::exp(v); });
    case UnaryOp::Log: return map(n, x, out, [](float v) { return std::log(v); });
    case UnaryOp::Sqrt: return map(n, x, out, [](float v) { return std::sqrt(v); });
    // NaN stays NaN (PyTorch's relu); written as "below zero" so it vectorizes
    case UnaryOp::Relu: return map(n, x, out, [](float v) { return v < 0.f ? 0.f : v; });
    case UnaryOp::Sigmoid: return map(n, x, out, [](float v) { return 1.f / (1.f + std::exp(-v)); });
    case UnaryOp::Tanh: return map(n, x, out, [](float v) { return std::tanh(v); });
    case UnaryOp::Pow: return map(n, x, out, [s](float v) { return std::pow(v, s); });
    case UnaryOp::PowGrad: return map(n, x, out, [s](float v) { return s * std::pow(v, s - 1); });
  }
}

// x [n] -> out [n]: whole Philox blocks of four elements in one vectorized
// loop, then the last partial block
MINIDL_CLONES void dropout(uint64_t seed, uint64_t offset, float keep, int64_t n, const float* x,
                            float* out) {
  const float scale = 1.f / keep;
  const int64_t whole = n / 4;
#pragma omp parallel for simd if (n > 65536)
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
  }
}

// x [outer, R, inner] -> out [outer, inner]
void reduce(ReduceOp op, int64_t outer, int64_t r, int64_t inner, const float* x, float* out) {
  auto fold = [&](float init, auto f) {
    std::fill(out, out + outer * inner, init);
#pragma omp parallel for if (outer * r * inner > 65536 && outer > 1)
    for (int64_t o = 0; o < outer; ++o) {
      float* dst = out + o * inner;
      for (int64_t k = 0; k < r; ++k) {
        const float* src = x + (o * r + k) * inner;
        for (int64_t i = 0; i < inner; ++i) dst[i] = f(dst[i], src[i]);
      }
    }
  };
  if (op == ReduceOp::Sum) return fold(0.f, [](float a, float b) { return a + b; });
  fold(-std::numeric_limits<float>::infinity(),
       [](float a, float b) { return b > a || b != b ? b : a; });
}

// x [rows, cols] -> out [rows]
void argmax(int64_t rows, int64_t cols, const float* x, int64_t* out) {
  for (int64_t i = 0; i < rows; ++i)
    out[i] = std::max_element(x + i * cols, x + (i + 1) * cols) - (x + i * cols);
}

// x [outer, D, inner] -> y
void softmax(bool log, int64_t outer, int64_t d, int64_t inner, const float* px, float* py) {
#pragma omp parallel for collapse(2) if (outer * d * inner > 65536)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const float* xs = px + o * d * inner + i;
      float* ys = py + o * d * inner + i;
      float m = xs[0];
      for (int64_t k = 1; k < d; ++k) m = std::max(m, xs[k * inner]);
      double s = 0;
      for (int64_t k = 0; k < d; ++k) s += std::exp(static_cast<double>(xs[k * inner] - m));
      // (x - m) - log(s), not x - (m + log(s)): m + log(s) rounds to m's
      // precision (0.001 at 1e4) and would shift every output by that error.
      const float log_s = static_cast<float>(std::log(s));
      for (int64_t k = 0; k < d; ++k) {
        float v = (xs[k * inner] - m) - log_s;
        ys[k * inner] = log ? v : std::exp(v);
      }
    }
}

// y, gy [outer, D, inner] -> gx. Softmax's sum(gy * y) is taken over sum(y)
// (1 up to the rounding of y): the float32 probabilities' own errors then move
// each gx[k] by its own relative size only, where a near-one probability's
// rounding would otherwise shift every gx of the row by a few 1e-8.
void softmax_backward(bool log, int64_t outer, int64_t d, int64_t inner, const float* y,
                      const float* gy, float* gx) {
#pragma omp parallel for collapse(2) if (outer * d * inner > 65536)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t first = o * d * inner + i;
      const float *ys = y + first, *gs = gy + first;
      float* out = gx + first;
      double sum_g = 0, sum_gy = 0, sum_y = 0;
      for (int64_t k = 0; k < d; ++k) {
        const double g = gs[k * inner], yk = ys[k * inner];
        sum_g += g;
        sum_gy += g * yk;
        sum_y += yk;
      }
      const double dot = sum_gy / sum_y;
      for (int64_t k = 0; k < d; ++k) {
        const int64_t j = k * inner;
        out[j] = log ? static_cast<float>(gs[j] - std::exp(double(ys[j])) * sum_g)
                     : static_cast<float>(ys[j] * (gs[j] - dot));
      }
    }
}

// x [N, C] -> out [N]
void gather(int64_t n, int64_t c, const float* x, const void* labels, DType lt, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i * c + label(labels, lt, i)];
}

// g [N] -> gx [N, C]
void gather_backward(int64_t n, int64_t c, const float* g, const void* labels, DType lt,
                     float* gx) {
  std::fill(gx, gx + n * c, 0.f);
  for (int64_t i = 0; i < n; ++i) gx[i * c + label(labels, lt, i)] = g[i];
}

// logits [N, C] -> loss [1], probs [N, C] or null
void cross_entropy_forward(int64_t N, int64_t C, const float* px, const void* labels, DType lt,
                           float* loss, float* pp) {
  double total = 0;
#pragma omp parallel for reduction(+ : total) if (N * C > 65536)
  for (int64_t i = 0; i < N; ++i) {
    const float* row = px + i * C;
    float m = row[0];
    for (int64_t c = 1; c < C; ++c) m = std::max(m, row[c]);
    double s = 0;
    for (int64_t c = 0; c < C; ++c) s += std::exp(static_cast<double>(row[c] - m));
    const double lse = m + std::log(s);
    total += lse - row[label(labels, lt, i)];
    if (pp) {
      const float log_s = static_cast<float>(std::log(s));  // exact for large logits too
      for (int64_t c = 0; c < C; ++c) pp[i * C + c] = std::exp((row[c] - m) - log_s);
    }
  }
  loss[0] = static_cast<float>(total / N);
}

// probs [N, C] -> g / N * (probs - onehot), in place
void cross_entropy_backward(int64_t N, int64_t C, const void* labels, DType lt, const float* g,
                            float* gp) {
  const float scale = static_cast<float>(static_cast<double>(g[0]) / N);
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t c = 0; c < C; ++c) gp[i * C + c] *= scale;
    gp[i * C + label(labels, lt, i)] -= scale;
  }
}

// dst [n] = value, converted to dtype
void fill(DType t, int64_t n, double value, void* dst) {
  typed(t, dst, [&](auto* p) {
    using T = std::remove_pointer_t<decltype(p)>;
    std::fill(p, p + n, convert<T>(value));
  });
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

// dst [shape] contiguous <- src with element strides
void permute(size_t es, int nd, const int64_t* shape, const int64_t* strides, const void* src,
             void* dst) {
  int64_t n = 1;
  for (int d = 0; d < nd; ++d) n *= shape[d];
  const char* s = static_cast<const char*>(src);
  char* o = static_cast<char*>(dst);
  std::vector<int64_t> idx(nd, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int d = 0; d < nd; ++d) off += idx[d] * strides[d];
    std::memcpy(o + i * es, s + off * es, es);
    for (int d = nd - 1; d >= 0 && ++idx[d] == shape[d]; --d) idx[d] = 0;
  }
}

}  // namespace minidl::cpu
