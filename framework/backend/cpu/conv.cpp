// CPU convolution and linear. conv2d's entries hand the geometries the direct
// lanes kernel takes (conv_lanes.cpp: stride 1, padding below the kernel,
// batches of 16 and more) to it; the rest run here as im2col + GEMM, the batch
// split between threads.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "framework/backend/cpu/cpu.h"

namespace minidl::cpu {
namespace {

// Samples per group whose im2col columns (col_floats each) fill ~128 KiB
// (measured best for LeNet: large enough for efficient GEMMs, cache-resident).
int64_t group_size(int64_t col_floats) {
  return std::max<int64_t>(1, (int64_t{128} << 10) / (4 * std::max<int64_t>(col_floats, 1)));
}

// Runs body(first, last, thread) on contiguous chunks of [0, n), one per
// thread: each thread's GEMM then runs single-threaded on its own samples
// (OpenBLAS's OpenMP build does not fork inside a parallel region), which
// scales better than one threaded GEMM with a handful of rows.
template <class Body>
void for_chunks(int64_t n, Body body) {
#pragma omp parallel if (n > 1)
  {
    const int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
    const int64_t first = n * t / threads, last = n * (t + 1) / threads;
    if (first < last) body(first, last, t);
  }
}

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

// x [N, C, H, W], w [OC, C, KH, KW], b [OC] -> y [N, OC, OH, OW]
// Letters: L = OH*OW, CKK = C*KH*KW. The batch is split between threads
// (for_chunks), and each thread walks its samples in groups of S small enough
// that the group's im2col columns col [CKK, S*L] stay in the L2 cache:
// y2[:, group] = w [OC, CKK] col, one GEMM per group; then y2 [OC, N, L] ->
// y [N, OC, L] with the bias.
void conv2d_forward(const ConvGeometry& geo, const float* px, const float* pw, const float* pb,
                    float* py) {
  if (lanes_conv_fits(geo)) return lanes_conv_forward(geo, px, pw, pb, py);
  const int64_t N = geo.N, C = geo.C, OC = geo.OC, L = geo.OH * geo.OW;
  const int64_t CKK = C * geo.KH * geo.KW, NL = N * L, S = group_size(CKK * L);
  Scratch y2(OC * NL);
  for_chunks(N, [&](int64_t n0, int64_t n1, int64_t) {
    std::vector<float> col(CKK * S * L);
    for (int64_t g0 = n0; g0 < n1; g0 += S) {
      const int64_t g1 = std::min(n1, g0 + S), ld = (g1 - g0) * L;
      for (int64_t n = g0; n < g1; ++n)
        im2col(geo, px + n * C * geo.H * geo.W, col.data() + (n - g0) * L, ld);
      // y2[:, g0 L : g1 L] = w [OC, CKK] col [CKK, ld]
      gemm(false, false, OC, ld, CKK, 1.f, pw, CKK, col.data(), ld, 0.f, y2.data() + g0 * L, NL);
    }
  });
  swap01(OC, N, L, y2.data(), pb, py);
}

// gy [N, OC, L] -> gx, gw, gb (each optional). Backward rebuilds each group's
// columns (cheaper than keeping megabytes of them), then
// gw += g2[:, group] col^T and gcol = w^T g2[:, group], scattered by col2im.
void conv2d_backward(const ConvGeometry& geo, const float* px, const float* pw, const float* pg,
                     float* gx, float* gw, float* gb) {
  if (lanes_conv_fits(geo)) return lanes_conv_backward(geo, px, pw, pg, gx, gw, gb);
  const int64_t N = geo.N, C = geo.C, OC = geo.OC, L = geo.OH * geo.OW;
  const int64_t CKK = C * geo.KH * geo.KW, NL = N * L, S = group_size(CKK * L);
  const int64_t chw = C * geo.H * geo.W;
  Scratch g2(OC * NL);  // g [N, OC, L] -> g2 [OC, N*L]
  swap01(N, OC, L, pg, nullptr, g2.data());
  const float* pg2 = g2.data();
  if (gx) std::fill(gx, gx + N * chw, 0.f);
  std::vector<float> parts(gw ? omp_get_max_threads() * OC * CKK : 0, 0.f);
  std::vector<double> bias_parts(gb ? omp_get_max_threads() * OC : 0, 0.0);
  for_chunks(N, [&](int64_t n0, int64_t n1, int64_t t) {
    if (gb)  // bias_parts[t] [OC] = row sums of this chunk's g2 columns
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
      if (gw) {  // parts[t] [OC, CKK] += g2[:, group] [OC, ld] col^T [ld, CKK]
        for (int64_t n = g0; n < g1; ++n) im2col(geo, px + n * chw, col.data() + (n - g0) * L, ld);
        gemm(false, true, OC, CKK, ld, 1.f, pg2 + g0 * L, NL, col.data(), ld, 1.f,
             parts.data() + t * OC * CKK, CKK);
      }
      if (gx) {  // col [CKK, ld] = w^T [CKK, OC] g2[:, group]; scatter back
        gemm(true, false, CKK, ld, OC, 1.f, pw, CKK, pg2 + g0 * L, NL, 0.f, col.data(), ld);
        for (int64_t n = g0; n < g1; ++n) col2im(geo, col.data() + (n - g0) * L, gx + n * chw, ld);
      }
    }
  });
  if (gw) {
    std::fill(gw, gw + OC * CKK, 0.f);
    for (size_t i = 0; i < parts.size(); ++i) gw[i % (OC * CKK)] += parts[i];
  }
  if (gb)  // gb [OC] = the chunks' row sums, added in double
    for (int64_t o = 0; o < OC; ++o) {
      double s = 0;
      for (size_t t = 0; t < bias_parts.size() / OC; ++t) s += bias_parts[t * OC + o];
      gb[o] = static_cast<float>(s);
    }
}

// x [N, IN], w [OUT, IN], b [OUT] or null -> y [N, OUT]
void linear(int64_t n, int64_t in, int64_t out_f, const float* x, const float* w, const float* pb,
            float* po) {
  if (n <= 32 && out_f > n) {
    // Small batch: out^T [OUT, N] = w [OUT, IN] x^T [IN, N], then transposed.
    // OpenBLAS is faster with the weight in that place (784->512 at N 32: 153
    // vs 204 us on 1 thread, 110 vs 127 on 2; from N 48 on it is not, and on
    // 2 threads slower). bench_ops' linear_b32 case measures it.
    std::vector<float> t(static_cast<size_t>(out_f * n), 0.f);
    if (pb)
      for (int64_t o = 0; o < out_f; ++o) std::fill_n(t.data() + o * n, n, pb[o]);
    gemm(false, true, out_f, n, in, 1.f, w, x, pb ? 1.f : 0.f, t.data());
    transpose(t.data(), out_f, n, po);
    return;
  }
  if (pb)
    for (int64_t i = 0; i < n; ++i) std::copy(pb, pb + out_f, po + i * out_f);
  gemm(false, true, n, out_f, in, 1.f, x, w, pb ? 1.f : 0.f, po);
}

}  // namespace minidl::cpu
