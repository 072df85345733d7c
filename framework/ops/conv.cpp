// conv2d (im2col + GEMM per sample, samples in parallel) and 2-D pooling.
#include <cstring>

#include "framework/backend/cpu/cpu.h"
#include "framework/ops.h"
#include "framework/ops/util.h"

namespace minidl {
namespace {

int64_t out_size(int64_t in, int64_t k, int64_t stride, int64_t pad) {
  return (in + 2 * pad - k) / stride + 1;
}

}  // namespace

// x [N, C, H, W], w [OC, C, KH, KW], b [OC] -> y [N, OC, OH, OW]
// Letters: L = OH*OW, CKK = C*KH*KW. The whole batch is one GEMM:
// col [CKK, N*L] holds every sample's im2col side by side, y2 [OC, N*L] =
// w [OC, CKK] col, then y2 is permuted to NCHW. col is kept for the weight
// gradient, so backward does not redo im2col.
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
  const cpu::ConvGeometry geo{C, H, W, KH, KW, args.stride, args.padding,
                              out_size(H, KH, args.stride, args.padding),
                              out_size(W, KW, args.stride, args.padding)};
  const int64_t L = geo.OH * geo.OW, CKK = C * KH * KW, NL = N * L;
  Tensor col = Tensor::empty({CKK, NL});
  const float* px = x.data<float>();
  float* pc = col.data<float>();
#pragma omp parallel for if (N > 1)
  for (int64_t n = 0; n < N; ++n) cpu::im2col(geo, px + n * C * H * W, pc + n * L, NL);
  Tensor y2 = Tensor::empty({OC, NL});
  cpu::gemm(false, false, OC, NL, CKK, 1.f, w.data<float>(), pc, 0.f, y2.data<float>());
  // y2 [OC, N, L] -> y [N, OC, L], adding the bias
  Tensor y = Tensor::empty({N, OC, geo.OH, geo.OW});
  const float* py2 = y2.data<float>();
  const float* pb = b.defined() ? b.data<float>() : nullptr;
  float* py = y.data<float>();
#pragma omp parallel for collapse(2) if (N * OC * L > 65536)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < OC; ++o) {
      const float* src = py2 + o * NL + n * L;
      float* dst = py + (n * OC + o) * L;
      const float bias = pb ? pb[o] : 0.f;
      for (int64_t i = 0; i < L; ++i) dst[i] = src[i] + bias;
    }
  if (!needs_grad({&x, &w, &b})) return y;
  if (!w.requires_grad()) col = Tensor();  // only the weight gradient reads it
  return record(y, "conv2d", {x, w, b}, [x, w, b, geo, N, OC, col](const Tensor& g) {
    const int64_t C = geo.C, L = geo.OH * geo.OW, CKK = C * geo.KH * geo.KW, NL = N * L;
    // g [N, OC, L] -> g2 [OC, N*L]
    Tensor g2 = Tensor::empty({OC, NL});
    const float* pg = g.data<float>();
    float* pg2 = g2.data<float>();
#pragma omp parallel for collapse(2) if (N * OC * L > 65536)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < OC; ++o)
        std::copy(pg + (n * OC + o) * L, pg + (n * OC + o + 1) * L, pg2 + o * NL + n * L);
    Tensor gx, gw, gb;
    if (w.requires_grad()) {  // gw [OC, CKK] = g2 [OC, NL] col^T [NL, CKK]
      gw = Tensor::empty(w.shape());
      cpu::gemm(false, true, OC, CKK, NL, 1.f, pg2, col.data<float>(), 0.f, gw.data<float>());
    }
    if (b.defined() && b.requires_grad()) {  // gb [OC] = row sums of g2
      gb = Tensor::empty(b.shape());
      for (int64_t o = 0; o < OC; ++o) {
        double s = 0;
        for (int64_t i = 0; i < NL; ++i) s += pg2[o * NL + i];
        gb.data<float>()[o] = static_cast<float>(s);
      }
    }
    if (x.requires_grad()) {  // gcol [CKK, NL] = w^T [CKK, OC] g2 [OC, NL]; col2im per sample
      Tensor gcol = Tensor::empty({CKK, NL});
      cpu::gemm(true, false, CKK, NL, OC, 1.f, w.data<float>(), pg2, 0.f, gcol.data<float>());
      gx = Tensor::zeros(x.shape());
      const int64_t chw = C * geo.H * geo.W;
      float* pgx = gx.data<float>();
      const float* pgc = gcol.data<float>();
#pragma omp parallel for if (N > 1)
      for (int64_t n = 0; n < N; ++n) cpu::col2im(geo, pgc + n * L, pgx + n * chw, NL);
    }
    return std::vector<Tensor>{gx, gw, gb};
  });
}

namespace {

cpu::PoolGeometry pool_geometry(const char* op, const Tensor& x, int64_t k, int64_t& stride,
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
  Tensor y = Tensor::empty({x.size(0), x.size(1), geo.OH, geo.OW});
  Tensor arg = Tensor::empty(y.shape(), kInt32);
  cpu::max_pool_forward(geo, x.data<float>(), y.data<float>(), arg.data<int32_t>());
  Shape xs = x.shape();
  return record(y, "max_pool2d", {x}, [geo, arg, xs](const Tensor& g) {
    Tensor gx = Tensor::empty(xs);
    cpu::max_pool_backward(geo, g.data<float>(), arg.data<int32_t>(), gx.data<float>());
    return std::vector<Tensor>{gx};
  });
}

// x [N, C, H, W] -> [N, C, OH, OW]; each output is its window's mean
Tensor avg_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding) {
  auto geo = pool_geometry("avg_pool2d", x, kernel, stride, padding);
  Tensor y = Tensor::empty({x.size(0), x.size(1), geo.OH, geo.OW});
  cpu::avg_pool_forward(geo, x.data<float>(), y.data<float>());
  Shape xs = x.shape();
  return record(y, "avg_pool2d", {x}, [geo, xs](const Tensor& g) {
    Tensor gx = Tensor::empty(xs);
    cpu::avg_pool_backward(geo, g.data<float>(), gx.data<float>());
    return std::vector<Tensor>{gx};
  });
}

}  // namespace minidl
