// CPU pooling kernels: max (a branch-free 2x2 stride-2 path) and average,
// forward and backward (see backend/kernels.h).
// GCC 12 warns that its own _mm512_undefined_*, inside some intrinsics, "may
// be used uninitialized" (a known false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <limits>
#include <vector>

#include "framework/backend/cpu/cpu.h"
#include "framework/backend/cpu/dispatch.h"
#include "framework/backend/cpu/max2x2.h"

namespace minidl::cpu {

namespace {

// One row of 2x2 stride-2 windows: r0 the windows' top row in x (r1 = r0 + W
// below it), base = the flat index of r0[0]. The first maximum wins; a NaN
// anywhere makes the output NaN (and its index the last cell, as the not-max
// flags all read true). Branch-free: data-dependent branches on random
// activations mispredict and cost 30x. With AVX-512, 16 windows per step, the
// last step masked (LeNet's rows hold 14 and 5 windows).
#if MINIDL_HAVE_AVX512
MINIDL_AVX512_BEGIN
void pool2x2_row_avx512(const float* r0, int64_t W, int64_t OW, int64_t base, float* y,
                        int32_t* a) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i lane2 = _mm512_slli_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4,
                                                           3, 2, 1, 0), 1);
  for (int64_t ow = 0; ow < OW; ow += 16) {
    const int64_t n = std::min<int64_t>(16, OW - ow);  // windows: 2n floats per row
    const __mmask16 m0 = static_cast<__mmask16>((1u << std::min<int64_t>(16, 2 * n)) - 1);
    const __mmask16 m1 = static_cast<__mmask16>((1u << std::max<int64_t>(0, 2 * n - 16)) - 1);
    const __mmask16 out = static_cast<__mmask16>((1u << n) - 1);
    const float* t = r0 + 2 * ow;
    const __m512 t0 = _mm512_maskz_loadu_ps(m0, t), t1 = _mm512_maskz_loadu_ps(m1, t + 16);
    const __m512 b0 = _mm512_maskz_loadu_ps(m0, t + W), b1 = _mm512_maskz_loadu_ps(m1, t + W + 16);
    const __m512 p = _mm512_permutex2var_ps(t0, even, t1), q = _mm512_permutex2var_ps(t0, odd, t1);
    const __m512 u = _mm512_permutex2var_ps(b0, even, b1), v = _mm512_permutex2var_ps(b0, odd, b1);
    const Max2x2 w = max2x2(p, q, u, v);
    // the cell's offset in the plane: 0, 1, W, W + 1
    const __m512i offset = _mm512_add_epi32(
        _mm512_and_si512(w.cell, _mm512_set1_epi32(1)),
        _mm512_mullo_epi32(_mm512_srli_epi32(w.cell, 1), _mm512_set1_epi32(static_cast<int32_t>(W))));
    const __m512i idx = _mm512_add_epi32(
        _mm512_add_epi32(_mm512_set1_epi32(static_cast<int32_t>(base + 2 * ow)), lane2), offset);
    _mm512_mask_storeu_ps(y + ow, out, w.max);
    _mm512_mask_storeu_epi32(a + ow, out, idx);
  }
}
MINIDL_AVX512_END
#endif

void pool2x2_row(const float* r0, int64_t W, int64_t OW, int64_t base, float* y, int32_t* a) {
#if MINIDL_HAVE_AVX512
  if (cpu_has_avx512()) return pool2x2_row_avx512(r0, W, OW, base, y, a);
#endif
  const float* r1 = r0 + W;
  for (int64_t ow = 0; ow < OW; ++ow) {
    const float p = r0[2 * ow], q = r0[2 * ow + 1], u = r1[2 * ow], v = r1[2 * ow + 1];
    float m = std::max(std::max(p, q), std::max(u, v));
    if ((p != p) | (q != q) | (u != u) | (v != v)) m = std::numeric_limits<float>::quiet_NaN();
    const int64_t f = p != m, s = q != m, t = u != m;  // not-max flags
    y[ow] = m;
    a[ow] = static_cast<int32_t>(base + 2 * ow + f * (1 + s * (W - 1 + t)));
  }
}

// The window's columns j in [0, K) as runs of a row: the outputs [lo, hi)
// whose input column lies inside (inside_columns), read from x + first at
// steps of the stride
struct WindowColumn {
  int64_t lo, hi, first;
};

std::vector<WindowColumn> window_columns(const PoolGeometry& g) {
  std::vector<WindowColumn> cols;
  for (int64_t j = 0; j < g.K; ++j) {
    const auto [lo, hi] = inside_columns(g.W, g.OW, g.stride, j - g.pad);
    cols.push_back({lo, hi, lo * g.stride + j - g.pad});
  }
  return cols;
}

// One window term of a row of windows, outputs [lo, hi) reading in[(ow - lo)
// * stride] (flat index at + (ow - lo) * stride): the first term of a window
// starts it (arg < 0), a later one replaces it where strictly larger
// (std::max's rule: the first of equal cells stays), and the first NaN is
// noted. S: the stride when known here (2), else 0 and `stride` at run time.
template <int64_t S>
[[gnu::always_inline]] inline void max_term(const float* __restrict in, int32_t at, int64_t lo,
                                            int64_t hi, int64_t stride, float* __restrict best,
                                            int32_t* __restrict arg, int32_t* __restrict nan_at) {
  const int64_t st = S > 0 ? S : stride;
  for (int64_t ow = lo; ow < hi; ++ow) {
    const float v = in[(ow - lo) * st];
    const int32_t id = at + static_cast<int32_t>((ow - lo) * st);
    const bool take = arg[ow] < 0 || v > best[ow];
    best[ow] = take ? v : best[ow];
    arg[ow] = take ? id : arg[ow];
    nan_at[ow] = v != v && nan_at[ow] < 0 ? id : nan_at[ow];
  }
}

}  // namespace

// x [NC, H, W] -> y [NC, OH, OW], argmax [NC, OH, OW] (first maximal cell).
MINIDL_CLONES void max_pool_forward(const PoolGeometry& g, const float* x, float* y,
                                   int32_t* argmax) {
  const std::vector<WindowColumn> cols = window_columns(g);
#pragma omp parallel for if (g.NC * g.OH * g.OW > 16384)
  for (int64_t p = 0; p < g.NC; ++p) {
    const float* xp = x + p * g.H * g.W;
    float* yp = y + p * g.OH * g.OW;
    int32_t* ap = argmax + p * g.OH * g.OW;
    if (g.K == 2 && g.stride == 2 && g.pad == 0) {  // LeNet's pools: index by arithmetic
      for (int64_t oh = 0; oh < g.OH; ++oh)
        pool2x2_row(xp + 2 * oh * g.W, g.W, g.OW, 2 * oh * g.W, yp + oh * g.OW, ap + oh * g.OW);
      continue;
    }
    thread_local std::vector<int32_t> first_nan;
    first_nan.resize(g.OW);
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      float* __restrict best = yp + oh * g.OW;
      int32_t* __restrict arg = ap + oh * g.OW;
      int32_t* __restrict nan_at = first_nan.data();
      std::fill(arg, arg + g.OW, -1);  // no term yet
      std::fill(nan_at, nan_at + g.OW, -1);
      for (int64_t i = 0; i < g.K; ++i) {
        const int64_t h = oh * g.stride - g.pad + i;
        if (h < 0 || h >= g.H) continue;
        for (const WindowColumn& c : cols) {
          const float* __restrict in = xp + h * g.W + c.first;
          const int32_t at = static_cast<int32_t>(h * g.W + c.first);
          if (g.stride == 2)
            max_term<2>(in, at, c.lo, c.hi, 2, best, arg, nan_at);
          else
            max_term<0>(in, at, c.lo, c.hi, g.stride, best, arg, nan_at);
        }
      }
      for (int64_t ow = 0; ow < g.OW; ++ow)
        if (nan_at[ow] >= 0) {  // NaN propagates, at its first cell
          best[ow] = std::numeric_limits<float>::quiet_NaN();
          arg[ow] = nan_at[ow];
        }
    }
  }
}

#if MINIDL_HAVE_AVX512
namespace {
MINIDL_AVX512_BEGIN

// One row of 2x2 stride-2 windows backward: gy, a [OW] (a: flat argmax into
// the plane, base = the flat index of the windows' top-left cell r0[0]) ->
// the rows r0 and r0 + W, every cell written (gy at the argmax, else 0), 16
// windows per step, the last one masked.
void unpool2x2_row(const float* gy, const int32_t* a, int64_t W, int64_t OW, int64_t base,
                   float* r0) {
  const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
  const __m512i lane2 = _mm512_slli_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4,
                                                           3, 2, 1, 0), 1);
  const __m512i one = _mm512_set1_epi32(1), below = _mm512_set1_epi32(static_cast<int32_t>(W));
  for (int64_t ow = 0; ow < OW; ow += 16) {
    const int64_t n = std::min<int64_t>(16, OW - ow);
    const __mmask16 in = static_cast<__mmask16>((1u << n) - 1);
    const __mmask16 m0 = static_cast<__mmask16>((1u << std::min<int64_t>(16, 2 * n)) - 1);
    const __mmask16 m1 = static_cast<__mmask16>((1u << std::max<int64_t>(0, 2 * n - 16)) - 1);
    // + 0 as the scalar path's 0 + gy does: a -0 gradient lands as +0
    const __m512 g = _mm512_add_ps(_mm512_maskz_loadu_ps(in, gy + ow), _mm512_setzero_ps());
    // d: the argmax's offset in its window: 0, 1, W or W + 1
    const __m512i d = _mm512_sub_epi32(
        _mm512_maskz_loadu_epi32(in, a + ow),
        _mm512_add_epi32(_mm512_set1_epi32(static_cast<int32_t>(base + 2 * ow)), lane2));
    const __m512 p = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(d, _mm512_setzero_si512()), g);
    const __m512 q = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(d, one), g);
    const __m512 u = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(d, below), g);
    const __m512 v = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(d, _mm512_add_epi32(below, one)), g);
    float* t = r0 + 2 * ow;
    _mm512_mask_storeu_ps(t, m0, _mm512_permutex2var_ps(p, lo, q));
    _mm512_mask_storeu_ps(t + 16, m1, _mm512_permutex2var_ps(p, hi, q));
    _mm512_mask_storeu_ps(t + W, m0, _mm512_permutex2var_ps(u, lo, v));
    _mm512_mask_storeu_ps(t + W + 16, m1, _mm512_permutex2var_ps(u, hi, v));
  }
}

// LeNet's pools (2x2, stride 2, windows tiling the plane): gy [NC, OH, OW] -> gx [NC, H, W]
void max_pool2x2_backward(const PoolGeometry& g, const float* gy, const int32_t* argmax,
                          float* gx) {
#pragma omp parallel for if (g.NC * g.OH * g.OW > 16384)
  for (int64_t p = 0; p < g.NC; ++p) {
    float* plane = gx + p * g.H * g.W;
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const int64_t o = (p * g.OH + oh) * g.OW;
      unpool2x2_row(gy + o, argmax + o, g.W, g.OW, 2 * oh * g.W, plane + 2 * oh * g.W);
      for (int64_t w = 2 * g.OW; w < g.W; ++w)  // an odd width's last column
        plane[2 * oh * g.W + w] = plane[(2 * oh + 1) * g.W + w] = 0.f;
    }
    std::fill(plane + 2 * g.OH * g.W, plane + g.H * g.W, 0.f);  // an odd height's last row
  }
}

MINIDL_AVX512_END
}  // namespace
#endif

// gy [NC, OH, OW] -> gx [NC, H, W]
void max_pool_backward(const PoolGeometry& g, const float* gy, const int32_t* argmax, float* gx) {
#if MINIDL_HAVE_AVX512
  if (g.K == 2 && g.stride == 2 && g.pad == 0 && cpu_has_avx512())
    return max_pool2x2_backward(g, gy, argmax, gx);
#endif
  std::memset(gx, 0, g.NC * g.H * g.W * sizeof(float));
#pragma omp parallel for if (g.NC * g.OH * g.OW > 16384)
  for (int64_t p = 0; p < g.NC; ++p)
    for (int64_t o = 0; o < g.OH * g.OW; ++o) {
      int64_t i = p * g.OH * g.OW + o;
      gx[p * g.H * g.W + argmax[i]] += gy[i];
    }
}

namespace {

// At stride 1 a plane is padded with zeros to [H + 2 pad, W + 2 pad] (row
// stride PW), and so is each window's output row, to PW: every window term
// (i, j) is then one run over all rows at once (the PW - OW columns past a
// row's outputs computed and dropped). A sum that starts at +0 never turns
// -0, so adding 0 leaves its bits: those of the rows below, which skip it.
bool padded_runs(const PoolGeometry& g) {
  return g.stride == 1 && g.OH == g.H + 2 * g.pad - g.K + 1 && g.OW == g.W + 2 * g.pad - g.K + 1;
}

}  // namespace

// x [NC, H, W] -> y [NC, OH, OW]. Each output adds its window's terms in
// (i, j) order, a term a vector across a row's outputs, or across all rows
// (padded_runs), then scales by 1/K^2: the bits of one sum per output, in
// which padding is skipped (a column outside the plane skips the term).
MINIDL_CLONES void avg_pool_forward(const PoolGeometry& g, const float* x, float* y) {
  const float inv = 1.0f / static_cast<float>(g.K * g.K);
  const std::vector<WindowColumn> cols = window_columns(g);
  const int64_t s = g.stride, PW = g.W + 2 * g.pad, run = (g.OH - 1) * PW + g.OW;
  const bool flat = padded_runs(g);
#pragma omp parallel for if (g.NC * g.OH * g.OW > 16384)
  for (int64_t p = 0; p < g.NC; ++p) {
    float* plane_out = y + p * g.OH * g.OW;
    if (flat) {  // acc [OH, PW] (the last row OW long) += padded [i + OH, j + PW]
      thread_local std::vector<float> padded, acc;
      pad_plane(x + p * g.H * g.W, g.H, g.W, g.pad, g.pad, padded);
      acc.assign(run, 0.f);
      float* __restrict a = acc.data();
      for (int64_t i = 0; i < g.K; ++i)
        for (int64_t j = 0; j < g.K; ++j) {
          const float* __restrict in = padded.data() + i * PW + j;
          for (int64_t t = 0; t < run; ++t) a[t] += in[t];
        }
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) plane_out[oh * g.OW + ow] = a[oh * PW + ow] * inv;
      continue;
    }
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      float* __restrict out = plane_out + oh * g.OW;
      std::fill(out, out + g.OW, 0.f);
      for (int64_t i = 0; i < g.K; ++i) {
        const int64_t h = oh * s - g.pad + i;
        if (h < 0 || h >= g.H) continue;
        for (const WindowColumn& c : cols) {
          const float* __restrict in = x + (p * g.H + h) * g.W + c.first;
          float* __restrict o = out + c.lo;
          for (int64_t k = 0; k < c.hi - c.lo; ++k) o[k] += in[k * s];
        }
      }
      for (int64_t k = 0; k < g.OW; ++k) out[k] *= inv;
    }
  }
}

// gy [NC, OH, OW] -> gx [NC, H, W]. Each gy row, times 1/K^2 (a pass of
// its own: no multiply-add to round differently), is added to its window's
// rows as vectors (or all rows at once, padded_runs), the window's rows
// and columns last to first, so that every gx element sums its terms in
// (oh, ow) order: the bits of one sum per input.
MINIDL_CLONES void avg_pool_backward(const PoolGeometry& g, const float* gy, float* gx) {
  const float inv = 1.0f / static_cast<float>(g.K * g.K);
  const std::vector<WindowColumn> cols = window_columns(g);
  const int64_t s = g.stride, PW = g.W + 2 * g.pad, run = (g.OH - 1) * PW + g.OW;
  const bool flat = padded_runs(g);
#pragma omp parallel for if (g.NC * g.OH * g.OW > 16384)
  for (int64_t p = 0; p < g.NC; ++p) {
    thread_local std::vector<float> scaled, padded;
    const float* plane_gy = gy + p * g.OH * g.OW;
    float* plane_gx = gx + p * g.H * g.W;
    if (flat) {  // padded [i + OH, j + PW] += scaled [OH, PW] (zeros past OW)
      scaled.assign(run, 0.f);
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) scaled[oh * PW + ow] = plane_gy[oh * g.OW + ow] * inv;
      padded.assign((g.H + 2 * g.pad) * PW, 0.f);
      const float* __restrict v = scaled.data();
      for (int64_t i = g.K - 1; i >= 0; --i)
        for (int64_t j = g.K - 1; j >= 0; --j) {
          float* __restrict o = padded.data() + i * PW + j;
          for (int64_t t = 0; t < run; ++t) o[t] += v[t];
        }
      for (int64_t h = 0; h < g.H; ++h) {
        const float* row = padded.data() + (h + g.pad) * PW + g.pad;
        std::copy(row, row + g.W, plane_gx + h * g.W);
      }
      continue;
    }
    scaled.resize(g.OW);
    std::fill(plane_gx, plane_gx + g.H * g.W, 0.f);
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      for (int64_t k = 0; k < g.OW; ++k) scaled[k] = plane_gy[oh * g.OW + k] * inv;
      for (int64_t i = 0; i < g.K; ++i) {
        const int64_t h = oh * s - g.pad + i;
        if (h < 0 || h >= g.H) continue;
        for (auto c = cols.rbegin(); c != cols.rend(); ++c) {
          float* __restrict o = plane_gx + h * g.W + c->first;
          const float* __restrict v = scaled.data() + c->lo;
          for (int64_t k = 0; k < c->hi - c->lo; ++k) o[k * s] += v[k];
        }
      }
    }
  }
}

// ---- nearest resizing (issue 22) ----

namespace {

// s where every input column has s copies side by side (first[c] = c * s:
// an integer scale factor), else 0
int64_t copies_each(int64_t w, int64_t ow, const int32_t* first) {
  if (ow % w != 0) return 0;
  const int64_t s = ow / w;
  for (int64_t c = 0; c <= w; ++c)
    if (first[c] != c * s) return 0;
  return s;
}

}  // namespace

// x [NC, H, W] -> y [NC, OH, OW] = x[p, rows[i], cols[j]]; a row of an
// integer factor s is written without the table (s = 2 as pairs)
MINIDL_CLONES void upsample_nearest_forward(int64_t nc, int64_t h, int64_t w, int64_t oh,
                                            int64_t ow, const int32_t* rows, const int32_t* cols,
                                            const float* x, float* y) {
  int64_t s = ow % w == 0 ? ow / w : 0;  // copies_each, from cols: cols[j] = j / s
  for (int64_t j = 0; s > 0 && j < ow; ++j)
    if (cols[j] != j / s) s = 0;
#pragma omp parallel for collapse(2) if (nc * oh * ow > 65536)
  for (int64_t p = 0; p < nc; ++p)
    for (int64_t i = 0; i < oh; ++i) {
      const float* src = x + (p * h + rows[i]) * w;
      float* dst = y + (p * oh + i) * ow;
      if (s == 2) {
        for (int64_t c = 0; c < w; ++c) dst[2 * c] = dst[2 * c + 1] = src[c];
      } else if (s > 0) {
        for (int64_t c = 0; c < w; ++c) std::fill(dst + c * s, dst + (c + 1) * s, src[c]);
      } else {
        for (int64_t j = 0; j < ow; ++j) dst[j] = src[cols[j]];
      }
    }
}

// gy [NC, OH, OW] -> gx [NC, H, W]: each input sums its copies in (i, j)
// order, row by row of gy into gx's row (an integer factor s without the
// table, s = 2 as pairs)
MINIDL_CLONES void upsample_nearest_backward(int64_t nc, int64_t h, int64_t w, int64_t oh,
                                             int64_t ow, const int32_t* row_first,
                                             const int32_t* col_first, const float* gy,
                                             float* gx) {
  const int64_t s = copies_each(w, ow, col_first);
#pragma omp parallel for collapse(2) if (nc * oh * ow > 65536)
  for (int64_t p = 0; p < nc; ++p)
    for (int64_t r = 0; r < h; ++r) {
      float* acc = gx + (p * h + r) * w;
      std::fill(acc, acc + w, 0.f);
      for (int64_t i = row_first[r]; i < row_first[r + 1]; ++i) {
        const float* g = gy + (p * oh + i) * ow;
        if (s == 2) {
          for (int64_t c = 0; c < w; ++c) acc[c] = (acc[c] + g[2 * c]) + g[2 * c + 1];
        } else {
          for (int64_t c = 0; c < w; ++c)
            for (int64_t j = col_first[c]; j < col_first[c + 1]; ++j) acc[c] += g[j];
        }
      }
    }
}

// ---- bilinear resizing ----

namespace {

constexpr int64_t kResizeRows = 16;  // output rows (forward), input rows (backward) a task

// out [OW] = row [W] resized along w: row[i0[j]] (1 - l1[j]) + row[i1[j]] l1[j]
void resize_row(int64_t ow, const LinearAxis& c, const float* row, float* out) {
  for (int64_t j = 0; j < ow; ++j) out[j] = row[c.i0[j]] * (1.f - c.l1[j]) + row[c.i1[j]] * c.l1[j];
}

// out [W] += a t [W]
void add_scaled(int64_t w, float a, const float* __restrict t, float* __restrict out) {
  for (int64_t c = 0; c < w; ++c) out[c] += a * t[c];
}

}  // namespace

// x [NC, H, W] -> y [NC, OH, OW]: tasks of 16 output rows of a plane; the two
// input rows in use are kept resized along w, so each is resized about once
MINIDL_CLONES void upsample_bilinear_forward(int64_t nc, int64_t h, int64_t w, int64_t oh,
                                             int64_t ow, LinearAxis rows, LinearAxis cols,
                                             const float* x, float* y) {
  const int64_t blocks = (oh + kResizeRows - 1) / kResizeRows;
#pragma omp parallel if (nc * oh * ow > 65536)
  {
    std::vector<float> buffer(2 * ow);
#pragma omp for collapse(2)
    for (int64_t p = 0; p < nc; ++p)
      for (int64_t b = 0; b < blocks; ++b) {
        float *v0 = buffer.data(), *v1 = buffer.data() + ow;
        int64_t r0 = -1, r1 = -1;  // the input rows v0 and v1 hold
        for (int64_t i = b * kResizeRows; i < std::min(oh, (b + 1) * kResizeRows); ++i) {
          const int64_t top = rows.i0[i], bottom = rows.i1[i];
          if (top == r1) std::swap(v0, v1), std::swap(r0, r1);
          if (top != r0) resize_row(ow, cols, x + (p * h + top) * w, v0), r0 = top;
          if (bottom != r0 && bottom != r1)
            resize_row(ow, cols, x + (p * h + bottom) * w, v1), r1 = bottom;
          const float* __restrict a = v0;
          const float* __restrict c = bottom == r0 ? v0 : v1;
          const float l1 = rows.l1[i], l0 = 1.f - l1;
          float* __restrict out = y + (p * oh + i) * ow;
          for (int64_t j = 0; j < ow; ++j) out[j] = a[j] * l0 + c[j] * l1;
        }
      }
  }
}

// gy [NC, OH, OW] -> gx [NC, H, W]: tasks of 16 input rows of a plane, each
// walking the output rows that read them (first .. last) in order: row i of
// gy resized back along w into t, then added into the task's rows i0h[i] and
// i1h[i]. No atomics; the sums' order does not depend on the tasks.
MINIDL_CLONES void upsample_bilinear_backward(int64_t nc, int64_t h, int64_t w, int64_t oh,
                                              int64_t ow, LinearAxis rows, LinearAxis cols,
                                              const float* gy, float* gx) {
  const int64_t blocks = (h + kResizeRows - 1) / kResizeRows;
#pragma omp parallel if (nc * oh * ow > 65536)
  {
    std::vector<float> buffer(w);
    float* __restrict t = buffer.data();
#pragma omp for collapse(2)
    for (int64_t p = 0; p < nc; ++p)
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t r0 = b * kResizeRows, r1 = std::min(h, r0 + kResizeRows);
        float* plane = gx + p * h * w;
        std::fill(plane + r0 * w, plane + r1 * w, 0.f);
        for (int64_t i = rows.first[r0]; i < rows.last[r1 - 1]; ++i) {
          const float* g = gy + (p * oh + i) * ow;
          std::fill(t, t + w, 0.f);
          for (int64_t j = 0; j < ow; ++j) {
            t[cols.i0[j]] += (1.f - cols.l1[j]) * g[j];
            t[cols.i1[j]] += cols.l1[j] * g[j];
          }
          const float l1 = rows.l1[i], l0 = 1.f - l1;
          const int64_t top = rows.i0[i], bottom = rows.i1[i];
          if (top >= r0 && top < r1) add_scaled(w, l0, t, plane + top * w);
          if (bottom >= r0 && bottom < r1) add_scaled(w, l1, t, plane + bottom * w);
        }
      }
  }
}

}  // namespace minidl::cpu
