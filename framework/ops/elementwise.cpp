// Elementwise ops: broadcasting binary ops and unary maps, each with its
// backward beside it. One templated loop serves every operator.
#include <bit>
#include <cmath>
#include <cstdint>

#include "framework/ops.h"
#include "framework/ops/util.h"

namespace minidl {

Shape broadcast_shape(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    MINIDL_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", a, " and ", b,
                 " cannot broadcast (dim ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace {

// out[i] = f(a[ia(i)], b[ib(i)]) over the broadcast shape [rows, inner], where
// dims are coalesced so the inner loop has stride 0 or 1 on each side.
template <class F>
Tensor broadcast_map(const Tensor& a, const Tensor& b, const char* op, F f) {
  Shape out_shape = broadcast_shape(a.shape(), b.shape(), op);
  Tensor out = Tensor::empty(out_shape);
  const float *pa = a.data<float>(), *pb = b.data<float>();
  float* po = out.data<float>();
  const int64_t n = out.numel();
  if (n == 0) return out;
  if (a.shape() == b.shape()) {
#pragma omp parallel for simd if (n > 65536)
    for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
    return out;
  }
  // Per-dim sizes and element strides (0 where broadcast), then coalesce.
  const size_t nd = out_shape.size();
  std::vector<int64_t> size, sa, sb;
  auto strides_of = [&](const Shape& s) {
    std::vector<int64_t> st(nd, 0);
    int64_t acc = 1;
    for (size_t i = 0; i < s.size(); ++i) {
      size_t d = nd - 1 - i;
      int64_t len = s[s.size() - 1 - i];
      st[d] = len == 1 ? 0 : acc;
      acc *= len;
    }
    return st;
  };
  std::vector<int64_t> ta = strides_of(a.shape()), tb = strides_of(b.shape());
  for (size_t d = 0; d < nd; ++d) {
    if (out_shape[d] == 1) continue;
    if (!size.empty() && sa.back() == ta[d] * out_shape[d] && sb.back() == tb[d] * out_shape[d]) {
      size.back() *= out_shape[d];
      sa.back() = ta[d];
      sb.back() = tb[d];
    } else {
      size.push_back(out_shape[d]);
      sa.push_back(ta[d]);
      sb.push_back(tb[d]);
    }
  }
  if (size.empty()) {  // every dim is 1
    po[0] = f(pa[0], pb[0]);
    return out;
  }
  const int64_t inner = size.back(), ia = sa.back(), ib = sb.back(), rows = n / inner;
#pragma omp parallel for if (n > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t oa = 0, ob = 0, rem = r;
    for (int64_t d = static_cast<int64_t>(size.size()) - 2; d >= 0; --d) {
      int64_t idx = rem % size[d];
      rem /= size[d];
      oa += idx * sa[d];
      ob += idx * sb[d];
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
  return out;
}

template <class F>
Tensor unary_map(const Tensor& x, F f) {
  Tensor out = Tensor::empty(x.shape());
  const float* px = x.data<float>();
  float* po = out.data<float>();
  const int64_t n = x.numel();
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) po[i] = f(px[i]);
  return out;
}

// Float16 operands are computed in float32; the result is float16 only when
// every operand was. Integer operands are an error.
DType check_float(const char* op, const Tensor& a, const Tensor* b = nullptr) {
  bool ok = is_floating(a.dtype()) && (!b || is_floating(b->dtype()));
  MINIDL_CHECK(ok, op, ": expected float tensors, got ", dtype_name(a.dtype()),
               b ? cat(" and ", dtype_name(b->dtype())) : std::string(), " (cast with .to(kFloat32))");
  bool half = a.dtype() == kFloat16 && (!b || b->dtype() == kFloat16);
  return half ? kFloat16 : kFloat32;
}

}  // namespace

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  std::vector<int64_t> dims;
  int64_t lead = grad.dim() - static_cast<int64_t>(shape.size());
  for (int64_t d = 0; d < grad.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && grad.shape()[d] != 1)) dims.push_back(d);
  return sum(grad, dims, true).reshape(shape);
}

Tensor scalar_like(double value, const Tensor& like) {
  return Tensor::full({}, value, is_floating(like.dtype()) ? like.dtype() : kFloat32);
}

// Computes a float16 op in float32 (autograd flows through the casts).
#define MINIDL_HALF_BINARY(op, a, b)                                                 \
  if (DType t = check_float(#op, a, &b); a.dtype() != kFloat32 || b.dtype() != kFloat32) \
    return cast(op(cast(a, kFloat32), cast(b, kFloat32)), t)
#define MINIDL_HALF_UNARY(op, x, ...)            \
  if (DType t = check_float(#op, x); x.dtype() != kFloat32) \
    return cast(op(cast(x, kFloat32) __VA_OPT__(, ) __VA_ARGS__), t)

// a, b broadcast -> out
Tensor add(const Tensor& a, const Tensor& b) {
  MINIDL_HALF_BINARY(add, a, b);
  Tensor out = broadcast_map(a, b, "add", [](float x, float y) { return x + y; });
  Shape sa = a.shape(), sb = b.shape();
  return record(out, "add", {a, b}, [sa, sb](const Tensor& g) {
    return std::vector<Tensor>{sum_to(g, sa), sum_to(g, sb)};
  });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  MINIDL_HALF_BINARY(sub, a, b);
  Tensor out = broadcast_map(a, b, "sub", [](float x, float y) { return x - y; });
  Shape sa = a.shape(), sb = b.shape();
  return record(out, "sub", {a, b}, [sa, sb](const Tensor& g) {
    return std::vector<Tensor>{sum_to(g, sa), sum_to(neg(g), sb)};
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  MINIDL_HALF_BINARY(mul, a, b);
  Tensor out = broadcast_map(a, b, "mul", [](float x, float y) { return x * y; });
  return record(out, "mul", {a, b}, [a, b](const Tensor& g) {
    return std::vector<Tensor>{a.requires_grad() ? sum_to(mul(g, b), a.shape()) : Tensor(),
                               b.requires_grad() ? sum_to(mul(g, a), b.shape()) : Tensor()};
  });
}

Tensor div(const Tensor& a, const Tensor& b) {
  MINIDL_HALF_BINARY(div, a, b);
  Tensor out = broadcast_map(a, b, "div", [](float x, float y) { return x / y; });
  return record(out, "div", {a, b}, [a, b, y = out.detach()](const Tensor& g) {
    // d(a/b)/da = 1/b, d(a/b)/db = -out/b
    Tensor ga = a.requires_grad() ? sum_to(div(g, b), a.shape()) : Tensor();
    Tensor gb = b.requires_grad() ? sum_to(neg(mul(g, div(y, b))), b.shape()) : Tensor();
    return std::vector<Tensor>{ga, gb};
  });
}

Tensor neg(const Tensor& x) {
  MINIDL_HALF_UNARY(neg, x);
  Tensor out = unary_map(x, [](float v) { return -v; });
  return record(out, "neg", {x}, [](const Tensor& g) { return std::vector<Tensor>{neg(g)}; });
}

Tensor exp(const Tensor& x) {
  MINIDL_HALF_UNARY(exp, x);
  Tensor out = unary_map(x, [](float v) { return std::exp(v); });
  return record(out, "exp", {x}, [y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{mul(g, y)};
  });
}

Tensor log(const Tensor& x) {
  MINIDL_HALF_UNARY(log, x);
  Tensor out = unary_map(x, [](float v) { return std::log(v); });
  return record(out, "log", {x}, [x](const Tensor& g) { return std::vector<Tensor>{div(g, x)}; });
}

Tensor pow(const Tensor& x, double e) {
  MINIDL_HALF_UNARY(pow, x, e);
  float fe = static_cast<float>(e);
  Tensor out = unary_map(x, [fe](float v) { return std::pow(v, fe); });
  return record(out, "pow", {x}, [x, fe](const Tensor& g) {
    Tensor d = unary_map(x, [fe](float v) { return fe * std::pow(v, fe - 1); });
    return std::vector<Tensor>{mul(g, d)};
  });
}

Tensor sqrt(const Tensor& x) {
  MINIDL_HALF_UNARY(sqrt, x);
  Tensor out = unary_map(x, [](float v) { return std::sqrt(v); });
  return record(out, "sqrt", {x}, [y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{div(g, mul(y, scalar_like(2, g)))};
  });
}

Tensor relu(const Tensor& x) {
  MINIDL_HALF_UNARY(relu, x);
  Tensor out = unary_map(x, [](float v) { return v > 0 ? v : 0.f; });
  return record(out, "relu", {x}, [y = out.detach()](const Tensor& g) {
    // g where y > 0, else 0: a bit mask, so the loop has no branch to mispredict
    return std::vector<Tensor>{broadcast_map(g, y, "relu_backward", [](float gv, float yv) {
      uint32_t keep = 0u - static_cast<uint32_t>(yv > 0.f);
      return std::bit_cast<float>(std::bit_cast<uint32_t>(gv) & keep);
    })};
  });
}

Tensor sigmoid(const Tensor& x) {
  MINIDL_HALF_UNARY(sigmoid, x);
  Tensor out = unary_map(x, [](float v) { return 1.f / (1.f + std::exp(-v)); });
  return record(out, "sigmoid", {x}, [y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{broadcast_map(g, y, "sigmoid_backward",
                                             [](float gv, float y) { return gv * y * (1 - y); })};
  });
}

Tensor tanh(const Tensor& x) {
  MINIDL_HALF_UNARY(tanh, x);
  Tensor out = unary_map(x, [](float v) { return std::tanh(v); });
  return record(out, "tanh", {x}, [y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{broadcast_map(g, y, "tanh_backward",
                                             [](float gv, float y) { return gv * (1 - y * y); })};
  });
}

// x -> mask * x / (1 - p), mask ~ Bernoulli(1 - p) from the default generator
Tensor dropout(const Tensor& x, double p) {
  MINIDL_CHECK(p >= 0 && p < 1, "dropout: expected 0 <= p < 1, got ", p);
  MINIDL_HALF_UNARY(dropout, x, p);
  Tensor mask = Tensor::rand(x.shape());
  float keep = static_cast<float>(1 - p), scale = 1.f / keep;
  float* m = mask.data<float>();
  for (int64_t i = 0; i < mask.numel(); ++i) m[i] = m[i] < keep ? scale : 0.f;
  return mul(x, mask);
}

}  // namespace minidl
