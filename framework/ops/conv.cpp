// conv2d (im2col + GEMM per sample, samples in parallel) and 2-D pooling.
#include <omp.h>

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
  const int64_t ohw = geo.OH * geo.OW, ckk = C * KH * KW;
  Tensor y = Tensor::empty({N, OC, geo.OH, geo.OW});
  const float *px = x.data<float>(), *pw = w.data<float>();
  const float* pb = b.defined() ? b.data<float>() : nullptr;
  float* py = y.data<float>();
#pragma omp parallel
  {
    std::vector<float> col(ckk * ohw);
#pragma omp for
    for (int64_t n = 0; n < N; ++n) {
      float* yn = py + n * OC * ohw;
      cpu::im2col(geo, px + n * C * H * W, col.data());
      for (int64_t o = 0; o < OC; ++o) std::fill(yn + o * ohw, yn + (o + 1) * ohw, pb ? pb[o] : 0.f);
      // yn [OC, OH*OW] += w [OC, CKK] col [CKK, OH*OW]
      cpu::gemm(false, false, OC, ohw, ckk, 1.f, pw, col.data(), 1.f, yn);
    }
  }
  return record(y, "conv2d", {x, w, b}, [x, w, b, geo, N, OC](const Tensor& g) {
    const int64_t C = geo.C, ohw = geo.OH * geo.OW, ckk = C * geo.KH * geo.KW;
    const int64_t chw = C * geo.H * geo.W;
    Tensor gx = x.requires_grad() ? Tensor::zeros(x.shape()) : Tensor();
    const bool want_w = w.requires_grad(), want_b = b.defined() && b.requires_grad();
    const float *pg = g.data<float>(), *px = x.data<float>(), *pw = w.data<float>();
    const int threads = omp_get_max_threads();
    // Per-thread weight and bias gradients, summed after the loop.
    std::vector<float> gw_part(want_w ? threads * OC * ckk : 0, 0.f);
    std::vector<float> gb_part(want_b ? threads * OC : 0, 0.f);
#pragma omp parallel
    {
      const int t = omp_get_thread_num();
      std::vector<float> col(ckk * ohw);
#pragma omp for
      for (int64_t n = 0; n < N; ++n) {
        const float* gn = pg + n * OC * ohw;  // [OC, OH*OW]
        if (want_w) {  // gw [OC, CKK] += gn [OC, OHW] col^T [OHW, CKK]
          cpu::im2col(geo, px + n * chw, col.data());
          cpu::gemm(false, true, OC, ckk, ohw, 1.f, gn, col.data(), 1.f, gw_part.data() + t * OC * ckk);
        }
        if (want_b)
          for (int64_t o = 0; o < OC; ++o) {
            float s = 0;
            for (int64_t i = 0; i < ohw; ++i) s += gn[o * ohw + i];
            gb_part[t * OC + o] += s;
          }
        if (gx.defined()) {  // col [CKK, OHW] = w^T [CKK, OC] gn [OC, OHW]; scatter back
          cpu::gemm(true, false, ckk, ohw, OC, 1.f, pw, gn, 0.f, col.data());
          cpu::col2im(geo, col.data(), gx.data<float>() + n * chw);
        }
      }
    }
    auto sum_parts = [threads](const std::vector<float>& parts, Tensor out) {
      float* po = out.data<float>();
      const int64_t len = out.numel();
      for (int t = 0; t < threads; ++t)
        for (int64_t i = 0; i < len; ++i) po[i] += parts[t * len + i];
      return out;
    };
    Tensor gw = want_w ? sum_parts(gw_part, Tensor::zeros(w.shape())) : Tensor();
    Tensor gb = want_b ? sum_parts(gb_part, Tensor::zeros(b.shape())) : Tensor();
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
