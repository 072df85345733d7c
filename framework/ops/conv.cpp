// conv2d, its fusion with relu and 2x2 max pooling, and 2-D pooling: checks,
// shapes and the backward; the loops are the device's kernels (CPU:
// backend/cpu/conv_lanes.cpp, direct with 16 samples in the vector lanes, for
// stride 1 and batches of 16 and more, fused there; im2col + GEMM in
// backend/cpu/conv.cpp otherwise).
#include "framework/ops.h"
#include "framework/ops/util.h"

namespace minidl {
namespace {

int64_t out_size(int64_t in, int64_t k, int64_t stride, int64_t pad) {
  return (in + 2 * pad - k) / stride + 1;
}

}  // namespace

namespace {

// conv2d's checks (op names the op in errors) -> the geometry
ConvGeometry conv_geometry(const char* op, const Tensor& x, const Tensor& w, const Tensor& b,
                           Conv2dArgs args) {
  require_f32(op, x);
  require_f32(op, w, "weight");
  require_dim(op, x, 4);
  require_dim(op, w, 4, "weight");
  MINIDL_CHECK(args.stride >= 1 && args.padding >= 0, op, ": expected stride >= 1 and "
               "padding >= 0, got stride ", args.stride, " and padding ", args.padding);
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OC = w.size(0), KH = w.size(2), KW = w.size(3);
  MINIDL_CHECK(w.size(1) == C, op, ": input ", x.shape(), " has ", C, " channels but weight ",
               w.shape(), " expects ", w.size(1));
  MINIDL_CHECK(H + 2 * args.padding >= KH && W + 2 * args.padding >= KW, op, ": input ",
               x.shape(), " with padding ", args.padding, " is smaller than kernel ", w.shape());
  if (b.defined())
    MINIDL_CHECK(b.shape() == Shape{OC}, op, ": weight ", w.shape(), " and bias ", b.shape(),
                 ": expected bias [", OC, "]");
  return {N, C, H, W, OC, KH, KW, args.stride, args.padding,
          out_size(H, KH, args.stride, args.padding), out_size(W, KW, args.stride, args.padding)};
}

float* ptr(const Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; }

}  // namespace

// x [N, C, H, W], w [OC, C, KH, KW], b [OC] -> y [N, OC, OH, OW]
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, Conv2dArgs args) {
  const ConvGeometry geo = conv_geometry("conv2d", x, w, b, args);
  const Kernels& kern = kernels_for("conv2d", x, {&w, &b});
  Tensor y = empty_like(x, {geo.N, geo.OC, geo.OH, geo.OW});
  kern.conv2d_forward(geo, x.data_ptr<float>(), w.data_ptr<float>(), ptr(b), y.data_ptr<float>());
  return record(y, "conv2d", {x, w, b}, [x, w, b, geo](const Tensor& g) {
    Tensor gx = x.requires_grad() ? empty_like(g, x.shape()) : Tensor();
    Tensor gw = w.requires_grad() ? empty_like(g, w.shape()) : Tensor();
    Tensor gb = b.defined() && b.requires_grad() ? empty_like(g, b.shape()) : Tensor();
    kernels(g.device()).conv2d_backward(geo, x.data_ptr<float>(), w.data_ptr<float>(),
                                        g.data_ptr<float>(), ptr(gx), ptr(gw), ptr(gb));
    return std::vector<Tensor>{gx, gw, gb};
  });
}

// x [N, C, H, W], w [OC, C, KH, KW], b [OC] -> [N, OC, OH/pool, OW/pool]: one
// fused kernel for pool 2 where the device has it, else the three ops
Tensor conv2d_relu_max_pool2d(const Tensor& x, const Tensor& w, const Tensor& b, Conv2dArgs args,
                              int64_t pool) {
  const ConvGeometry geo = conv_geometry("conv2d_relu_max_pool2d", x, w, b, args);
  const Kernels& kern = kernels_for("conv2d_relu_max_pool2d", x, {&w, &b});
  const int64_t bytes = pool == 2 && kern.conv2d_relu_pool_state_bytes
                            ? kern.conv2d_relu_pool_state_bytes(geo)
                            : 0;
  if (bytes == 0) return max_pool2d(relu(conv2d(x, w, b, args)), pool);
  Tensor y = empty_like(x, {geo.N, geo.OC, geo.OH / 2, geo.OW / 2});
  Tensor state = Tensor::empty({(bytes + 3) / 4}, kInt32, x.device());
  kern.conv2d_relu_pool_forward(geo, x.data_ptr<float>(), w.data_ptr<float>(), ptr(b),
                                y.data_ptr<float>(), state.data_ptr<int32_t>());
  return record(y, "conv2d_relu_max_pool2d", {x, w, b}, [x, w, b, geo, state](const Tensor& g) {
    Tensor gx = x.requires_grad() ? empty_like(g, x.shape()) : Tensor();
    Tensor gw = w.requires_grad() ? empty_like(g, w.shape()) : Tensor();
    Tensor gb = b.defined() && b.requires_grad() ? empty_like(g, b.shape()) : Tensor();
    kernels(g.device()).conv2d_relu_pool_backward(geo, x.data_ptr<float>(), w.data_ptr<float>(),
                                                  g.data_ptr<float>(), state.data_ptr<int32_t>(),
                                                  ptr(gx), ptr(gw), ptr(gb));
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
