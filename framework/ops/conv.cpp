// conv2d and 2-D pooling: checks, shapes and the backward; the loops are the
// device's kernels (CPU: backend/cpu/conv_lanes.cpp, direct with 16 samples in
// the vector lanes, for stride 1 and batches of 16 and more; im2col + GEMM in
// backend/cpu/conv.cpp otherwise).
#include "framework/ops.h"
#include "framework/ops/util.h"

namespace minidl {
namespace {

int64_t out_size(int64_t in, int64_t k, int64_t stride, int64_t pad) {
  return (in + 2 * pad - k) / stride + 1;
}

}  // namespace

// x [N, C, H, W], w [OC, C, KH, KW], b [OC] -> y [N, OC, OH, OW]
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, Conv2dArgs args) {
  require_f32("conv2d", x);
  require_f32("conv2d", w, "weight");
  require_dim("conv2d", x, 4);
  require_dim("conv2d", w, 4, "weight");
  MINIDL_CHECK(args.stride >= 1 && args.padding >= 0, "conv2d: expected stride >= 1 and "
               "padding >= 0, got stride ", args.stride, " and padding ", args.padding);
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OC = w.size(0), KH = w.size(2), KW = w.size(3);
  MINIDL_CHECK(w.size(1) == C, "conv2d: input ", x.shape(), " has ", C, " channels but weight ",
               w.shape(), " expects ", w.size(1));
  MINIDL_CHECK(H + 2 * args.padding >= KH && W + 2 * args.padding >= KW, "conv2d: input ",
               x.shape(), " with padding ", args.padding, " is smaller than kernel ", w.shape());
  if (b.defined())
    MINIDL_CHECK(b.shape() == Shape{OC}, "conv2d: weight ", w.shape(), " and bias ", b.shape(),
                 ": expected bias [", OC, "]");
  const Kernels& kern = kernels_for("conv2d", x, {&w, &b});
  const ConvGeometry geo{N, C, H, W, OC, KH, KW, args.stride, args.padding,
                         out_size(H, KH, args.stride, args.padding),
                         out_size(W, KW, args.stride, args.padding)};
  Tensor y = empty_like(x, {N, OC, geo.OH, geo.OW});
  kern.conv2d_forward(geo, x.data_ptr<float>(), w.data_ptr<float>(),
                      b.defined() ? b.data_ptr<float>() : nullptr, y.data_ptr<float>());
  return record(y, "conv2d", {x, w, b}, [x, w, b, geo](const Tensor& g) {
    Tensor gx = x.requires_grad() ? empty_like(g, x.shape()) : Tensor();
    Tensor gw = w.requires_grad() ? empty_like(g, w.shape()) : Tensor();
    Tensor gb = b.defined() && b.requires_grad() ? empty_like(g, b.shape()) : Tensor();
    auto ptr = [](const Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; };
    kernels(g.device()).conv2d_backward(geo, x.data_ptr<float>(), w.data_ptr<float>(),
                                        g.data_ptr<float>(), ptr(gx), ptr(gw), ptr(gb));
    return std::vector<Tensor>{gx, gw, gb};
  });
}

namespace {

PoolGeometry pool_geometry(const char* op, const Tensor& x, int64_t k, int64_t& stride,
                                int64_t pad) {
  require_f32(op, x);
  require_dim(op, x, 4);
  if (stride == 0) stride = k;
  MINIDL_CHECK(k >= 1 && stride >= 1 && pad >= 0 && 2 * pad <= k, op, ": expected kernel >= 1, "
               "stride >= 1 and 0 <= padding <= kernel/2, got kernel ", k, ", stride ", stride,
               ", padding ", pad);
  const int64_t H = x.size(2), W = x.size(3);
  MINIDL_CHECK(H + 2 * pad >= k && W + 2 * pad >= k, op, ": input ", x.shape(),
               " is smaller than the ", k, "x", k, " window");
  return {x.size(0) * x.size(1), H, W, k, stride, pad, out_size(H, k, stride, pad),
          out_size(W, k, stride, pad)};
}

}  // namespace

// x [N, C, H, W] -> [N, C, OH, OW]; the gradient goes to each window's argmax
Tensor max_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding) {
  auto geo = pool_geometry("max_pool2d", x, kernel, stride, padding);
  Tensor y = empty_like(x, {x.size(0), x.size(1), geo.OH, geo.OW});
  Tensor arg = Tensor::empty(y.shape(), kInt32, x.device());
  kernels(x.device()).max_pool_forward(geo, x.data_ptr<float>(), y.data_ptr<float>(),
                                       arg.data_ptr<int32_t>());
  Shape xs = x.shape();
  return record(y, "max_pool2d", {x}, [geo, arg, xs](const Tensor& g) {
    Tensor gx = empty_like(g, xs);
    kernels(g.device()).max_pool_backward(geo, g.data_ptr<float>(), arg.data_ptr<int32_t>(),
                                          gx.data_ptr<float>());
    return std::vector<Tensor>{gx};
  });
}

// x [N, C, H, W] -> [N, C, OH, OW]; each output is its window's mean
Tensor avg_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding) {
  auto geo = pool_geometry("avg_pool2d", x, kernel, stride, padding);
  Tensor y = empty_like(x, {x.size(0), x.size(1), geo.OH, geo.OW});
  kernels(x.device()).avg_pool_forward(geo, x.data_ptr<float>(), y.data_ptr<float>());
  Shape xs = x.shape();
  return record(y, "avg_pool2d", {x}, [geo, xs](const Tensor& g) {
    Tensor gx = empty_like(g, xs);
    kernels(g.device()).avg_pool_backward(geo, g.data_ptr<float>(), gx.data_ptr<float>());
    return std::vector<Tensor>{gx};
  });
}

}  // namespace minidl
