// Direct convolution, stride 1, with 16 samples of the batch in the AVX-512
// lanes ("lanes" layout). Small convolutions such as LeNet-5's (1->6 and 6->16
// channels, 5x5) leave im2col + GEMM with thin matrices and a copy of the input
// 25 times its size; here every multiply-add of a vector is useful at any
// width, padding or channel count, and the reductions stay in registers.
// Letters as in kernels.h; V = 16 samples per lane block, NB = ceil(N / V)
// blocks (the last one zero-filled), PH x PW a padded plane.
//   lanes tensor: t [NB, C, PH, PW, V], t[b, c, h, w, s] = sample b*V + s.
// forward: x -> xl (padded by pad), yl = valid convolution of xl, -> y + bias.
// backward: gy -> gl (padded by KH-1-pad, KW-1-pad);
//   gw[oc, c, ki, kj] = sum gl[.., oc, oh, ow, s] xl[.., c, oh+ki, ow+kj, s];
//   gx = valid convolution of gl with w flipped and its channels swapped.
// GCC 12 warns that its own _mm512_undefined_ps, inside the shuffle
// intrinsics, "may be used uninitialized" (a known false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#include <omp.h>

#include <algorithm>
#include <array>
#include <utility>

#include "framework/backend/cpu/cpu.h"

namespace minidl::cpu {

#if defined(__AVX512F__)

namespace {

constexpr int64_t V = 16;

// r[0..16) rows of 16 -> r[i] = column i (16x16 transpose in registers)
inline void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // u[i + k] holds column 4*lane + k of rows i..i+3
    const __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
    const __m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
    u[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int k = 0; k < 4; ++k) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0x88);
    const __m512 v1 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0xdd);
    const __m512 w0 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0x88);
    const __m512 w1 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0xdd);
    r[k] = _mm512_shuffle_f32x4(v0, w0, 0x88);
    r[4 + k] = _mm512_shuffle_f32x4(v1, w1, 0x88);
    r[8 + k] = _mm512_shuffle_f32x4(v0, w0, 0xdd);
    r[12 + k] = _mm512_shuffle_f32x4(v1, w1, 0xdd);
  }
}

inline __mmask16 first(int64_t n) { return static_cast<__mmask16>((1u << n) - 1); }

// src [N, C, H, W] -> dst [NB, C, H + 2 ph, W + 2 pw, V], zero in the padding
// and in the samples past N. sums (unless null) [NB, C, V]: each sample's sum
// of its channel, added in reading order.
void to_lanes(const float* src, int64_t N, int64_t C, int64_t H, int64_t W, int64_t ph,
              int64_t pw, float* dst, float* sums = nullptr) {
  const int64_t NB = (N + V - 1) / V, PH = H + 2 * ph, PW = W + 2 * pw, CHW = C * H * W;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < NB; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t samples = std::min(V, N - b * V);
      float* plane = dst + (b * C + c) * PH * PW * V;
      std::fill(plane, plane + ph * PW * V, 0.f);
      std::fill(plane + (ph + H) * PW * V, plane + PH * PW * V, 0.f);
      __m512 sum = _mm512_setzero_ps();
      for (int64_t h = 0; h < H; ++h) {
        float* row = plane + (ph + h) * PW * V;
        std::fill(row, row + pw * V, 0.f);
        std::fill(row + (pw + W) * V, row + PW * V, 0.f);
        const float* first_row = src + (b * V * C + c) * H * W + h * W;
        for (int64_t w0 = 0; w0 < W; w0 += V) {
          const int64_t n = std::min(V, W - w0);
          __m512 r[16];
          for (int64_t s = 0; s < V; ++s)  // samples past N load nothing: zeros
            r[s] = _mm512_maskz_loadu_ps(s < samples ? first(n) : 0,
                                         first_row + std::min(s, samples - 1) * CHW + w0);
          transpose16(r);
          for (int64_t i = 0; i < n; ++i) {
            _mm512_store_ps(row + (pw + w0 + i) * V, r[i]);
            sum = _mm512_add_ps(sum, r[i]);
          }
        }
      }
      if (sums) _mm512_store_ps(sums + (b * C + c) * V, sum);
    }
}

// src [NB, C, L, V] -> dst [N, C, L] plus bias[c] (when given)
void from_lanes(const float* src, int64_t N, int64_t C, int64_t L, const float* bias, float* dst) {
  const int64_t NB = (N + V - 1) / V;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < NB; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const float* plane = src + (b * C + c) * L * V;
      const __m512 add = _mm512_set1_ps(bias ? bias[c] : 0.f);
      const int64_t samples = std::min(V, N - b * V);
      for (int64_t i0 = 0; i0 < L; i0 += V) {
        const int64_t n = std::min(V, L - i0);
        __m512 r[16];
        for (int64_t i = 0; i < V; ++i)
          r[i] = i < n ? _mm512_load_ps(plane + (i0 + i) * V) : _mm512_setzero_ps();
        transpose16(r);
        for (int64_t s = 0; s < samples; ++s)
          _mm512_mask_storeu_ps(dst + ((b * V + s) * C + c) * L + i0, first(n),
                                _mm512_add_ps(r[s], add));
      }
    }
}

// Strides (in floats) of one valid convolution on lanes tensors.
struct Strides {
  int64_t C, KH, KW;
  int64_t x_plane, x_row;  // input [C, PH, PW, V]
  int64_t w_oc;            // weight [OC, C, KH, KW]: C*KH*KW
  int64_t y_plane;         // output [OC, OH, OW, V]: OH*OW*V
};

// y[o, 0, j] = sum_{c, ki, kj} w[o, c, ki, kj] x[c, ki, j + kj] for o < OCB,
// j < OWB: one output row's OWB columns of OCB channels, all in registers.
// Only taps ki in [ki0, ki1), kj in [kj0, kj1) are summed (the others meet
// zero padding); KW > 0 fixes the kernel width, and then all its columns.
template <int OCB, int OWB, int KW>
void tile_forward(const float* x, const float* w, float* y, const Strides& s, int64_t ki0,
                  int64_t ki1, int64_t kj0, int64_t kj1) {
  const int64_t kw = KW > 0 ? KW : s.KW, kb = KW > 0 ? 0 : kj0, ke = KW > 0 ? KW : kj1;
  __m512 acc[OCB][OWB];
  for (int o = 0; o < OCB; ++o)
    for (int j = 0; j < OWB; ++j) acc[o][j] = _mm512_setzero_ps();
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t ki = ki0; ki < ki1; ++ki) {
      const float* xr = x + c * s.x_plane + ki * s.x_row;
      const float* wr = w + (c * s.KH + ki) * kw;
      for (int64_t kj = kb; kj < ke; ++kj) {
        __m512 wv[OCB];
        for (int o = 0; o < OCB; ++o) wv[o] = _mm512_set1_ps(wr[o * s.w_oc + kj]);
        for (int j = 0; j < OWB; ++j) {
          const __m512 xv = _mm512_load_ps(xr + (j + kj) * V);
          for (int o = 0; o < OCB; ++o) acc[o][j] = _mm512_fmadd_ps(wv[o], xv, acc[o][j]);
        }
      }
    }
  for (int o = 0; o < OCB; ++o)
    for (int j = 0; j < OWB; ++j) _mm512_store_ps(y + o * s.y_plane + j * V, acc[o][j]);
}

constexpr int kMaxOCB = 4, kMaxOWB = 8;  // at most 28 accumulators + OCB weights + 1 input
using ForwardTile = void (*)(const float*, const float*, float*, const Strides&, int64_t, int64_t,
                             int64_t, int64_t);

template <int KW, int OCB, int... J>
constexpr std::array<ForwardTile, kMaxOWB> forward_tiles_for(std::integer_sequence<int, J...>) {
  return {&tile_forward<OCB, J + 1, KW>...};
}
using ForwardTiles = std::array<std::array<ForwardTile, kMaxOWB>, kMaxOCB>;

// forward_tiles<KW>()[o - 1][j - 1] = tile_forward<o, j, KW> (KW 0: any width)
template <int KW>
constexpr ForwardTiles forward_tiles() {
  constexpr auto j = std::make_integer_sequence<int, kMaxOWB>{};
  return {forward_tiles_for<KW, 1>(j), forward_tiles_for<KW, 2>(j), forward_tiles_for<KW, 3>(j),
          forward_tiles_for<KW, 4>(j)};
}
// Kernels 5 (LeNet) and 3 wide get their own tiles: a fixed kj loop unrolls,
// which made conv2's forward 19% faster.
const ForwardTiles kForwardTiles = forward_tiles<0>(), kForwardTiles3 = forward_tiles<3>(),
                   kForwardTiles5 = forward_tiles<5>();

// Splits n into ceil(n / most) blocks as even as possible; returns the block size.
int64_t even_block(int64_t n, int64_t most) {
  const int64_t blocks = (n + most - 1) / most;
  return (n + blocks - 1) / blocks;
}

// xl [NB, C, PH, PW, V], w [OC, C, KH, KW] -> yl [NB, OC, OH, OW, V], valid
// convolution; xl is zero outside rows [r0, r1) and columns [c0, c1), whose
// taps are skipped where a whole tile row or column meets them. Threads split
// the (block, channel tile, output row) triples.
void forward_lanes(const float* xl, int64_t NB, int64_t C, int64_t PH, int64_t PW, int64_t r0,
                   int64_t r1, int64_t c0, int64_t c1, const float* w, int64_t OC, int64_t KH,
                   int64_t KW, float* yl) {
  const int64_t OH = PH - KH + 1, OW = PW - KW + 1;
  const int64_t ocb = even_block(OC, kMaxOCB);
  const int64_t owb = even_block(OW, ocb == 4 ? 6 : ocb == 3 ? 7 : kMaxOWB);
  const int64_t tiles_oc = (OC + ocb - 1) / ocb;
  const Strides s{C, KH, KW, PH * PW * V, PW * V, C * KH * KW, OH * OW * V};
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < NB * tiles_oc * OH; ++task) {
    const int64_t oh = task % OH, t = task / OH, b = t / tiles_oc, oc0 = t % tiles_oc * ocb;
    const int64_t nc = std::min(ocb, OC - oc0);
    const int64_t ki0 = std::clamp<int64_t>(r0 - oh, 0, KH), ki1 = std::clamp<int64_t>(r1 - oh, ki0, KH);
    const float* x = xl + b * C * s.x_plane + oh * s.x_row;
    float* y = yl + ((b * OC + oc0) * OH + oh) * OW * V;
    for (int64_t ow0 = 0; ow0 < OW; ow0 += owb) {
      const int64_t nw = std::min(owb, OW - ow0);
      const int64_t kj0 = std::clamp<int64_t>(c0 - (ow0 + nw - 1), 0, KW);
      const int64_t kj1 = std::clamp<int64_t>(c1 - ow0, kj0, KW);
      // all kernel columns: a tile with the width fixed at compile time, when there is one
      const ForwardTiles& tiles = kj0 > 0 || kj1 < KW ? kForwardTiles
                                  : KW == 5           ? kForwardTiles5
                                  : KW == 3           ? kForwardTiles3
                                                      : kForwardTiles;
      tiles[nc - 1][nw - 1](x + ow0 * V, w + oc0 * s.w_oc, y + ow0 * V, s, ki0, ki1, kj0, kj1);
    }
  }
}

// acc[o][k] += sum_{oh, ow} g[o, oh, ow] x[oh, ow + k] over one block's rows:
// OCB output channels by KB kernel columns, accumulators in registers.
// g: gl at [b, oc0, 0, 0] (plane g_plane, row g_row); x: xl at [b, c, ki, kj0].
template <int OCB, int KB>
void tile_weight(const float* g, int64_t g_plane, int64_t g_row, const float* x, int64_t x_row,
                 int64_t OH, int64_t OW, float* acc_mem) {
  __m512 acc[OCB][KB];
  for (int o = 0; o < OCB; ++o)
    for (int k = 0; k < KB; ++k) acc[o][k] = _mm512_load_ps(acc_mem + (o * KB + k) * V);
  for (int64_t oh = 0; oh < OH; ++oh) {
    const float* gr = g + oh * g_row;
    const float* xr = x + oh * x_row;
    for (int64_t ow = 0; ow < OW; ++ow) {
      __m512 gv[OCB];
      for (int o = 0; o < OCB; ++o) gv[o] = _mm512_load_ps(gr + o * g_plane + ow * V);
      for (int k = 0; k < KB; ++k) {
        const __m512 xv = _mm512_load_ps(xr + (ow + k) * V);
        for (int o = 0; o < OCB; ++o) acc[o][k] = _mm512_fmadd_ps(gv[o], xv, acc[o][k]);
      }
    }
  }
  for (int o = 0; o < OCB; ++o)
    for (int k = 0; k < KB; ++k) _mm512_store_ps(acc_mem + (o * KB + k) * V, acc[o][k]);
}

constexpr int kMaxKB = 7;
using WeightTile = void (*)(const float*, int64_t, int64_t, const float*, int64_t, int64_t,
                            int64_t, float*);

template <int OCB, int... K>
constexpr std::array<WeightTile, kMaxKB> weight_tiles_for(std::integer_sequence<int, K...>) {
  return {&tile_weight<OCB, K + 1>...};
}

// kWeightTiles[o - 1][k - 1] = tile_weight<o, k>
const std::array<std::array<WeightTile, kMaxKB>, kMaxOCB> kWeightTiles = {
    weight_tiles_for<1>(std::make_integer_sequence<int, kMaxKB>{}),
    weight_tiles_for<2>(std::make_integer_sequence<int, kMaxKB>{}),
    weight_tiles_for<3>(std::make_integer_sequence<int, kMaxKB>{}),
    weight_tiles_for<4>(std::make_integer_sequence<int, kMaxKB>{}),
};

// gl (gradient [NB, OC, OH, OW, V] inside planes of GPH x GPW, at offset qh,
// qw), xl [NB, C, PH, PW, V] -> gw [OC, C, KH, KW]. Each thread owns a range
// of (channel tile, c, ki, kernel-column tile) accumulator tiles and walks the
// blocks in order, so every sum runs in the same order at any thread count.
void weight_lanes(const float* gl, int64_t GPH, int64_t GPW, int64_t qh, int64_t qw,
                  const float* xl, int64_t NB, int64_t C, int64_t PH, int64_t PW, int64_t OC,
                  int64_t KH, int64_t KW, float* gw) {
  const int64_t OH = PH - KH + 1, OW = PW - KW + 1;
  const int64_t ocb = even_block(OC, kMaxOCB), kb = even_block(KW, ocb == 4 ? 6 : kMaxKB);
  const int64_t tiles_oc = (OC + ocb - 1) / ocb, tiles_k = (KW + kb - 1) / kb;
  const int64_t tasks = tiles_oc * C * KH * tiles_k;
  // acc: tile t's [ocb, kb, V] at t * ocb * kb * V
  Scratch acc(tasks * ocb * kb * V);
  std::fill(acc.data(), acc.data() + tasks * ocb * kb * V, 0.f);
  const int64_t g_plane = GPH * GPW * V, x_plane = PH * PW * V;
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), me = omp_get_thread_num();
    const int64_t t0 = tasks * me / threads, t1 = tasks * (me + 1) / threads;
    for (int64_t b = 0; b < NB; ++b)
      for (int64_t t = t0; t < t1; ++t) {
        int64_t r = t;
        const int64_t k0 = r % tiles_k * kb;
        r /= tiles_k;
        const int64_t ki = r % KH;
        r /= KH;
        const int64_t c = r % C, oc0 = r / C * ocb;
        const int64_t nc = std::min(ocb, OC - oc0), nk = std::min(kb, KW - k0);
        const float* g = gl + (b * OC + oc0) * g_plane + (qh * GPW + qw) * V;
        const float* x = xl + (b * C + c) * x_plane + (ki * PW + k0) * V;
        kWeightTiles[nc - 1][nk - 1](g, g_plane, GPW * V, x, PW * V, OH, OW,
                                     acc.data() + t * ocb * kb * V);
      }
  }
  // gw[oc0 + o, c, ki, k0 + k] = the lanes' sum of tile t's acc[o][k]
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tasks; ++t) {
    int64_t r = t;
    const int64_t k0 = r % tiles_k * kb;
    r /= tiles_k;
    const int64_t ki = r % KH;
    r /= KH;
    const int64_t c = r % C, oc0 = r / C * ocb;
    const int64_t nc = std::min(ocb, OC - oc0), nk = std::min(kb, KW - k0);
    for (int64_t o = 0; o < nc; ++o)
      for (int64_t k = 0; k < nk; ++k)
        gw[(((oc0 + o) * C + c) * KH + ki) * KW + k0 + k] =
            _mm512_reduce_add_ps(_mm512_load_ps(acc.data() + (t * ocb * kb + o * nk + k) * V));
  }
}

}  // namespace

bool lanes_conv_fits(const ConvGeometry& g) {
  const int64_t NB = (g.N + V - 1) / V;
  return g.stride == 1 && g.pad < g.KH && g.pad < g.KW && g.N >= V &&
         4 * NB * V <= 5 * g.N;  // at most a quarter of the lanes left empty
}

// x [N, C, H, W], w [OC, C, KH, KW], b [OC] or null -> y [N, OC, OH, OW]
void lanes_conv_forward(const ConvGeometry& g, const float* x, const float* w, const float* b,
                        float* y) {
  const int64_t NB = (g.N + V - 1) / V, PH = g.H + 2 * g.pad, PW = g.W + 2 * g.pad;
  Scratch xl(NB * g.C * PH * PW * V), yl(NB * g.OC * g.OH * g.OW * V);
  to_lanes(x, g.N, g.C, g.H, g.W, g.pad, g.pad, xl.data());
  forward_lanes(xl.data(), NB, g.C, PH, PW, g.pad, g.pad + g.H, g.pad, g.pad + g.W, w, g.OC, g.KH,
                g.KW, yl.data());
  from_lanes(yl.data(), g.N, g.OC, g.OH * g.OW, b, y);
}

// gy [N, OC, OH, OW] -> gx [N, C, H, W], gw [OC, C, KH, KW], gb [OC] (each optional)
void lanes_conv_backward(const ConvGeometry& g, const float* x, const float* w, const float* gy,
                         float* gx, float* gw, float* gb) {
  const int64_t NB = (g.N + V - 1) / V;
  // gl: gy in lanes, padded for gx's full convolution (not padded without gx);
  // sums [NB, OC, V]: each sample's sum of each channel of gy, for gb
  const int64_t qh = gx ? g.KH - 1 - g.pad : 0, qw = gx ? g.KW - 1 - g.pad : 0;
  const int64_t GPH = g.OH + 2 * qh, GPW = g.OW + 2 * qw;
  Scratch gl(NB * g.OC * GPH * GPW * V), sums(NB * g.OC * V);
  to_lanes(gy, g.N, g.OC, g.OH, g.OW, qh, qw, gl.data(), sums.data());
  if (gb)  // gb[oc] = the samples' sums, added in sample order in double
    for (int64_t oc = 0; oc < g.OC; ++oc) {
      double total = 0;
      for (int64_t n = 0; n < g.N; ++n) total += sums.data()[(n / V * g.OC + oc) * V + n % V];
      gb[oc] = static_cast<float>(total);
    }
  if (gw) {
    const int64_t PH = g.H + 2 * g.pad, PW = g.W + 2 * g.pad;
    Scratch xl(NB * g.C * PH * PW * V);
    to_lanes(x, g.N, g.C, g.H, g.W, g.pad, g.pad, xl.data());
    weight_lanes(gl.data(), GPH, GPW, qh, qw, xl.data(), NB, g.C, PH, PW, g.OC, g.KH, g.KW, gw);
  }
  if (gx) {
    // wt [C, OC, KH, KW] = w with its kernel flipped and its channels swapped
    const int64_t KK = g.KH * g.KW;
    Scratch wt(g.C * g.OC * KK);
    for (int64_t oc = 0; oc < g.OC; ++oc)
      for (int64_t c = 0; c < g.C; ++c)
        for (int64_t k = 0; k < KK; ++k)
          wt.data()[(c * g.OC + oc) * KK + k] = w[(oc * g.C + c) * KK + KK - 1 - k];
    Scratch gxl(NB * g.C * g.H * g.W * V);
    forward_lanes(gl.data(), NB, g.OC, GPH, GPW, qh, qh + g.OH, qw, qw + g.OW, wt.data(), g.C, g.KH,
                  g.KW, gxl.data());
    from_lanes(gxl.data(), g.N, g.C, g.H * g.W, nullptr, gx);
  }
}

#else  // no AVX-512: the im2col path serves every geometry

bool lanes_conv_fits(const ConvGeometry&) { return false; }
void lanes_conv_forward(const ConvGeometry&, const float*, const float*, const float*, float*) {}
void lanes_conv_backward(const ConvGeometry&, const float*, const float*, const float*, float*,
                         float*, float*) {}

#endif

}  // namespace minidl::cpu
