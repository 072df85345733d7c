// softmax and log_softmax along one dim, stable (the max is subtracted first).
#include "framework/ops.h"
#include "framework/ops/util.h"

namespace minidl {
namespace {

struct Layout {
  int64_t outer = 1, d = 1, inner = 1;
};
Layout layout_of(const Tensor& x, int64_t dim) {
  Layout l;
  for (int64_t i = 0; i < x.dim(); ++i) {
    int64_t s = x.shape()[i];
    if (i < dim) l.outer *= s;
    else if (i == dim) l.d = s;
    else l.inner *= s;
  }
  return l;
}

// x [outer, D, inner] -> y, with log = true giving log_softmax
Tensor softmax_forward(const Tensor& x, const Layout& l, bool log) {
  Tensor y = empty_like(x, x.shape());
  kernels(x.device()).softmax(log, l.outer, l.d, l.inner, dense(x).data_ptr<float>(),
                              y.data_ptr<float>());
  return y;
}

// y, g [outer, D, inner] -> gx (the kernel's softmax_backward): the sums in
// double, so a row with a probability near one keeps float32 accuracy (as
// ops, y * g - y * sum(g * y) in float32 was 2.4e-5 of the largest element
// off on a row with a probability of 0.99935).
Tensor softmax_backward(const Tensor& y, const Tensor& g, const Layout& l, bool log) {
  Tensor gx = empty_like(g, g.shape());
  kernels_for("softmax backward", g, {&y})
      .softmax_backward(log, l.outer, l.d, l.inner, y.data_ptr<float>(), g.data_ptr<float>(),
                        gx.data_ptr<float>());
  return gx;
}

}  // namespace

// x [..., D, ...] -> softmax along dim; gx = y * (g - sum(g * y))
Tensor softmax(const Tensor& x, int64_t dim) {
  require_f32("softmax", x);
  require_nonempty("softmax", x);
  dim = normalize_dim(dim, x.dim(), "softmax");
  Tensor y = softmax_forward(x, layout_of(x, dim), false);
  return record(y, "softmax", {x}, [yd = y.detach(), l = layout_of(x, dim)](const Tensor& g) {
    return std::vector<Tensor>{softmax_backward(yd, g, l, false)};
  });
}

// x [..., D, ...] -> log_softmax along dim; gx = g - softmax * sum(g)
Tensor log_softmax(const Tensor& x, int64_t dim) {
  require_f32("log_softmax", x);
  require_nonempty("log_softmax", x);
  dim = normalize_dim(dim, x.dim(), "log_softmax");
  Tensor y = softmax_forward(x, layout_of(x, dim), true);
  return record(y, "log_softmax", {x}, [yd = y.detach(), l = layout_of(x, dim)](const Tensor& g) {
    return std::vector<Tensor>{softmax_backward(yd, g, l, true)};
  });
}

// x [..., L, S] -> y; gx = scale * y * (g - sum(g * y)), 0 where masked
Tensor scaled_softmax(const Tensor& x, double scale, bool causal) {
  require_f32("scaled_softmax", x);
  require_nonempty("scaled_softmax", x);
  MINIDL_CHECK(x.dim() >= 2, "scaled_softmax: expected scores [..., L, S], got ", x.shape());
  const auto s = static_cast<float>(scale);
  const int64_t l = causal ? x.size(-2) : 0, cols = x.size(-1), rows = x.numel() / cols;
  Tensor y = empty_like(x, x.shape());
  kernels(x.device()).scaled_softmax(s, l, rows, cols, dense(x).data_ptr<float>(),
                                     y.data_ptr<float>());
  return record(y, "scaled_softmax", {x}, [yd = y.detach(), s, l, rows, cols](const Tensor& g) {
    Tensor gx = empty_like(g, g.shape());
    kernels_for("scaled_softmax backward", g, {&yd})
        .scaled_softmax_backward(s, l, rows, cols, yd.data_ptr<float>(), g.data_ptr<float>(),
                                 gx.data_ptr<float>());
    return std::vector<Tensor>{gx};
  });
}

}  // namespace minidl
