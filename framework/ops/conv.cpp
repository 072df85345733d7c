// conv2d (strided, padded, dilated, grouped), conv_transpose2d, conv1d,
// conv2d's fusion with relu and 2x2 max pooling, and 2-D pooling: checks,
// shapes and the backward; the loops are the device's kernels (CPU:
// backend/cpu/conv_lanes.cpp, direct with 16 samples in the vector lanes, for
// stride 1 and batches of 16 and more, fused there; im2col + GEMM in
// backend/cpu/conv.cpp otherwise).
#include "framework/ops.h"
#include "framework/ops/util.h"

namespace minidl {

std::ostream& operator<<(std::ostream& os, const Size2& s) {
  return s.h == s.w ? os << s.h : os << "(" << s.h << ", " << s.w << ")";
}

namespace {

int64_t out_size(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dilation = 1) {
  return (in + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
}

// The checks conv2d and conv_transpose2d share: dtypes, ranks, stride >= 1,
// padding >= 0, dilation >= 1, groups >= 1 dividing the input's channels.
void check_conv_args(const char* op, const Tensor& x, const Tensor& w, Size2 stride, Size2 padding,
                     Size2 dilation, int64_t groups) {
  require_f32(op, x);
  require_f32(op, w, "weight");
  require_dim(op, x, 4);
  require_dim(op, w, 4, "weight");
  MINIDL_CHECK(stride.h >= 1 && stride.w >= 1 && padding.h >= 0 && padding.w >= 0, op,
               ": expected stride >= 1 and padding >= 0, got stride ", stride, " and padding ",
               padding);
  MINIDL_CHECK(dilation.h >= 1 && dilation.w >= 1 && groups >= 1, op,
               ": expected dilation >= 1 and groups >= 1, got dilation ", dilation, " and groups ",
               groups);
  MINIDL_CHECK(x.size(1) % groups == 0, op, ": input ", x.shape(), " has ", x.size(1),
               " channels, not divisible by groups ", groups);
}

void check_bias(const char* op, const Tensor& w, const Tensor& b, int64_t OC) {
  if (b.defined())
    MINIDL_CHECK(b.shape() == Shape{OC}, op, ": weight ", w.shape(), " and bias ", b.shape(),
                 ": expected bias [", OC, "]");
}

// conv2d's checks (op names the op in errors) -> the geometry
ConvGeometry conv_geometry(const char* op, const Tensor& x, const Tensor& w, const Tensor& b,
                           Conv2dArgs a) {
  check_conv_args(op, x, w, a.stride, a.padding, a.dilation, a.groups);
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), G = a.groups;
  const int64_t OC = w.size(0), KH = w.size(2), KW = w.size(3);
  MINIDL_CHECK(w.size(1) * G == C, op, ": input ", x.shape(), " has ", C, " channels but weight ",
               w.shape(), " expects ", w.size(1) * G,
               G > 1 ? cat(" (", w.size(1), " in each of ", G, " groups)") : "");
  MINIDL_CHECK(OC % G == 0, op, ": weight ", w.shape(), " has ", OC,
               " output channels, not divisible by groups ", G);
  const int64_t EH = a.dilation.h * (KH - 1) + 1, EW = a.dilation.w * (KW - 1) + 1;
  MINIDL_CHECK(H + 2 * a.padding.h >= EH && W + 2 * a.padding.w >= EW, op, ": input ", x.shape(),
               " with padding ", a.padding, " is smaller than kernel ", w.shape(),
               a.dilation == Size2(1) ? "" : cat(" dilated by ", a.dilation, " (", EH, "x", EW, ")"));
  check_bias(op, w, b, OC);
  return {N, C, H, W, OC, KH, KW,
          a.stride.h, a.stride.w, a.padding.h, a.padding.w, a.dilation.h, a.dilation.w, G,
          out_size(H, KH, a.stride.h, a.padding.h, a.dilation.h),
          out_size(W, KW, a.stride.w, a.padding.w, a.dilation.w)};
}

}  // namespace

namespace {

// x [N, C, H, W], w [OC, C/G, KH, KW], b [OC] -> y [N, OC, OH, OW]
// (op: the name errors and the graph give it)
Tensor conv2d_as(const char* op, const Tensor& x, const Tensor& w, const Tensor& b,
                 Conv2dArgs args) {
  const ConvGeometry geo = conv_geometry(op, x, w, b, args);
  const Kernels& kern = kernels_for(op, x, {&w, &b});
  Tensor y = empty_like(x, {geo.N, geo.OC, geo.OH, geo.OW});
  kern.conv2d_forward(geo, x.data_ptr<float>(), w.data_ptr<float>(), ptr(b), y.data_ptr<float>());
  return record(y, op, {x, w, b}, [x, w, b, geo](const Tensor& g) {
    Tensor gx = x.requires_grad() ? empty_like(g, x.shape()) : Tensor();
    Tensor gw = w.requires_grad() ? empty_like(g, w.shape()) : Tensor();
    Tensor gb = b.defined() && b.requires_grad() ? empty_like(g, b.shape()) : Tensor();
    kernels(g.device()).conv2d_backward(geo, x.data_ptr<float>(), w.data_ptr<float>(),
                                        g.data_ptr<float>(), ptr(gx), ptr(gw), ptr(gb));
    return std::vector<Tensor>{gx, gw, gb};
  });
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, Conv2dArgs args) {
  return conv2d_as("conv2d", contiguous(x), contiguous(w), contiguous(b), args);
}

// x [N, C, H, W], w [OC, C, KH, KW], b [OC] -> [N, OC, OH/pool, OW/pool]: one
// fused kernel for pool 2 where the device has it, else the three ops
Tensor conv2d_relu_max_pool2d(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in,
                              Conv2dArgs args, int64_t pool) {
  const Tensor x = contiguous(x_in), w = contiguous(w_in), b = contiguous(b_in);
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

// x [N, C, H, W], w [C, OC/G, KH, KW], b [OC] -> y [N, OC, OH, OW]: conv2d's
// input gradient, so the geometry is conv2d's with x and y swapped (geo.C =
// OC, geo.H = OH, geo.OC = C, geo.OH = H). Forward: conv2d_backward's gx
// (col2im); backward: gx = conv2d forward of g, gw = conv2d's weight gradient
// with g as its input and x as its output gradient; the bias is an add.
Tensor conv_transpose2d(const Tensor& x_in, const Tensor& w_in, const Tensor& b,
                        ConvTranspose2dArgs a) {
  const char* op = "conv_transpose2d";
  const Tensor x = contiguous(x_in), w = contiguous(w_in);
  check_conv_args(op, x, w, a.stride, a.padding, a.dilation, a.groups);
  const Size2 s = a.stride, p = a.padding, d = a.dilation, q = a.output_padding;
  MINIDL_CHECK(q.h >= 0 && q.w >= 0 && (q.h < s.h || q.h < d.h) && (q.w < s.w || q.w < d.w), op,
               ": expected 0 <= output_padding < stride or dilation, got output_padding ", q,
               ", stride ", s, " and dilation ", d);
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), G = a.groups;
  const int64_t KH = w.size(2), KW = w.size(3), OC = w.size(1) * G;
  MINIDL_CHECK(w.size(0) == C, op, ": input ", x.shape(), " has ", C, " channels but weight ",
               w.shape(), " expects ", w.size(0));
  const int64_t OH = (H - 1) * s.h - 2 * p.h + d.h * (KH - 1) + q.h + 1;
  const int64_t OW = (W - 1) * s.w - 2 * p.w + d.w * (KW - 1) + q.w + 1;
  MINIDL_CHECK(OH >= 1 && OW >= 1, op, ": input ", x.shape(), " and weight ", w.shape(),
               " with stride ", s, ", padding ", p, ", dilation ", d, " and output_padding ", q,
               " give an empty output ", OH, "x", OW);
  check_bias(op, w, b, OC);
  const ConvGeometry geo{N, OC, OH, OW, C, KH, KW, s.h, s.w, p.h, p.w, d.h, d.w, G, H, W};
  const Kernels& kern = kernels_for(op, x, {&w, &b});
  Tensor y = empty_like(x, {N, OC, OH, OW});
  kern.conv2d_backward(geo, nullptr, w.data_ptr<float>(), x.data_ptr<float>(), y.data_ptr<float>(),
                       nullptr, nullptr);
  y = record(y, op, {x, w}, [x, w, geo](const Tensor& g) {
    Tensor gx = x.requires_grad() ? empty_like(g, x.shape()) : Tensor();
    Tensor gw = w.requires_grad() ? empty_like(g, w.shape()) : Tensor();
    const Kernels& k = kernels(g.device());
    if (gx.defined())
      k.conv2d_forward(geo, g.data_ptr<float>(), w.data_ptr<float>(), nullptr, ptr(gx));
    if (gw.defined())
      k.conv2d_backward(geo, g.data_ptr<float>(), w.data_ptr<float>(), x.data_ptr<float>(),
                        nullptr, ptr(gw), nullptr);
    return std::vector<Tensor>{gx, gw};
  });
  return b.defined() ? add(y, reshape(b, {1, OC, 1, 1})) : y;
}

// x [N, C, L], w [OC, C/G, K], b [OC] -> [N, OC, OL]: conv2d on [N, C, 1, L]
Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, Conv1dArgs a) {
  require_dim("conv1d", x, 3);
  require_dim("conv1d", w, 3, "weight");
  Tensor y = conv2d_as("conv1d", contiguous(reshape(x, {x.size(0), x.size(1), 1, x.size(2)})),
                       contiguous(reshape(w, {w.size(0), w.size(1), 1, w.size(2)})), contiguous(b),
                       {.stride = {1, a.stride}, .padding = {0, a.padding},
                        .dilation = {1, a.dilation}, .groups = a.groups});
  return reshape(y, {y.size(0), y.size(1), y.size(3)});
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
  kernels(x.device()).max_pool_forward(geo, dense(x).data_ptr<float>(), y.data_ptr<float>(),
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
  kernels(x.device()).avg_pool_forward(geo, dense(x).data_ptr<float>(), y.data_ptr<float>());
  Shape xs = x.shape();
  return record(y, "avg_pool2d", {x}, [geo, xs](const Tensor& g) {
    Tensor gx = empty_like(g, xs);
    kernels(g.device()).avg_pool_backward(geo, g.data_ptr<float>(), gx.data_ptr<float>());
    return std::vector<Tensor>{gx};
  });
}

}  // namespace minidl
