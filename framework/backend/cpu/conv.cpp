// CPU convolution: im2col/col2im and conv2d's entries. conv2d's entries run
// a window over the whole unpadded input as a dense layer (one GEMM), hand
// strided and wide geometries to oneDNN (conv_dnnl.cpp: stride 2 and more or
// 16 channels and more; some of their gradients stay here), run 1x1 kernels
// without padding as one GEMM per sample, then give what the direct lanes
// kernel takes to it (conv_lanes.cpp: stride 1, square padding below the
// kernel, dilation 1, one group, batches of 16 and more); the rest run here
// as im2col + GEMM per channel group, split by samples between threads.
#include <omp.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "framework/backend/cpu/cpu.h"
#include "framework/backend/cpu/dispatch.h"

namespace minidl::cpu {
namespace {

// Samples per group: enough that the group's im2col columns (col_floats
// per sample, L columns each) fill ~128 KiB (LeNet's best: cache-resident),
// and at least 512 columns where that stays within 8 MiB. A layer with a
// small output (DCGAN's discriminator, 7x7 and 3x3) otherwise ran GEMMs 49
// and 9 columns wide: its forward and backward took 1.3-1.5x the time.
int64_t group_size(int64_t col_floats, int64_t L) {
  const int64_t per = 4 * std::max<int64_t>(col_floats, 1);  // bytes a sample
  const int64_t cached = (int64_t{128} << 10) / per;
  const int64_t wide = std::min((512 + L - 1) / std::max<int64_t>(L, 1), (int64_t{8} << 20) / per);
  return std::max<int64_t>({1, cached, wide});
}

// Runs body(first, last, thread) on contiguous chunks of [0, n), one per
// thread: each thread's GEMM then runs single-threaded on its own samples
// (OpenBLAS's OpenMP build does not fork inside a parallel region), which
// scales better than one threaded GEMM with a handful of rows. One sample, or
// one thread, runs on the caller with no region at all. Inside an inactive
// region (`if` false) omp_in_parallel() is false, so the GEMM library opened a
// nested team of its own while the pool's threads still spun: three threads
// on two cores, and a MobileNet forward at batch 1 took 12 ms on two threads
// instead of 0.2.
template <class Body>
void for_chunks(int64_t n, Body body) {
  if (n <= 1 || omp_get_max_threads() == 1) {
    if (n > 0) body(0, n, 0);
    return;
  }
#pragma omp parallel
  {
    const int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
    const int64_t first = n * t / threads, last = n * (t + 1) / threads;
    if (first < last) body(first, last, t);
  }
}

// The threads' partial sums of a weight gradient [size] and of a bias
// gradient [OC] (in double), summed into gw and gb at the end.
class Partial {
 public:
  Partial(int64_t size, int64_t OC)
      : threads_(omp_get_max_threads()),
        size_(size),
        oc_(OC),
        w_(threads_ * size, 0.f),
        b_(threads_ * OC, 0.0) {}
  float* w(int64_t t) { return w_.data() + t * size_; }
  // b[t][o] += the sum of row o of rows [OC, len] (row stride ld)
  void add_row_sums(int64_t t, const float* rows, int64_t len, int64_t ld) {
    for (int64_t o = 0; o < oc_; ++o) {
      const float* row = rows + o * ld;
      float s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < len; ++i) s += row[i];
      b_[t * oc_ + o] += s;
    }
  }
  void sum(float* gw, float* gb) const {
    if (gw) {
      std::fill(gw, gw + size_, 0.f);
      for (size_t i = 0; i < w_.size(); ++i) gw[i % size_] += w_[i];
    }
    if (gb)
      for (int64_t o = 0; o < oc_; ++o) {
        double s = 0;
        for (int64_t t = 0; t < threads_; ++t) s += b_[t * oc_ + o];
        gb[o] = static_cast<float>(s);
      }
  }

 private:
  int64_t threads_, size_, oc_;
  std::vector<float> w_;
  std::vector<double> b_;
};

// src [A, B, L] -> dst [B, A, L], adding bias[a] when given
void swap01(int64_t A, int64_t B, int64_t L, const float* src, const float* bias, float* dst) {
#pragma omp parallel for collapse(2) if (A * B * L > 65536)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t a = 0; a < A; ++a) {
      const float* s = src + (a * B + b) * L;
      float* d = dst + (b * A + a) * L;
      const float add = bias ? bias[a] : 0.f;
      for (int64_t i = 0; i < L; ++i) d[i] = s[i] + add;
    }
}

}  // namespace

// im [C/groups, H, W] (one group's channels) -> col [C/groups*KH*KW, OH*OW], row stride ld
MINIDL_CLONES void im2col(const ConvGeometry& g, const float* im, float* col, int64_t ld) {
  const int64_t Cg = g.C / g.groups;
  if (g.sh == 1 && g.sw == 1) {  // rows are plain copies from a zero-padded plane
    const int64_t PW = g.W + 2 * g.pw;
    thread_local std::vector<float> padded;
    for (int64_t c = 0; c < Cg; ++c) {
      const float* plane = im + c * g.H * g.W;
      if (g.ph > 0 || g.pw > 0) {
        pad_plane(plane, g.H, g.W, g.ph, g.pw, padded);
        plane = padded.data();
      }
      for (int64_t ki = 0; ki < g.KH; ++ki)
        for (int64_t kj = 0; kj < g.KW; ++kj) {
          float* __restrict out = col + ((c * g.KH + ki) * g.KW + kj) * ld;
          for (int64_t oh = 0; oh < g.OH; ++oh) {
            const float* __restrict src = plane + (oh + ki * g.dh) * PW + kj * g.dw;
            for (int64_t ow = 0; ow < g.OW; ++ow) out[oh * g.OW + ow] = src[ow];
          }
        }
    }
    return;
  }
  for (int64_t c = 0; c < Cg; ++c)
    for (int64_t ki = 0; ki < g.KH; ++ki)
      for (int64_t kj = 0; kj < g.KW; ++kj) {
        float* out = col + ((c * g.KH + ki) * g.KW + kj) * ld;
        const float* src = im + c * g.H * g.W;
        const auto [lo, hi] = inside_columns(g.W, g.OW, g.sw, kj * g.dw - g.pw);
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          const int64_t h = oh * g.sh - g.ph + ki * g.dh;
          float* row = out + oh * g.OW;
          if (h < 0 || h >= g.H) {
            for (int64_t ow = 0; ow < g.OW; ++ow) row[ow] = 0.f;
            continue;
          }
          const float* srow = src + h * g.W - g.pw + kj * g.dw;
          for (int64_t ow = 0; ow < lo; ++ow) row[ow] = 0.f;
          if (g.sw == 2) {  // a constant stride: the loads vectorize as shuffles
            for (int64_t ow = lo; ow < hi; ++ow) row[ow] = srow[2 * ow];
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) row[ow] = srow[ow * g.sw];
          }
          for (int64_t ow = hi; ow < g.OW; ++ow) row[ow] = 0.f;
        }
      }
}

// col [C/groups*KH*KW, OH*OW], row stride ld -> im [C/groups, H, W] (accumulates)
MINIDL_CLONES void col2im(const ConvGeometry& g, const float* col, float* im, int64_t ld) {
  const int64_t Cg = g.C / g.groups;
  if (g.sh == 1 && g.sw == 1) {  // rows add into a zero-padded plane, cropped into im
    const int64_t PH = g.H + 2 * g.ph, PW = g.W + 2 * g.pw;
    const bool pad = g.ph > 0 || g.pw > 0;
    thread_local std::vector<float> padded;
    for (int64_t c = 0; c < Cg; ++c) {
      float* plane = im + c * g.H * g.W;
      if (pad) {
        padded.assign(PH * PW, 0.f);
        plane = padded.data();
      }
      for (int64_t ki = 0; ki < g.KH; ++ki)
        for (int64_t kj = 0; kj < g.KW; ++kj) {
          const float* __restrict in = col + ((c * g.KH + ki) * g.KW + kj) * ld;
          for (int64_t oh = 0; oh < g.OH; ++oh) {
            float* __restrict dst = plane + (oh + ki * g.dh) * PW + kj * g.dw;
            for (int64_t ow = 0; ow < g.OW; ++ow) dst[ow] += in[oh * g.OW + ow];
          }
        }
      if (pad)
        for (int64_t h = 0; h < g.H; ++h)
          for (int64_t w = 0; w < g.W; ++w)
            im[(c * g.H + h) * g.W + w] += padded[(h + g.ph) * PW + w + g.pw];
    }
    return;
  }
  for (int64_t c = 0; c < Cg; ++c)
    for (int64_t ki = 0; ki < g.KH; ++ki)
      for (int64_t kj = 0; kj < g.KW; ++kj) {
        const float* in = col + ((c * g.KH + ki) * g.KW + kj) * ld;
        float* dst = im + c * g.H * g.W;
        const auto [lo, hi] = inside_columns(g.W, g.OW, g.sw, kj * g.dw - g.pw);
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          const int64_t h = oh * g.sh - g.ph + ki * g.dh;
          if (h < 0 || h >= g.H) continue;
          const float* __restrict row = in + oh * g.OW;
          float* __restrict drow = dst + h * g.W - g.pw + kj * g.dw;
          if (g.sw == 2) {  // a constant stride: vectorizes as shuffles (im2col's)
            for (int64_t ow = lo; ow < hi; ++ow) drow[2 * ow] += row[ow];
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) drow[ow * g.sw] += row[ow];
          }
        }
      }
}

// ---- 1x1 kernels without padding: one GEMM per sample, in place ----
// A 1x1 kernel's im2col columns are the input's pixels on the stride grid,
// xs [C, OH*OW] (x itself at stride 1), so a sample's output is w [OC, C] xs,
// written where it belongs: no [OC, N*L] product to transpose back, which
// took a third of the im2col path's time on ResNet's shortcut (res1x1s2).
// At stride 1 it comes before the lanes kernel, which ran bench_ops' pw1x1 and
// bneck1x1 (64 and 256 channels) at 42 GFLOP/s against 94 here (1 thread).
namespace {

bool pointwise_fits(const ConvGeometry& g) {
  return g.KH == 1 && g.KW == 1 && g.ph == 0 && g.pw == 0 && g.groups == 1 &&
         g.OH == (g.H - 1) / g.sh + 1 && g.OW == (g.W - 1) / g.sw + 1;
}

// x [C, H, W] -> xs [C, OH, OW], xs[c, i, j] = x[c, i*sh, j*sw]: im2col of
// a 1x1 kernel without padding, whose general strided loop (window bounds per
// row) ran about 15% slower on res1x1s2's forward. (The way back, col2im into
// a zeroed gx, ran as fast as a loop of its own.)
MINIDL_CLONES void subsample(const ConvGeometry& g, const float* x, float* xs) {
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t i = 0; i < g.OH; ++i) {
      const float* __restrict src = x + (c * g.H + i * g.sh) * g.W;
      float* __restrict dst = xs + (c * g.OH + i) * g.OW;
      if (g.sw == 2) {  // a constant stride: the loads vectorize as shuffles
        for (int64_t j = 0; j < g.OW; ++j) dst[j] = src[2 * j];
      } else {
        for (int64_t j = 0; j < g.OW; ++j) dst[j] = src[j * g.sw];
      }
    }
}

// x [N, C, H, W], w [OC, C], b [OC] -> y [N, OC, OH, OW]
void pointwise_forward(const ConvGeometry& g, const float* x, const float* w, const float* b,
                       float* y) {
  const int64_t C = g.C, OC = g.OC, L = g.OH * g.OW, chw = C * g.H * g.W;
  const bool strided = g.sh > 1 || g.sw > 1;
  for_chunks(g.N, [&](int64_t n0, int64_t n1, int64_t) {
    std::vector<float> xs(strided ? C * L : 0);
    for (int64_t n = n0; n < n1; ++n) {
      const float* cols = x + n * chw;  // [C, L]
      if (strided) {
        subsample(g, cols, xs.data());
        cols = xs.data();
      }
      float* yn = y + n * OC * L;
      gemm(false, false, OC, L, C, 1.f, w, C, cols, L, 0.f, yn, L);
      if (b)
        for (int64_t o = 0; o < OC; ++o)
          for (int64_t i = 0; i < L; ++i) yn[o * L + i] += b[o];
    }
  });
}

// gy [N, OC, L] -> gx, gw, gb (each optional): per sample, the gradients'
// GEMMs on gy[n] [OC, L] as it lies, gw summed per thread, gb in double.
void pointwise_backward(const ConvGeometry& g, const float* x, const float* w, const float* gy,
                        float* gx, float* gw, float* gb) {
  const int64_t C = g.C, OC = g.OC, L = g.OH * g.OW, chw = C * g.H * g.W;
  const bool strided = g.sh > 1 || g.sw > 1;
  Partial part(gw ? OC * C : 0, gb ? OC : 0);
  for_chunks(g.N, [&](int64_t n0, int64_t n1, int64_t t) {
    std::vector<float> xs(strided && gw ? C * L : 0), gxs(strided && gx ? C * L : 0);
    for (int64_t n = n0; n < n1; ++n) {
      const float* gyn = gy + n * OC * L;
      if (gb) part.add_row_sums(t, gyn, L, L);
      if (gw) {  // part.w[t] [OC, C] += gy[n] xs^T
        const float* cols = x + n * chw;
        if (strided) {
          subsample(g, cols, xs.data());
          cols = xs.data();
        }
        gemm(false, true, OC, C, L, 1.f, gyn, L, cols, L, 1.f, part.w(t), C);
      }
      if (gx) {  // gxs [C, L] = w^T gy[n], on the stride grid of gx[n]
        float* gxn = strided ? gxs.data() : gx + n * chw;
        gemm(true, false, C, L, OC, 1.f, w, C, gyn, L, 0.f, gxn, L);
        if (strided) {  // scattered back onto zeros
          std::fill(gx + n * chw, gx + (n + 1) * chw, 0.f);
          col2im(g, gxn, gx + n * chw, L);
        }
      }
    }
  });
  part.sum(gw, gb);
}

}  // namespace

// ---- a window over the whole unpadded input: a dense layer ----
// Each sample's one im2col column is the sample itself, so x [N, CKK] (CKK =
// C*H*W) and w [OC, CKK] make y [N, OC] = x w^T + b, one GEMM for the batch.
// DCGAN has two: the discriminator's last layer (3x3 on 3x3) and the
// generator's first, a transposed convolution from 1x1 noise, whose forward
// is this geometry's input gradient. oneDNN ran the generator's at 27-40
// GFLOP/s and im2col slower still: 1.5 + 4.5 ms forward and backward, 1 thread.
namespace {

bool whole_window_fits(const ConvGeometry& g) {
  return g.KH == g.H && g.KW == g.W && g.ph == 0 && g.pw == 0 && g.dh == 1 && g.dw == 1 &&
         g.groups == 1 && g.OH == 1 && g.OW == 1;
}

// gy [N, OC] -> gx [N, CKK] = gy w, gw [OC, CKK] = gy^T x, gb [OC] = gy's
// column sums (in double); each optional
void whole_window_backward(const ConvGeometry& g, const float* x, const float* w, const float* gy,
                           float* gx, float* gw, float* gb) {
  const int64_t N = g.N, OC = g.OC, CKK = g.C * g.H * g.W;
  if (gx) gemm(false, false, N, CKK, OC, 1.f, gy, w, 0.f, gx);
  if (gw) gemm(true, false, OC, CKK, N, 1.f, gy, x, 0.f, gw);
  for (int64_t o = 0; gb && o < OC; ++o) {
    double s = 0;
    for (int64_t n = 0; n < N; ++n) s += gy[n * OC + o];
    gb[o] = static_cast<float>(s);
  }
}

}  // namespace

// x [N, C, H, W], w [OC, C/G, KH, KW], b [OC] -> y [N, OC, OH, OW]
// Letters: L = OH*OW, G groups, CKK = C/G*KH*KW (one group's column rows). The
// batch is split between threads (for_chunks), and each thread walks its
// samples in groups of S small enough that the group's im2col columns col
// [CKK, S*L] stay in the L2 cache: per channel group, y2[group rows, samples]
// = w_group [OC/G, CKK] col, one GEMM; then y2 [OC, N, L] -> y [N, OC, L]
// with the bias.
void conv2d_forward(const ConvGeometry& geo, const float* px, const float* pw, const float* pb,
                    float* py) {
  if (whole_window_fits(geo)) return linear(geo.N, geo.C * geo.H * geo.W, geo.OC, px, pw, pb, py);
  if (dnnl_conv_fits(geo, pb != nullptr))
    return dnnl_conv_forward(geo, px, pw, pb, py);
  if (pointwise_fits(geo)) return pointwise_forward(geo, px, pw, pb, py);
  if (lanes_conv_fits(geo)) return lanes_conv_forward(geo, px, pw, pb, py);
  const int64_t N = geo.N, C = geo.C, OC = geo.OC, L = geo.OH * geo.OW, G = geo.groups;
  const int64_t Cg = C / G, OCg = OC / G, hw = geo.H * geo.W;
  const int64_t CKK = Cg * geo.KH * geo.KW, NL = N * L, S = group_size(CKK * L, L);
  Scratch y2(OC * NL);
  for_chunks(N, [&](int64_t n0, int64_t n1, int64_t) {
    std::vector<float> col(CKK * S * L);
    for (int64_t g0 = n0; g0 < n1; g0 += S) {
      const int64_t g1 = std::min(n1, g0 + S), ld = (g1 - g0) * L;
      for (int64_t cg = 0; cg < G; ++cg) {
        for (int64_t n = g0; n < g1; ++n)
          im2col(geo, px + (n * C + cg * Cg) * hw, col.data() + (n - g0) * L, ld);
        // y2[cg rows, g0 L : g1 L] = w_cg [OCg, CKK] col [CKK, ld]
        gemm(false, false, OCg, ld, CKK, 1.f, pw + cg * OCg * CKK, CKK, col.data(), ld, 0.f,
             y2.data() + cg * OCg * NL + g0 * L, NL);
      }
    }
  });
  swap01(OC, N, L, y2.data(), pb, py);
}

// gy [N, OC, L] -> gx, gw, gb (each optional; x is read only for gw).
// Backward rebuilds each group's columns (cheaper than keeping megabytes of
// them), then per channel group gw_cg += g2[cg rows, samples] col^T and
// gcol = w_cg^T g2[cg rows, samples], scattered by col2im. g2 is gy as
// [OC, N*L], a copy, except where a sample's L >= 196 outputs make GEMMs wide
// enough alone: there each sample's GEMMs read gy[n] [OC, L] as it lies.
// Medians of five interleaved runs, each pass alone, AVX2, 1 thread
// (2026-11-28): bench_ops' dc4x4s2c1 (196 outputs) 1.22 -> 0.93 ms for the
// input gradient and for the weights', conv1 (784) 1.14 -> 1.05 and 1.23 ->
// 1.09; conv2 (100) 0.94 -> 1.83 and 1.49, so it keeps the copy.
void conv2d_backward(const ConvGeometry& geo, const float* px, const float* pw, const float* pg,
                     float* gx, float* gw, float* gb) {
  if (whole_window_fits(geo)) return whole_window_backward(geo, px, pw, pg, gx, gw, gb);
  // the gradients oneDNN does not take run below
  if (dnnl_conv_fits(geo, gb != nullptr)) {
    const bool bias = gb != nullptr;
    const bool dnnl_gx = gx && dnnl_conv_takes(geo, bias, ConvPass::Data);
    const bool dnnl_gw = (gw || gb) && dnnl_conv_takes(geo, bias, ConvPass::Weights);
    if (dnnl_gx || dnnl_gw)
      dnnl_conv_backward(geo, px, pw, pg, dnnl_gx ? gx : nullptr, dnnl_gw ? gw : nullptr,
                         dnnl_gw ? gb : nullptr);
    if (dnnl_gx) gx = nullptr;
    if (dnnl_gw) gw = gb = nullptr;
    if (!gx && !gw && !gb) return;
  } else if (pointwise_fits(geo)) {
    return pointwise_backward(geo, px, pw, pg, gx, gw, gb);
  } else if (lanes_conv_fits(geo)) {
    return lanes_conv_backward(geo, px, pw, pg, gx, gw, gb);
  }
  const int64_t N = geo.N, C = geo.C, OC = geo.OC, L = geo.OH * geo.OW, G = geo.groups;
  const int64_t Cg = C / G, OCg = OC / G, hw = geo.H * geo.W;
  const int64_t CKK = Cg * geo.KH * geo.KW, chw = C * hw;
  const bool in_place = L >= 196;
  const int64_t S = in_place ? 1 : group_size(CKK * L, L), NL = in_place ? L : N * L;
  Scratch g2(in_place ? 0 : OC * NL);  // g [N, OC, L] -> g2 [OC, N*L], row stride NL
  if (!in_place) swap01(N, OC, L, pg, nullptr, g2.data());
  auto g2_at = [&](int64_t n) { return in_place ? pg + n * OC * L : g2.data() + n * L; };
  if (gx) std::fill(gx, gx + N * chw, 0.f);
  Partial part(gw ? OC * CKK : 0, gb ? OC : 0);
  for_chunks(N, [&](int64_t n0, int64_t n1, int64_t t) {
    const int64_t step = in_place ? 1 : n1 - n0;  // samples whose g2 columns lie together
    for (int64_t n = n0; gb && n < n1; n += step) part.add_row_sums(t, g2_at(n), step * L, NL);
    std::vector<float> col(CKK * S * L);
    for (int64_t g0 = n0; g0 < n1; g0 += S) {
      const int64_t g1 = std::min(n1, g0 + S), ld = (g1 - g0) * L;
      for (int64_t cg = 0; cg < G; ++cg) {
        const float* g2_cg = g2_at(g0) + cg * OCg * NL;  // [OCg, ld], row stride NL
        const float* w_cg = pw + cg * OCg * CKK;
        if (gw) {  // part.w(t)[cg rows] [OCg, CKK] += g2_cg [OCg, ld] col^T [ld, CKK]
          for (int64_t n = g0; n < g1; ++n)
            im2col(geo, px + n * chw + cg * Cg * hw, col.data() + (n - g0) * L, ld);
          gemm(false, true, OCg, CKK, ld, 1.f, g2_cg, NL, col.data(), ld, 1.f,
               part.w(t) + cg * OCg * CKK, CKK);
        }
        if (gx) {  // col [CKK, ld] = w_cg^T [CKK, OCg] g2_cg; scatter back
          gemm(true, false, CKK, ld, OCg, 1.f, w_cg, CKK, g2_cg, NL, 0.f, col.data(), ld);
          for (int64_t n = g0; n < g1; ++n)
            col2im(geo, col.data() + (n - g0) * L, gx + n * chw + cg * Cg * hw, ld);
        }
      }
    }
  });
  part.sum(gw, gb);
}

}  // namespace minidl::cpu
