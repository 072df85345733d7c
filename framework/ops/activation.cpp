// Activations: leaky ReLU, GELU, SiLU, ELU and softplus as one kernel each
// way (backend/activations.h has PyTorch's formulas); the rest composed from
// elementwise ops (their gradients follow from the ops'), with the masks of
// comparisons where PyTorch's gradient at a kink differs from what the
// composition would give.
#include "framework/ops.h"
#include "framework/ops/util.h"

namespace minidl {
namespace {

// Checks that x is a float tensor; float16 runs f in float32 and casts back.
template <class F>
Tensor activation(const char* op, const Tensor& x, F f) {
  MINIDL_CHECK(is_floating(x.dtype()), op, ": expected a float tensor, got ", dtype_name(x.dtype()),
               " ", x.shape(), " (cast with .to(kFloat32))");
  if (x.dtype() == kFloat16) return cast(f(cast(x, kFloat32)), kFloat16);
  return f(x);
}

}  // namespace

// x * (1 where x > 0, else slope): the gradient is that factor (slope at 0)
Tensor leaky_relu(const Tensor& x, double slope) {
  return activation("leaky_relu", x, [slope](const Tensor& v) {
    const float s = static_cast<float>(slope);
    return record(unary_map(v, UnaryOp::LeakyRelu, s), "leaky_relu", {v}, [v, s](const Tensor& g) {
      return std::vector<Tensor>{unary_grad_map(g, v, UnaryOp::LeakyReluSlope, s)};
    });
  });
}

// none: 0.5 x (1 + erf(x / sqrt(2))); tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
Tensor gelu(const Tensor& x, const std::string& approximate) {
  MINIDL_CHECK(approximate == "none" || approximate == "tanh",
               "gelu: approximate must be \"none\" or \"tanh\", got \"", approximate, "\"");
  const bool exact = approximate == "none";
  return activation("gelu", x, [exact](const Tensor& v) {
    Tensor y = unary_map(v, exact ? UnaryOp::Gelu : UnaryOp::GeluTanh);
    return record(y, "gelu", {v}, [v, exact](const Tensor& g) {  // one kernel: g * gelu'(v)
      return std::vector<Tensor>{
          broadcast_map(g, v, "gelu", exact ? BinaryOp::GeluGrad : BinaryOp::GeluTanhGrad)};
    });
  });
}

// x sigmoid(x) in one kernel forward and one back
Tensor silu(const Tensor& x) {
  return activation("silu", x, [](const Tensor& v) {
    return record(unary_map(v, UnaryOp::Silu), "silu", {v}, [v](const Tensor& g) {
      return std::vector<Tensor>{broadcast_map(g, v, "silu", BinaryOp::SiluGrad)};
    });
  });
}

// x > 0: x; else alpha expm1(x), one kernel each way; the
// gradient at 0 is alpha (PyTorch's)
Tensor elu(const Tensor& x, double alpha) {
  return activation("elu", x, [alpha](const Tensor& v) {
    const float a = static_cast<float>(alpha);
    return record(unary_map(v, UnaryOp::Elu, a), "elu", {v}, [v, a](const Tensor& g) {
      return std::vector<Tensor>{unary_grad_map(g, v, UnaryOp::EluSlope, a)};
    });
  });
}

// z = beta x above the threshold: x; else log1p(exp(z)) / beta (stable for
// any z); the gradient sigmoid(z), or 1. One kernel each way (one more
// pass each way with beta != 1).
Tensor softplus(const Tensor& x, double beta, double threshold) {
  MINIDL_CHECK(beta != 0, "softplus: beta must be nonzero (shape ", x.shape(), ")");
  return activation("softplus", x, [beta, threshold](const Tensor& v) {
    const float t = static_cast<float>(threshold);
    const Tensor z = beta == 1 ? v.detach() : v.detach() * beta;
    Tensor y = unary_map(z, UnaryOp::Softplus, t);
    if (beta != 1) y = y / beta;
    return record(y, "softplus", {v}, [z, t](const Tensor& g) {
      return std::vector<Tensor>{unary_grad_map(g, z, UnaryOp::SoftplusSlope, t)};
    });
  });
}

// clamp's values; gradient 1 only strictly inside (min, max), as PyTorch's hardtanh
Tensor hardtanh(const Tensor& x, double lo, double hi) {
  MINIDL_CHECK(lo <= hi, "hardtanh: min_val ", lo, " is above max_val ", hi, " (shape ", x.shape(),
               ")");
  return activation("hardtanh", x, [lo, hi](const Tensor& v) {
    Tensor out = clamp(v.detach(), lo, hi);
    return record(out, "hardtanh", {v}, [v, lo, hi](const Tensor& g) {
      return std::vector<Tensor>{mul(g, mul(gt(v, lo), lt(v, hi)))};
    });
  });
}

// min(x, 0) - log1p(exp(-|x|)): no exp of a large positive number; at 0 the
// gradient is minimum's half plus abs's 0 = 0.5 = sigmoid(-0)
Tensor log_sigmoid(const Tensor& x) {
  return activation("log_sigmoid", x, [](const Tensor& v) {
    return sub(minimum(v, scalar_like(0, v)), log1p(exp(neg(abs(v)))));
  });
}

}  // namespace minidl
