// Losses: the fused softmax cross entropy (forward and backward in one pass
// each, no intermediate graph), and the losses of issue 22 composed from ops,
// with their own gradients where PyTorch's differ from the composition's.
#include <cmath>
#include <optional>

#include "framework/ops.h"
#include "framework/ops/util.h"

namespace minidl {

namespace {

// logits or log-probabilities [N, C, d...] -> the shape of their targets [N, d...]
Shape positions(const Tensor& x) {
  Shape s{x.size(0)};
  for (int64_t d = 2; d < x.dim(); ++d) s.push_back(x.size(d));
  return s;
}

// logits [N, C, d...] (N, C and positions > 0), labels [N, d...] of int32 or
// int64 in [0, C) -> scalar mean over the positions p of lse_p - logits[p at
// labels_p]; g_logits = g / positions * (softmax over C - onehot(labels))
Tensor fused_cross_entropy(const Tensor& logits_in, const Tensor& labels_in) {
  const Tensor logits = contiguous(logits_in), labels = dense(labels_in);
  const int64_t N = logits.size(0), C = logits.size(1), inner = logits.numel() / (N * C);
  const Kernels& kern = kernels_for("cross_entropy", logits, {&labels});
  if (labels.device() == Device::CPU) check_labels("cross_entropy", labels, logits, "logits");
  const bool want_grad = needs_grad({&logits});
  Tensor probs = want_grad ? empty_like(logits, logits.shape()) : Tensor();  // for backward
  Tensor out = empty_like(logits, {});
  kern.cross_entropy_forward(N, C, inner, logits.data_ptr<float>(), labels.raw_data_ptr(),
                             labels.dtype(), out.data_ptr<float>(),
                             want_grad ? probs.data_ptr<float>() : nullptr);
  if (!want_grad) return out;
  return record(out, "cross_entropy", {logits}, [probs, labels, N, C, inner](const Tensor& g) {
    // The node runs at most once (backward frees the graph), so the saved
    // probabilities become the gradient in place.
    kernels(g.device())
        .cross_entropy_backward(N, C, inner, labels.raw_data_ptr(), labels.dtype(),
                                g.data_ptr<float>(), probs.data_ptr<float>());
    return std::vector<Tensor>{probs};
  });
}

}  // namespace

// logits [N, C, d...], labels [N, d...] -> the fused loss (above)
Tensor cross_entropy(const Tensor& logits, const Tensor& labels) {
  require_f32("cross_entropy", logits, "logits");
  MINIDL_CHECK(logits.dim() >= 2, "cross_entropy: expected logits [N, C] or [N, C, d1, ...], got ",
               logits.shape());
  MINIDL_CHECK(labels.dtype() == kInt64 || labels.dtype() == kInt32,
               "cross_entropy: expected "
               "int32 or int64 labels, got ",
               dtype_name(labels.dtype()), " ", labels.shape());
  MINIDL_CHECK(logits.numel() > 0, "cross_entropy: empty logits ", logits.shape());
  MINIDL_CHECK(labels.shape() == positions(logits), "cross_entropy: logits ", logits.shape(),
               " and labels ", labels.shape(), ": expected labels ", positions(logits));
  return fused_cross_entropy(logits, labels);
}

// ---- math (issue 22) ----
namespace {

void check_reduction(const char* op, const std::string& r, bool batchmean = false) {
  MINIDL_CHECK(r == "none" || r == "mean" || r == "sum" || (batchmean && r == "batchmean"), op,
               ": unknown reduction '", r, "' (expected \"none\", \"mean\"",
               batchmean ? ", \"sum\" or \"batchmean\"" : " or \"sum\"", ")");
}

Tensor reduce_loss(const Tensor& l, const std::string& r) {
  if (r == "mean") return mean(l);
  if (r == "sum") return sum(l);
  return l;
}

// The float32 input and target of a pointwise loss, of one shape.
void check_pair(const char* op, const Tensor& x, const Tensor& y, const char* xn, const char* yn) {
  require_f32(op, x, xn);
  require_f32(op, y, yn);
  MINIDL_CHECK(x.shape() == y.shape(), op, ": ", xn, " ", x.shape(), " and ", yn, " ", y.shape(),
               " must have the same shape");
}

// A loss of the difference d = x - y, scale f(d) reduced (kernels.h's
// diff_loss): one kernel forward before the reduction, one back for both
// inputs, from the reduced loss's one gradient or ("none") each element's.
Tensor diff_loss(const char* op, const Tensor& x, const Tensor& y, DiffLoss f, float s,
                 float scale, const std::string& reduction) {
  const Kernels& kern = kernels_for(op, x, {&y});
  const Tensor xc = contiguous(x.detach()), yc = contiguous(y.detach());
  const int64_t n = xc.numel();
  Tensor l = empty_like(xc, xc.shape());
  kern.diff_loss_forward(f, s, scale, n, xc.data_ptr<float>(), yc.data_ptr<float>(),
                         l.data_ptr<float>());
  const bool each = reduction == "none", want_x = x.requires_grad(), want_y = y.requires_grad();
  const float gscale =
      reduction == "mean" ? static_cast<float>(scale / static_cast<double>(n)) : scale;
  return record(reduce_loss(l, reduction), op, {x, y}, [=](const Tensor& g) {
    const Tensor gc = contiguous(g);
    Tensor gx = want_x ? empty_like(gc, xc.shape()) : Tensor();
    Tensor gy = want_y ? empty_like(gc, xc.shape()) : Tensor();
    kernels(gc.device())
        .diff_loss_backward(f, s, gscale, n, xc.data_ptr<float>(), yc.data_ptr<float>(),
                            gc.data_ptr<float>(), each, ptr(gx), ptr(gy));
    return std::vector<Tensor>{gx, gy};
  });
}

// A weight broadcast onto x's shape (it may not grow x).
void check_weight(const char* op, const Tensor& w, const Tensor& x, const char* what) {
  if (!w.defined()) return;
  require_f32(op, w, what);
  MINIDL_CHECK(broadcast_shape(w.shape(), x.shape(), op) == x.shape(), op, ": ", what, " ",
               w.shape(), " must broadcast to the input's shape ", x.shape());
}

Tensor times(const Tensor& l, const Tensor& w) { return w.defined() ? mul(l, w) : l; }

}  // namespace

// p, target [...] -> l = -w (t max(log p, -100) + (1 - t) max(log(1 - p), -100));
// gp = g w (p - t) / max(p (1 - p), 1e-12), gt = g w (max(log(1-p), -100) - max(log p, -100)).
// One kernel each way (the formulas: backend/activations.h), the weight a
// product after it.
Tensor binary_cross_entropy(const Tensor& p, const Tensor& target, const Tensor& weight,
                            const std::string& reduction) {
  const char* op = "binary_cross_entropy";
  check_reduction(op, reduction);
  check_pair(op, p, target, "input", "target");
  check_weight(op, weight, p, "weight");
  const Kernels& kern = kernels_for(op, p, {&target, &weight});
  if (p.device() == Device::CPU && p.numel() > 0) {
    const double lo = min(p.detach()).item(), hi = max(p.detach()).item();
    MINIDL_CHECK(lo >= 0 && hi <= 1, op, ": every element of the input ", p.shape(),
                 " must lie in [0, 1], got values in [", lo, ", ", hi, "]");
  }
  const Tensor pc = contiguous(p.detach()), tc = contiguous(target.detach());
  Tensor l = empty_like(pc, pc.shape());
  kern.binary_cross_entropy_forward(pc.numel(), pc.data_ptr<float>(), tc.data_ptr<float>(),
                                    l.data_ptr<float>());
  l = record(l, op, {p, target}, [p, target, pc, tc](const Tensor& g) {
    const Tensor gc = contiguous(g);
    Tensor gp = p.requires_grad() ? empty_like(gc, pc.shape()) : Tensor();
    Tensor gt = target.requires_grad() ? empty_like(gc, pc.shape()) : Tensor();
    kernels(gc.device())
        .binary_cross_entropy_backward(pc.numel(), gc.data_ptr<float>(), pc.data_ptr<float>(),
                                       tc.data_ptr<float>(), ptr(gp), ptr(gt));
    return std::vector<Tensor>{gp, gt};
  });
  return reduce_loss(times(l, weight.defined() ? weight.detach() : Tensor()), reduction);
}

// x, target [...] -> l = w ((1 - t) x + lw softplus(-x)), lw = 1 + (pw - 1) t,
// softplus(-x) = log1p(exp(-|x|)) + max(-x, 0) (stable);
// gx = g w (lw sigmoid(x) - pw t), gt = g w ((pw - 1) softplus(-x) - x)
Tensor binary_cross_entropy_with_logits(const Tensor& x, const Tensor& target, const Tensor& weight,
                                        const Tensor& pos_weight, const std::string& reduction) {
  const char* op = "binary_cross_entropy_with_logits";
  check_reduction(op, reduction);
  check_pair(op, x, target, "input", "target");
  check_weight(op, weight, x, "weight");
  check_weight(op, pos_weight, x, "pos_weight");
  kernels_for(op, x, {&target, &weight, &pos_weight});
  Tensor xd = x.detach(), td = target.detach();
  if (!weight.defined() && !pos_weight.defined()) {  // one kernel forward, one or two back
    const bool want_t = target.requires_grad();
    Tensor l = record(broadcast_map(xd, td, op, BinaryOp::BceLogits), op, {x, target},
                      [xd, td, want_t, op](const Tensor& g) {
                        return std::vector<Tensor>{
                            mul(g, broadcast_map(xd, td, op, BinaryOp::BceLogitsGrad)),
                            want_t ? mul(g, neg(xd)) : Tensor()};
                      });
    return reduce_loss(l, reduction);
  }
  Tensor w = weight.defined() ? weight.detach() : Tensor();
  Tensor pw = pos_weight.defined() ? pos_weight.detach() : Tensor();
  Tensor sp = add(log1p(exp(neg(abs(xd)))), relu(neg(xd)));
  Tensor lw = pw.defined() ? add(mul(pw - 1.0, td), scalar_like(1, xd)) : Tensor();
  Tensor l = times(add(mul(1.0 - td, xd), times(sp, lw)), w);
  l = record(l, op, {x, target}, [xd, td, w, pw, lw, sp](const Tensor& g) {
    Tensor gw = times(g, w);
    Tensor gx = sub(times(sigmoid(xd), lw), times(td, pw));
    Tensor gt = pw.defined() ? sub(mul(pw - 1.0, sp), xd) : neg(xd);
    return std::vector<Tensor>{mul(gw, gx), mul(gw, gt)};
  });
  return reduce_loss(l, reduction);
}

namespace {

// Per-position parts of nll_loss and cross_entropy over logp [N, C, d...]
// viewed as [M, C] (M = N * d...): picked = logp[m, t_m], wt = weight[t_m]
// (0 where ignored), and `rows` the [M, C] view.
struct NllParts {
  Tensor rows, picked, wt, valid;
  Shape target_shape;
};

NllParts nll_parts(const char* op, const Tensor& logp, const Tensor& target, const Tensor& weight,
                   int64_t ignore_index) {
  require_f32(op, logp, "input");
  MINIDL_CHECK(logp.dim() >= 1, op, ": expected input [N, C] or [N, C, d1, ...], got ",
               logp.shape());
  MINIDL_CHECK(target.dtype() == kInt64 || target.dtype() == kInt32, op,
               ": expected int32 or int64 targets, got ", dtype_name(target.dtype()), " ",
               target.shape());
  const bool single = logp.dim() == 1;  // [C] with a 0-d target
  const int64_t n = single ? 1 : logp.size(0), c = single ? logp.size(0) : logp.size(1);
  const Shape want = single ? Shape{} : positions(logp);
  MINIDL_CHECK(target.shape() == want, op, ": input ", logp.shape(), " and target ", target.shape(),
               ": expected target ", want);
  MINIDL_CHECK(c > 0, op, ": input ", logp.shape(), " has no classes");
  if (weight.defined()) {
    require_f32(op, weight, "weight");
    MINIDL_CHECK(weight.shape() == Shape{c}, op, ": weight ", weight.shape(), " for input ",
                 logp.shape(), ": expected weight [", c, "]");
  }
  kernels_for(op, logp, {&target, &weight});
  const int64_t inner = single ? 1 : logp.numel() / std::max<int64_t>(n * c, 1), m = n * inner;
  if (target.device() == Device::CPU) {
    const Tensor t = dense(target);
    const void* at = t.raw_data_ptr();
    for (int64_t i = 0; i < m; ++i) {
      const int64_t v = t.dtype() == kInt64 ? static_cast<const int64_t*>(at)[i]
                                            : static_cast<const int32_t*>(at)[i];
      MINIDL_CHECK(v == ignore_index || (v >= 0 && v < c), op, ": target ", v, " at position ", i,
                   " out of range [0, ", c, ") for input ", logp.shape(), " (ignore_index ",
                   ignore_index, ")");
    }
  }
  NllParts p;
  p.target_shape = target.shape();
  p.rows = inner == 1 ? logp.reshape({m, c})
                      : transpose(logp.reshape({n, c, inner}), 1, 2).reshape({m, c});
  Tensor flat = target.reshape({m});
  p.valid = ne(flat, static_cast<double>(ignore_index));
  Tensor safe = cast(mul(cast(flat, kFloat32), p.valid), kInt64);  // ignored -> class 0
  p.picked = gather(p.rows, safe);
  p.wt = weight.defined() ? mul(gather(mul(Tensor::ones({m, 1}, kFloat32, logp.device()),
                                           weight.detach().reshape({1, c})),
                                       safe),
                                p.valid)
                          : p.valid;
  return p;
}

// per-position losses l [M] -> reduced ("mean" divides by the weight sum)
Tensor reduce_weighted(const Tensor& l, const NllParts& p, const std::string& r) {
  if (r == "none") return l.reshape(p.target_shape);
  if (r == "sum") return sum(l);
  return div(sum(l), sum(p.wt));
}

}  // namespace

Tensor nll_loss(const Tensor& logp, const Tensor& target, const Tensor& weight,
                int64_t ignore_index, const std::string& reduction) {
  check_reduction("nll_loss", reduction);
  NllParts p = nll_parts("nll_loss", logp, target, weight, ignore_index);
  return reduce_weighted(neg(mul(p.picked, p.wt)), p, reduction);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight,
                     int64_t ignore_index, const std::string& reduction, double label_smoothing) {
  const char* op = "cross_entropy";
  check_reduction(op, reduction);
  MINIDL_CHECK(label_smoothing >= 0 && label_smoothing <= 1, op,
               ": label_smoothing must lie in [0, 1], got ", label_smoothing);
  require_f32(op, logits, "logits");
  MINIDL_CHECK(logits.dim() >= 1, op, ": expected logits [N, C] or [N, C, d1, ...], got ",
               logits.shape());
  if (!weight.defined() && label_smoothing == 0 && reduction == "mean" && logits.dim() >= 2 &&
      logits.numel() > 0 && (target.dtype() == kInt64 || target.dtype() == kInt32) &&
      target.device() == Device::CPU && target.shape() == positions(logits) &&
      sum(eq(target, static_cast<double>(ignore_index))).item() == 0)
    return fused_cross_entropy(logits, target);  // nothing to ignore
  const int64_t dim = logits.dim() == 1 ? 0 : 1;
  NllParts p = nll_parts(op, log_softmax(logits, dim), target, weight, ignore_index);
  Tensor l = neg(mul(p.picked, p.wt));
  if (label_smoothing > 0) {
    const double c = static_cast<double>(p.rows.size(1));
    Tensor w_rows =
        weight.defined() ? mul(p.rows, weight.detach().reshape({1, p.rows.size(1)})) : p.rows;
    Tensor smooth = mul(neg(sum(w_rows, {1})), p.valid);
    l = add(l * (1 - label_smoothing), smooth * (label_smoothing / c));
  }
  return reduce_weighted(l, p, reduction);
}

Tensor l1_loss(const Tensor& x, const Tensor& y, const std::string& reduction) {
  check_reduction("l1_loss", reduction);
  check_pair("l1_loss", x, y, "input", "target");
  return reduce_loss(abs(sub(x, y)), reduction);
}

// d = x - y, near = [|d| < beta]: near 0.5 d^2 / beta + (1 - near) (|d| - 0.5 beta)
Tensor smooth_l1_loss(const Tensor& x, const Tensor& y, const std::string& reduction, double beta) {
  check_reduction("smooth_l1_loss", reduction);
  check_pair("smooth_l1_loss", x, y, "input", "target");
  MINIDL_CHECK(beta >= 0, "smooth_l1_loss: beta must be >= 0, got ", beta);
  if (beta == 0) return reduce_loss(abs(sub(x, y)), reduction);
  return diff_loss("smooth_l1_loss", x, y, DiffLoss::SmoothL1, static_cast<float>(beta), 1.f,
                   reduction);
}

Tensor mse_loss(const Tensor& x, const Tensor& y, const std::string& reduction) {
  check_reduction("mse_loss", reduction);
  check_pair("mse_loss", x, y, "input", "target");
  return diff_loss("mse_loss", x, y, DiffLoss::Square, 0.f, 1.f, reduction);
}

// near 0.5 d^2 + (1 - near) delta (|d| - 0.5 delta)
Tensor huber_loss(const Tensor& x, const Tensor& y, const std::string& reduction, double delta) {
  check_reduction("huber_loss", reduction);
  check_pair("huber_loss", x, y, "input", "target");
  MINIDL_CHECK(delta > 0, "huber_loss: delta must be > 0, got ", delta);
  const float b = static_cast<float>(delta);  // delta smooth_l1(d) with beta delta
  return diff_loss("huber_loss", x, y, DiffLoss::SmoothL1, b, b, reduction);
}

// t (log t - x) with 0 log 0 = 0 (xlogy), or exp(t) (t - x) with log_target
Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction,
              bool log_target) {
  check_reduction("kl_div", reduction, true);
  check_pair("kl_div", input, target, "input", "target");
  Tensor l;
  if (log_target) {
    l = mul(exp(target), sub(target, input));
  } else {
    Tensor zero = eq(target.detach(), 0.0);
    l = sub(mul(target, log(add(target, zero))), mul(target, input));  // log(1) = 0 where t = 0
  }
  if (reduction == "batchmean") {
    const double n = input.dim() == 0 ? 1 : static_cast<double>(input.size(0));
    return sum(l) / n;
  }
  return reduce_loss(l, reduction);
}

}  // namespace minidl
