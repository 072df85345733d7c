// Batch and layer normalization as ops: the statistics, the output and the
// backward each in fused kernels (backend/kernels.h's batch_norm_* and
// layer_norm_*), instead of a graph of means, differences and products.
#include "framework/ops.h"
#include "framework/ops/util.h"

namespace minidl {
namespace {

// A tensor of one value per index of x's dim 1 (named `dim`: C, D):
// undefined, or float32 [x.size(1)].
void check_dim1_tensor(const char* op, const Tensor& t, const char* what, const Tensor& x,
                       const char* dim) {
  if (!t.defined()) return;
  require_f32(op, t, what);
  MINIDL_CHECK(t.shape() == Shape{x.size(1)}, op, ": expected ", what, " of shape [", x.size(1),
               "] (", dim, " of input ", x.shape(), "), got ", t.shape());
}

}  // namespace

// x [N, C, *] -> y [N, C, *]; backward: gy -> gx, gweight, gbias (two passes per channel)
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var, bool training,
                  double momentum, double eps) {
  if (x.dtype() == kFloat16)  // computed in float32, the result cast back (ops.h)
    return cast(batch_norm(cast(x, kFloat32), weight, bias, running_mean, running_var, training,
                           momentum, eps),
                kFloat16);
  if (!all_contiguous({x, weight, bias}))
    return batch_norm(contiguous(x), contiguous(weight), contiguous(bias), running_mean,
                      running_var, training, momentum, eps);
  require_f32("batch_norm", x);
  MINIDL_CHECK(x.dim() >= 2 && x.numel() > 0, "batch_norm: expected a non-empty input [N, C] or ",
               "[N, C, *], got ", x.shape());
  check_dim1_tensor("batch_norm", weight, "weight", x, "C");
  check_dim1_tensor("batch_norm", bias, "bias", x, "C");
  check_dim1_tensor("batch_norm", running_mean, "running_mean", x, "C");
  check_dim1_tensor("batch_norm", running_var, "running_var", x, "C");
  MINIDL_CHECK(running_mean.defined() == running_var.defined(),
               "batch_norm: expected running_mean and running_var both given or both undefined, "
               "got ",
               running_mean.defined() ? running_mean.shape() : Shape{}, " and ",
               running_var.defined() ? running_var.shape() : Shape{});
  MINIDL_CHECK(training || running_mean.defined(),
               "batch_norm: evaluation (training false) needs running_mean and running_var, "
               "got none for input ",
               x.shape());
  const int64_t N = x.size(0), C = x.size(1), S = x.numel() / (N * C);
  MINIDL_CHECK(!training || N * S > 1, "batch_norm: training needs more than one value per ",
               "channel, got input ", x.shape());
  const Kernels& kern = kernels_for("batch_norm", x, {&weight, &bias, &running_mean, &running_var});
  Tensor y = empty_like(x, x.shape());
  Tensor save_mean = empty_like(x, {C}), save_invstd = empty_like(x, {C});  // for backward
  kern.batch_norm_forward(training, N, C, S, x.data_ptr<float>(), ptr(weight), ptr(bias),
                          ptr(running_mean), ptr(running_var), momentum, eps,
                          save_mean.data_ptr<float>(), save_invstd.data_ptr<float>(),
                          y.data_ptr<float>());
  return record(
      y, "batch_norm", {x, weight, bias},
      [x, weight, bias, save_mean, save_invstd, training, N, C, S](const Tensor& g) {
        Tensor gx = x.requires_grad() ? empty_like(g, x.shape()) : Tensor();
        Tensor gw = weight.defined() && weight.requires_grad() ? empty_like(g, {C}) : Tensor();
        Tensor gb = bias.defined() && bias.requires_grad() ? empty_like(g, {C}) : Tensor();
        kernels(g.device())
            .batch_norm_backward(training, N, C, S, x.data_ptr<float>(), g.data_ptr<float>(),
                                 save_mean.data_ptr<float>(), save_invstd.data_ptr<float>(),
                                 ptr(weight), ptr(gx), ptr(gw), ptr(gb));
        return std::vector<Tensor>{gx, gw, gb};
      });
}

// x [R, D] -> y [R, D]; backward: gy -> gx, gweight, gbias
Tensor layer_norm_rows(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  if (x.dtype() == kFloat16)  // computed in float32, the result cast back (as batch_norm)
    return cast(layer_norm_rows(cast(x, kFloat32), weight, bias, eps), kFloat16);
  if (!all_contiguous({x, weight, bias}))
    return layer_norm_rows(contiguous(x), contiguous(weight), contiguous(bias), eps);
  require_f32("layer_norm", x);
  MINIDL_CHECK(x.dim() == 2, "layer_norm: expected rows [R, D], got ", x.shape());
  const int64_t R = x.size(0), D = x.size(1);
  check_dim1_tensor("layer_norm", weight, "weight", x, "D");
  check_dim1_tensor("layer_norm", bias, "bias", x, "D");
  const Kernels& kern = kernels_for("layer_norm", x, {&weight, &bias});
  Tensor y = empty_like(x, x.shape()), mean = empty_like(x, {R}), rstd = empty_like(x, {R});
  kern.layer_norm_forward(R, D, eps, x.data_ptr<float>(), ptr(weight), ptr(bias),
                          mean.data_ptr<float>(), rstd.data_ptr<float>(), y.data_ptr<float>());
  return record(y, "layer_norm", {x, weight, bias},
                [x, weight, bias, mean, rstd, R, D](const Tensor& g) {
                  Tensor gx = x.requires_grad() ? empty_like(g, x.shape()) : Tensor();
                  Tensor gw = weight.defined() && weight.requires_grad() ? empty_like(g, {D})
                                                                         : Tensor();
                  Tensor gb =
                      bias.defined() && bias.requires_grad() ? empty_like(g, {D}) : Tensor();
                  kernels(g.device())
                      .layer_norm_backward(R, D, x.data_ptr<float>(), g.data_ptr<float>(),
                                           mean.data_ptr<float>(), rstd.data_ptr<float>(),
                                           ptr(weight), ptr(gx), ptr(gw), ptr(gb));
                  return std::vector<Tensor>{gx, gw, gb};
                });
}


Tensor group_norm_rows(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias,
                       double eps) {
  if (x.dtype() == kFloat16)
    return cast(group_norm_rows(cast(x, kFloat32), groups, weight, bias, eps), kFloat16);
  if (!all_contiguous({x, weight, bias}))
    return group_norm_rows(contiguous(x), groups, contiguous(weight), contiguous(bias), eps);
  require_f32("group_norm", x);
  MINIDL_CHECK(x.dim() >= 2 && groups > 0 && x.size(1) % groups == 0,
               "group_norm: expected input [N, C, *] with C divisible by num_groups = ", groups,
               ", got ", x.shape());
  const int64_t N = x.size(0), C = x.size(1), S = N * C > 0 ? x.numel() / (N * C) : 0;
  check_dim1_tensor("group_norm", weight, "weight", x, "C");
  check_dim1_tensor("group_norm", bias, "bias", x, "C");
  const Kernels& kern = kernels_for("group_norm", x, {&weight, &bias});
  Tensor y = empty_like(x, x.shape());
  Tensor mean = empty_like(x, {N, groups}), rstd = empty_like(x, {N, groups});
  if (x.numel() > 0)
    kern.group_norm_forward(N, C, S, groups, eps, x.data_ptr<float>(), ptr(weight), ptr(bias),
                            mean.data_ptr<float>(), rstd.data_ptr<float>(), y.data_ptr<float>());
  return record(y, "group_norm", {x, weight, bias},
                [x, weight, bias, mean, rstd, N, C, S, groups](const Tensor& g) {
                  auto grad_of = [&](const Tensor& t, const Shape& s) {
                    return t.defined() && t.requires_grad() ? empty_like(g, s) : Tensor();
                  };
                  Tensor gx = grad_of(x, x.shape()), gw = grad_of(weight, {C});
                  Tensor gb = grad_of(bias, {C});
                  kernels(g.device())
                      .group_norm_backward(N, C, S, groups, x.data_ptr<float>(),
                                           g.data_ptr<float>(), mean.data_ptr<float>(),
                                           rstd.data_ptr<float>(), ptr(weight), ptr(gx), ptr(gw),
                                           ptr(gb));
                  return std::vector<Tensor>{gx, gw, gb};
                });
}

}  // namespace minidl
