// Elementwise ops: broadcasting binary ops and unary maps, each with its
// backward beside it; the loops are the device's unary and binary kernels.
#include <cassert>
#include <cmath>
#include <cstdint>
#include <optional>

#include "framework/ops.h"
#include "framework/ops/util.h"
#include "framework/random.h"

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

// bc's dims from out's, with a's and b's element strides ta, tb per dim:
// dims of size 1 dropped, neighbours contiguous on both sides merged. False
// where more than kMaxDims remain.
static bool merge_dims(const Shape& out, const std::vector<int64_t>& ta,
                       const std::vector<int64_t>& tb, Broadcast& bc) {
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    const int last = bc.nd - 1;
    if (bc.nd > 0 && bc.stride_a[last] == ta[d] * out[d] && bc.stride_b[last] == tb[d] * out[d]) {
      bc.size[last] *= out[d], bc.stride_a[last] = ta[d], bc.stride_b[last] = tb[d];
      continue;
    }
    if (bc.nd == kMaxDims) return false;
    bc.size[bc.nd] = out[d], bc.stride_a[bc.nd] = ta[d], bc.stride_b[bc.nd] = tb[d], ++bc.nd;
  }
  return true;
}

// The index map of a broadcast from a and b to out_shape. Dims are coalesced
// so the kernel's inner loop has stride 0 or 1 on each side.
Broadcast broadcast_index(const Shape& a, const Shape& b, const Shape& out_shape,
                          const char* name) {
  Broadcast bc;
  bc.n = 1;
  for (int64_t s : out_shape) bc.n *= s;
  if (bc.n == 0 || a == b) return bc;
  // Per-dim element strides (0 where broadcast), then merge dims that are
  // contiguous on both sides.
  const size_t nd = out_shape.size();
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
  MINIDL_CHECK(merge_dims(out_shape, strides_of(a), strides_of(b), bc), name, ": shapes ", a,
               " and ", b, " broadcast over more than ", kMaxDims, " separate dims");
  return bc;
}

// out = op(a, b) over the broadcast shape
Tensor broadcast_map(const Tensor& a, const Tensor& b, const char* name, BinaryOp op) {
  const Kernels& k = kernels_for(name, a, {&b});
  Shape out_shape = broadcast_shape(a.shape(), b.shape(), name);
  Tensor out = empty_like(a, out_shape);
  Broadcast bc = broadcast_index(a.shape(), b.shape(), out_shape, name);
  k.binary(op, bc, dense(a).data_ptr<float>(), dense(b).data_ptr<float>(), out.data_ptr<float>());
  return out;
}

void add_into(const Tensor& acc, const Tensor& g) {
  assert(acc.is_contiguous() && acc.shape() == g.shape());
  Broadcast bc;  // acc's strides as stride_a, g's as stride_b, dims merged
  bc.n = acc.numel();
  const Shape& shape = acc.shape();
  const std::vector<int64_t> gs = g.strides();
  std::vector<int64_t> as(shape.size());
  for (size_t d = shape.size(), s = 1; d-- > 0; s *= static_cast<size_t>(shape[d]))
    as[d] = static_cast<int64_t>(s);
  bool strided = !g.is_contiguous() && merge_dims(shape, as, gs, bc);
  if (strided && bc.nd > 0 && bc.stride_b[bc.nd - 1] > 1) strided = false;
  const Tensor b = strided ? g : g.contiguous();
  if (!strided) bc = Broadcast{}, bc.n = acc.numel();
  float* a = acc.data_ptr<float>();
  const auto* from = reinterpret_cast<const float*>(view_ptr(b));
  kernels(acc.device()).binary(BinaryOp::Add, bc, a, from, a);
}

Tensor unary_map(const Tensor& x, UnaryOp op, float s) {
  Tensor out = empty_like(x, x.shape());
  kernels(x.device()).unary(op, s, x.numel(), dense(x).data_ptr<float>(), out.data_ptr<float>());
  return out;
}

Tensor unary_grad_map(const Tensor& g, const Tensor& x, UnaryOp op, float s) {
  MINIDL_CHECK(g.shape() == x.shape() && g.dtype() == kFloat32 && x.dtype() == kFloat32,
               "unary_grad_map: expected a float32 gradient of x's shape ", x.shape(), ", got ",
               dtype_name(g.dtype()), " ", g.shape());
  Tensor out = empty_like(x, x.shape());
  kernels(x.device()).unary_grad(op, s, x.numel(), dense(g).data_ptr<float>(),
                                 dense(x).data_ptr<float>(), out.data_ptr<float>());
  return out;
}

namespace {

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
  return Tensor::full({}, value, is_floating(like.dtype()) ? like.dtype() : kFloat32, like.device());
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
  Tensor out = broadcast_map(a, b, "add", BinaryOp::Add);
  Shape sa = a.shape(), sb = b.shape();
  return record(out, "add", {a, b}, [sa, sb](const Tensor& g) {
    return std::vector<Tensor>{sum_to(g, sa), sum_to(g, sb)};
  });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  MINIDL_HALF_BINARY(sub, a, b);
  Tensor out = broadcast_map(a, b, "sub", BinaryOp::Sub);
  Shape sa = a.shape(), sb = b.shape();
  return record(out, "sub", {a, b}, [sa, sb](const Tensor& g) {
    return std::vector<Tensor>{sum_to(g, sa), sum_to(neg(g), sb)};
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  MINIDL_HALF_BINARY(mul, a, b);
  Tensor out = broadcast_map(a, b, "mul", BinaryOp::Mul);
  return record(out, "mul", {a, b}, [a, b](const Tensor& g) {
    return std::vector<Tensor>{a.requires_grad() ? sum_to(mul(g, b), a.shape()) : Tensor(),
                               b.requires_grad() ? sum_to(mul(g, a), b.shape()) : Tensor()};
  });
}

Tensor div(const Tensor& a, const Tensor& b) {
  MINIDL_HALF_BINARY(div, a, b);
  Tensor out = broadcast_map(a, b, "div", BinaryOp::Div);
  return record(out, "div", {a, b}, [a, b, y = out.detach()](const Tensor& g) {
    // d(a/b)/da = 1/b, d(a/b)/db = -out/b
    Tensor ga = a.requires_grad() ? sum_to(div(g, b), a.shape()) : Tensor();
    Tensor gb = b.requires_grad() ? sum_to(neg(mul(g, div(y, b))), b.shape()) : Tensor();
    return std::vector<Tensor>{ga, gb};
  });
}

Tensor neg(const Tensor& x) {
  MINIDL_HALF_UNARY(neg, x);
  Tensor out = unary_map(x, UnaryOp::Neg);
  return record(out, "neg", {x}, [](const Tensor& g) { return std::vector<Tensor>{neg(g)}; });
}

Tensor exp(const Tensor& x) {
  MINIDL_HALF_UNARY(exp, x);
  Tensor out = unary_map(x, UnaryOp::Exp);
  return record(out, "exp", {x}, [y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{mul(g, y)};
  });
}

Tensor log(const Tensor& x) {
  MINIDL_HALF_UNARY(log, x);
  Tensor out = unary_map(x, UnaryOp::Log);
  return record(out, "log", {x}, [x](const Tensor& g) { return std::vector<Tensor>{div(g, x)}; });
}

Tensor pow(const Tensor& x, double e) {
  MINIDL_HALF_UNARY(pow, x, e);
  float fe = static_cast<float>(e);
  Tensor out = unary_map(x, UnaryOp::Pow, fe);
  return record(out, "pow", {x}, [x, fe](const Tensor& g) {
    return std::vector<Tensor>{unary_grad_map(g, x, UnaryOp::PowGrad, fe)};
  });
}

Tensor sqrt(const Tensor& x) {
  MINIDL_HALF_UNARY(sqrt, x);
  Tensor out = unary_map(x, UnaryOp::Sqrt);
  return record(out, "sqrt", {x}, [y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{div(g, mul(y, scalar_like(2, g)))};
  });
}

Tensor relu(const Tensor& x) {
  MINIDL_HALF_UNARY(relu, x);
  Tensor out = unary_map(x, UnaryOp::Relu);
  return record(out, "relu", {x}, [y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{broadcast_map(g, y, "relu_backward", BinaryOp::ReluGrad)};
  });
}

Tensor sigmoid(const Tensor& x) {
  MINIDL_HALF_UNARY(sigmoid, x);
  Tensor out = unary_map(x, UnaryOp::Sigmoid);
  return record(out, "sigmoid", {x}, [y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{broadcast_map(g, y, "sigmoid_backward", BinaryOp::SigmoidGrad)};
  });
}

Tensor tanh(const Tensor& x) {
  MINIDL_HALF_UNARY(tanh, x);
  Tensor out = unary_map(x, UnaryOp::Tanh);
  return record(out, "tanh", {x}, [y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{broadcast_map(g, y, "tanh_backward", BinaryOp::TanhGrad)};
  });
}

namespace {

// x -> x * mask, the mask the device's dropout kernel draws from (seed,
// offset 0); its gradient is the same masking of g (the op is linear in x).
Tensor masked(const Tensor& x, float keep, uint64_t seed) {
  Tensor out = empty_like(x, x.shape());
  kernels(x.device()).dropout(seed, 0, keep, x.numel(), dense(x).data_ptr<float>(),
                              out.data_ptr<float>());
  return record(out, "dropout", {x}, [keep, seed](const Tensor& g) {
    return std::vector<Tensor>{masked(g, keep, seed)};
  });
}

}  // namespace

// x -> mask * x / (1 - p), mask ~ Bernoulli(1 - p) from a Philox stream whose
// key is the default generator's next 64 bits
Tensor dropout(const Tensor& x, double p) {
  MINIDL_CHECK(p >= 0 && p < 1, "dropout: expected 0 <= p < 1, got ", p);
  MINIDL_CHECK(!capturing(x.device()), "dropout: cannot be captured "
               "in a CUDA graph (every replay would draw the capture's mask); run steps with "
               "dropout in training mode without a graph");
  MINIDL_HALF_UNARY(dropout, x, p);
  return masked(x, static_cast<float>(1 - p), default_generator().next_u64());
}

// ---- math (issue 22) ----

namespace {

// The dtype two compared tensors meet in (PyTorch's promotion without bool):
// a float beats an integer, float32 beats float16, int64 beats int32.
DType promoted(DType a, DType b) {
  if (a == b) return a;
  if (is_floating(a) != is_floating(b)) return is_floating(a) ? a : b;
  if (is_floating(a)) return kFloat32;
  return kInt64;
}

// a, b broadcast, any dtypes -> out float32 [a op b]; no gradient
Tensor compare(const Tensor& a, const Tensor& b, const char* name, CompareOp op) {
  const Kernels& k = kernels_for(name, a, {&b});
  const DType t = promoted(a.dtype(), b.dtype());
  Tensor ca = a.dtype() == t ? a.detach() : cast(a.detach(), t);
  Tensor cb = b.dtype() == t ? b.detach() : cast(b.detach(), t);
  Shape out_shape = broadcast_shape(a.shape(), b.shape(), name);
  Tensor out = empty_like(a, out_shape);
  k.compare(op, t, broadcast_index(a.shape(), b.shape(), out_shape, name), dense(ca).raw_data_ptr(),
            dense(cb).raw_data_ptr(), out.data_ptr<float>());
  return out;
}

// A 0-d tensor holding v to compare x with: x's dtype where v fits it
// exactly (an integer value for an integer x; int64 beyond int32's range),
// else float32.
Tensor scalar_for(double v, const Tensor& x) {
  const bool integral = std::isfinite(v) && std::abs(v) < 9.2e18 && v == std::trunc(v);
  DType t = x.dtype();
  if (!is_floating(t) && !integral)
    t = kFloat32;
  else if (t == kInt32 && std::abs(v) > 2147483647.0)
    t = kInt64;
  return Tensor::full({}, v, t, x.device());
}

// x -> 1, 0 or -1 as float32 (0 at 0 and NaN), no gradient
Tensor sign_of(const Tensor& x) {
  Tensor zero = scalar_for(0, x);
  return sub(compare(x, zero, "sign", CompareOp::Gt), compare(x, zero, "sign", CompareOp::Lt));
}

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare(a, b, "eq", CompareOp::Eq); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(a, b, "ne", CompareOp::Ne); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(a, b, "lt", CompareOp::Lt); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(a, b, "le", CompareOp::Le); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(a, b, "gt", CompareOp::Gt); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(a, b, "ge", CompareOp::Ge); }
Tensor eq(const Tensor& a, double b) { return compare(a, scalar_for(b, a), "eq", CompareOp::Eq); }
Tensor ne(const Tensor& a, double b) { return compare(a, scalar_for(b, a), "ne", CompareOp::Ne); }
Tensor lt(const Tensor& a, double b) { return compare(a, scalar_for(b, a), "lt", CompareOp::Lt); }
Tensor le(const Tensor& a, double b) { return compare(a, scalar_for(b, a), "le", CompareOp::Le); }
Tensor gt(const Tensor& a, double b) { return compare(a, scalar_for(b, a), "gt", CompareOp::Gt); }
Tensor ge(const Tensor& a, double b) { return compare(a, scalar_for(b, a), "ge", CompareOp::Ge); }

// x -> |x|; gx = g * sign(x) (0 at 0, as PyTorch)
Tensor abs(const Tensor& x) {
  MINIDL_HALF_UNARY(abs, x);
  Tensor out = unary_map(x, UnaryOp::Abs);
  return record(out, "abs", {x},
                [x](const Tensor& g) { return std::vector<Tensor>{mul(g, sign_of(x))}; });
}

// x -> erf(x); gx = g * 2/sqrt(pi) * exp(-x^2)
Tensor erf(const Tensor& x) {
  MINIDL_HALF_UNARY(erf, x);
  Tensor out = unary_map(x, UnaryOp::Erf);
  return record(out, "erf", {x}, [x](const Tensor& g) {
    return std::vector<Tensor>{mul(g, exp(mul(x, x) * -1.0) * 1.1283791670955126)};
  });
}

// x -> exp(x) - 1, accurate near 0; gx = g * (y + 1)
Tensor expm1(const Tensor& x) {
  MINIDL_HALF_UNARY(expm1, x);
  Tensor out = unary_map(x, UnaryOp::Expm1);
  return record(out, "expm1", {x}, [y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{mul(g, y + 1.0)};
  });
}

// x -> log(1 + x), accurate near 0; gx = g / (1 + x)
Tensor log1p(const Tensor& x) {
  MINIDL_HALF_UNARY(log1p, x);
  Tensor out = unary_map(x, UnaryOp::Log1p);
  return record(out, "log1p", {x},
                [x](const Tensor& g) { return std::vector<Tensor>{div(g, x + 1.0)}; });
}

// x -> 1 / sqrt(x); gx = -g * y^3 / 2
Tensor rsqrt(const Tensor& x) {
  MINIDL_HALF_UNARY(rsqrt, x);
  Tensor out = unary_map(x, UnaryOp::Rsqrt);
  return record(out, "rsqrt", {x}, [y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{mul(g, mul(mul(y, y), y) * -0.5)};
  });
}

// x -> sin(x); gx = g * cos(x)
Tensor sin(const Tensor& x) {
  MINIDL_HALF_UNARY(sin, x);
  Tensor out = unary_map(x, UnaryOp::Sin);
  return record(out, "sin", {x},
                [x](const Tensor& g) { return std::vector<Tensor>{mul(g, cos(x))}; });
}

// x -> cos(x); gx = -g * sin(x)
Tensor cos(const Tensor& x) {
  MINIDL_HALF_UNARY(cos, x);
  Tensor out = unary_map(x, UnaryOp::Cos);
  return record(out, "cos", {x},
                [x](const Tensor& g) { return std::vector<Tensor>{neg(mul(g, sin(x)))}; });
}

// x -> x limited to [min, max] (either bound may be absent; min > max gives
// max everywhere, NaN stays NaN); gx = g where min <= x <= max, else 0
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  MINIDL_CHECK(lo || hi, "clamp: at least one of min and max must be given (shape ", x.shape(),
               ")");
  MINIDL_HALF_UNARY(clamp, x, lo, hi);
  Tensor out = x.detach();
  if (lo) out = broadcast_map(out, scalar_like(*lo, x), "clamp", BinaryOp::Maximum);
  if (hi) out = broadcast_map(out, scalar_like(*hi, x), "clamp", BinaryOp::Minimum);
  return record(out, "clamp", {x}, [x, lo, hi](const Tensor& g) {
    Tensor inside = Tensor::ones({}, kFloat32, x.device());
    if (lo) inside = mul(inside, ge(x, *lo));
    if (hi) inside = mul(inside, le(x, *hi));
    return std::vector<Tensor>{mul(g, inside)};
  });
}

namespace {

// maximum (take_larger) or minimum of a, b broadcast; the gradient goes to the
// side that won, half to each on a tie, and (as in PyTorch) all of it to both
// sides where either is NaN
Tensor extremum(const Tensor& a, const Tensor& b, bool take_larger) {
  const char* name = take_larger ? "maximum" : "minimum";
  Tensor out = broadcast_map(a, b, name, take_larger ? BinaryOp::Maximum : BinaryOp::Minimum);
  return record(out, name, {a, b}, [a, b, take_larger](const Tensor& g) {
    Tensor half_tie = eq(a, b) * 0.5;
    Tensor a_lost = take_larger ? lt(a, b) : gt(a, b), b_lost = take_larger ? gt(a, b) : lt(a, b);
    Tensor ga = a.requires_grad() ? sum_to(mul(g, 1.0 - a_lost - half_tie), a.shape()) : Tensor();
    Tensor gb = b.requires_grad() ? sum_to(mul(g, 1.0 - b_lost - half_tie), b.shape()) : Tensor();
    return std::vector<Tensor>{ga, gb};
  });
}

}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) {
  MINIDL_HALF_BINARY(maximum, a, b);
  return extremum(a, b, true);
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  MINIDL_HALF_BINARY(minimum, a, b);
  return extremum(a, b, false);
}

}  // namespace minidl
