// conv2d (im2col + GEMM, the batch split between threads) and 2-D pooling.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "framework/backend/cpu/cpu.h"
#include "framework/ops.h"
#include "framework/ops/util.h"

namespace minidl {
namespace {

int64_t out_size(int64_t in, int64_t k, int64_t stride, int64_t pad) {
  return (in + 2 * pad - k) / stride + 1;
}

// Runs body(first, last) on contiguous chunks of [0, n), one per thread: each
// thread's GEMM then runs single-threaded on its own samples (OpenBLAS's
// OpenMP build does not fork inside a parallel region), which scales better
// than one threaded GEMM with a handful of rows.
// Samples per group whose im2col columns (col_floats each) fill ~128 KiB
// (measured best for LeNet: large enough for efficient GEMMs, cache-resident).
int64_t group_size(int64_t col_floats) {
  return std::max<int64_t>(1, (int64_t{128} << 10) / (4 * std::max<int64_t>(col_floats, 1)));
}

template <class Body>
void for_chunks(int64_t n, Body body) {
#pragma omp parallel if (n > 1)
  {
    const int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
    const int64_t first = n * t / threads, last = n * (t + 1) / threads;
    if (first < last) body(first, last, t);
  }
}

}  // namespace

// x [N, C, H, W], w [OC, C, KH, KW], b [OC] -> y [N, OC, OH, OW]
// Letters: L = OH*OW, CKK = C*KH*KW. The batch is split between threads
// (for_chunks), and each thread walks its samples in groups of S small enough
// that the group's im2col columns col [CKK, S*L] stay in the L2 cache:
// y2[:, group] = w [OC, CKK] col, one GEMM per group. Backward rebuilds each
// group's columns (cheaper than keeping megabytes of them), then
// gw += g2[:, group] col^T and gcol = w^T g2[:, group], scattered by col2im.
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
  const int64_t S = group_size(CKK * L);
  Tensor y2 = Tensor::empty({OC, NL});
  const float *px = x.data<float>(), *pw = w.data<float>();
  float* py2o = y2.data<float>();
  for_chunks(N, [&](int64_t n0, int64_t n1, int64_t) {
    std::vector<float> col(CKK * S * L);
    for (int64_t g0 = n0; g0 < n1; g0 += S) {
      const int64_t g1 = std::min(n1, g0 + S), ld = (g1 - g0) * L;
      for (int64_t n = g0; n < g1; ++n)
        cpu::im2col(geo, px + n * C * H * W, col.data() + (n - g0) * L, ld);
      // y2[:, g0 L : g1 L] = w [OC, CKK] col [CKK, ld]
      cpu::gemm(false, false, OC, ld, CKK, 1.f, pw, CKK, col.data(), ld, 0.f, py2o + g0 * L, NL);
    }
  });
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
  return record(y, "conv2d", {x, w, b}, [x, w, b, geo, N, OC, S](const Tensor& g) {
    const int64_t C = geo.C, L = geo.OH * geo.OW, CKK = C * geo.KH * geo.KW, NL = N * L;
    const int64_t chw = C * geo.H * geo.W;
    // g [N, OC, L] -> g2 [OC, N*L]
    Tensor g2 = Tensor::empty({OC, NL});
    const float* pg = g.data<float>();
    float* pg2 = g2.data<float>();
#pragma omp parallel for collapse(2) if (N * OC * L > 65536)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < OC; ++o)
        std::copy(pg + (n * OC + o) * L, pg + (n * OC + o + 1) * L, pg2 + o * NL + n * L);
    const bool want_w = w.requires_grad();
    Tensor gx = x.requires_grad() ? Tensor::zeros(x.shape()) : Tensor();
    const bool want_b = b.defined() && b.requires_grad();
    std::vector<float> parts(want_w ? omp_get_max_threads() * OC * CKK : 0, 0.f);
    std::vector<double> bias_parts(want_b ? omp_get_max_threads() * OC : 0, 0.0);
    const float *px = x.data<float>(), *pw = w.data<float>();
    for_chunks(N, [&](int64_t n0, int64_t n1, int64_t t) {
      if (want_b)  // bias_parts[t] [OC] = row sums of this chunk's g2 columns
        for (int64_t o = 0; o < OC; ++o) {
          const float* row = pg2 + o * NL + n0 * L;
          float s = 0;
#pragma omp simd reduction(+ : s)
          for (int64_t i = 0; i < (n1 - n0) * L; ++i) s += row[i];
          bias_parts[t * OC + o] = s;
        }
      std::vector<float> col(CKK * S * L);
      for (int64_t g0 = n0; g0 < n1; g0 += S) {
        const int64_t g1 = std::min(n1, g0 + S), ld = (g1 - g0) * L;
        if (want_w) {  // parts[t] [OC, CKK] += g2[:, group] [OC, ld] col^T [ld, CKK]
          for (int64_t n = g0; n < g1; ++n)
            cpu::im2col(geo, px + n * chw, col.data() + (n - g0) * L, ld);
          cpu::gemm(false, true, OC, CKK, ld, 1.f, pg2 + g0 * L, NL, col.data(), ld, 1.f,
                    parts.data() + t * OC * CKK, CKK);
        }
        if (gx.defined()) {  // col [CKK, ld] = w^T [CKK, OC] g2[:, group]; scatter back
          cpu::gemm(true, false, CKK, ld, OC, 1.f, pw, CKK, pg2 + g0 * L, NL, 0.f, col.data(), ld);
          for (int64_t n = g0; n < g1; ++n)
            cpu::col2im(geo, col.data() + (n - g0) * L, gx.data<float>() + n * chw, ld);
        }
      }
    });
    Tensor gw, gb;
    if (want_w) {
      gw = Tensor::zeros(w.shape());
      float* pgw = gw.data<float>();
      for (size_t i = 0; i < parts.size(); ++i) pgw[i % (OC * CKK)] += parts[i];
    }
    if (want_b) {  // gb [OC] = the chunks' row sums, added in double
      gb = Tensor::empty(b.shape());
      for (int64_t o = 0; o < OC; ++o) {
        double s = 0;
        for (size_t t = 0; t < bias_parts.size() / OC; ++t) s += bias_parts[t * OC + o];
        gb.data<float>()[o] = static_cast<float>(s);
      }
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
