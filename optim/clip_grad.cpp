#include "optim/clip_grad.h"

#include <cmath>
#include <stdexcept>

#include "framework/autograd.h"
#include "framework/ops.h"

namespace minidl::optim {
namespace {

std::vector<Tensor> grads_of(const std::vector<Tensor>& params) {
  std::vector<Tensor> grads;
  for (const Tensor& p : params)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  if (!(max_norm >= 0))
    throw std::invalid_argument(cat("clip_grad_norm_: invalid max_norm ", max_norm,
                                    " (expected max_norm >= 0)"));
  if (!(norm_type > 0))
    throw std::invalid_argument(cat("clip_grad_norm_: invalid norm_type ", norm_type,
                                    " (expected > 0, or kInf)"));
  NoGradGuard no_grad;
  const std::vector<Tensor> grads = grads_of(params);
  if (grads.empty()) return Tensor::zeros({}, kFloat32);
  // Every gradient in one flat copy on the first gradient's device: one norm
  // (as the norm of the gradients' norms, up to rounding) and one scaling,
  // where a norm and a scaling per gradient took six kernels each
  std::vector<Tensor> flat;
  for (const Tensor& g : grads) flat.push_back(reshape(g, {-1}).to(grads[0].device()));
  const Tensor all = concat(flat);
  const Tensor total = norm(all, norm_type);
  if (error_if_nonfinite) {
    const double t = total.item();
    MINIDL_CHECK(std::isfinite(t), "clip_grad_norm_: the total norm of order ", norm_type,
                 " of the gradients of ", grads.size(), " parameter(s) is ", t, ", so it cannot "
                 "be clipped (with error_if_nonfinite = false the gradients are scaled by it "
                 "anyway)");
  }
  // in float32 on the device, as torch: min(max_norm / (total + 1e-6), 1)
  const Tensor coef =
      clamp(div(scalar_like(max_norm, total), add(total, scalar_like(1e-6, total))), {}, 1.0);
  const Tensor scaled = mul(all, coef);
  int64_t at = 0;
  for (const Tensor& g : grads) {
    Tensor target = g;
    target.copy_(scaled.slice(at, at + g.numel()).reshape(g.shape()));
    at += g.numel();
  }
  return total;
}

Tensor clip_grad_norm_(const nn::Cell& cell, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  return clip_grad_norm_(cell.trainable_params(), max_norm, norm_type, error_if_nonfinite);
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  if (!(clip_value >= 0))
    throw std::invalid_argument(cat("clip_grad_value_: invalid clip_value ", clip_value,
                                    " (expected clip_value >= 0)"));
  NoGradGuard no_grad;
  for (const Tensor& g : grads_of(params)) {
    Tensor target = g;
    target.copy_(clamp(g, -clip_value, clip_value));
  }
}

void clip_grad_value_(const nn::Cell& cell, double clip_value) {
  clip_grad_value_(cell.trainable_params(), clip_value);
}

}  // namespace minidl::optim
