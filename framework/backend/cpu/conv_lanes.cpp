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
#include <functional>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "framework/backend/cpu/cpu.h"
#include "framework/backend/cpu/dispatch.h"
#include "framework/backend/cpu/max2x2.h"

namespace minidl::cpu {

#if MINIDL_HAVE_AVX512
MINIDL_AVX512_BEGIN

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

// A tensor [N, C, H, W] and its lanes form [NB, C, H + 2 ph, W + 2 pw, V].
struct Lanes {
  int64_t N, C, H, W, ph, pw;
  int64_t PH() const { return H + 2 * ph; }
  int64_t PW() const { return W + 2 * pw; }
  int64_t plane() const { return PH() * PW() * V; }
  int64_t floats() const { return (N + V - 1) / V * C * plane(); }
};

// Channel c of block b of the lanes tensor dst: zeroes the padding (rows and
// columns) and returns the plane.
float* zero_padding(const Lanes& l, int64_t b, int64_t c, float* dst) {
  const int64_t PW = l.PW();
  float* plane = dst + (b * l.C + c) * l.plane();
  std::fill(plane, plane + l.ph * PW * V, 0.f);
  std::fill(plane + (l.ph + l.H) * PW * V, plane + l.plane(), 0.f);
  for (int64_t h = 0; h < l.H; ++h) {
    float* row = plane + (l.ph + h) * PW * V;
    std::fill(row, row + l.pw * V, 0.f);
    std::fill(row + (l.pw + l.W) * V, row + PW * V, 0.f);
  }
  return plane;
}

// Channel c of block b: src [N, C, H, W] -> dst (lanes), zero in the padding
// and in the samples past N. sums (unless null) [NB, C, V]: each sample's sum
// of the channel, added in reading order.
void to_lanes(const Lanes& l, const float* src, int64_t b, int64_t c, float* dst, float* sums) {
  const int64_t samples = std::min(V, l.N - b * V), PW = l.PW();
  float* plane = zero_padding(l, b, c, dst);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t h = 0; h < l.H; ++h) {
    float* row = plane + (l.ph + h) * PW * V;
    const float* first_row = src + ((b * V * l.C + c) * l.H + h) * l.W;
    for (int64_t w0 = 0; w0 < l.W; w0 += V) {
      const int64_t n = std::min(V, l.W - w0);
      __m512 r[16];
      for (int64_t s = 0; s < V; ++s)  // samples past N load nothing: zeros
        r[s] = _mm512_maskz_loadu_ps(s < samples ? first(n) : 0,
                                     first_row + std::min(s, samples - 1) * l.C * l.H * l.W + w0);
      transpose16(r);
      for (int64_t i = 0; i < n; ++i) {
        _mm512_store_ps(row + (l.pw + w0 + i) * V, r[i]);
        sum = _mm512_add_ps(sum, r[i]);
      }
    }
  }
  if (sums) _mm512_store_ps(sums + (b * l.C + c) * V, sum);
}

// Channel c of block b: src [NB, C, L, V] -> dst [N, C, L] plus bias[c] (when given)
void from_lanes(int64_t N, int64_t C, int64_t L, const float* src, const float* bias, int64_t b,
                int64_t c, float* dst) {
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

// A valid convolution on lanes tensors: xl [NB, C, PH, PW, V], zero outside
// rows [r0, r1) and columns [c0, c1) (whose taps are skipped where a whole
// tile row or column meets them), w [OC, C, KH, KW] -> yl [NB, OC, OH, OW, V].
// Item i of a block: channel tile i / OH, output row i % OH.
struct ForwardPlan {
  int64_t C, PH, PW, r0, r1, c0, c1, OC, KH, KW, OH, OW, ocb, owb, tiles_oc;
  ForwardPlan(int64_t C_, int64_t PH_, int64_t PW_, int64_t r0_, int64_t r1_, int64_t c0_,
              int64_t c1_, int64_t OC_, int64_t KH_, int64_t KW_)
      : C(C_), PH(PH_), PW(PW_), r0(r0_), r1(r1_), c0(c0_), c1(c1_), OC(OC_), KH(KH_), KW(KW_),
        OH(PH_ - KH_ + 1), OW(PW_ - KW_ + 1), ocb(even_block(OC_, kMaxOCB)),
        owb(even_block(OW, ocb == 4 ? 6 : ocb == 3 ? 7 : kMaxOWB)),
        tiles_oc((OC_ + ocb - 1) / ocb) {}
  int64_t items() const { return tiles_oc * OH; }

  void item(const float* xl, const float* w, float* yl, int64_t b, int64_t i) const {
    const Strides s{C, KH, KW, PH * PW * V, PW * V, C * KH * KW, OH * OW * V};
    const int64_t oh = i % OH, oc0 = i / OH * ocb, nc = std::min(ocb, OC - oc0);
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
};

// acc[o][k] = sum_{oh, ow} g[o, oh, ow] x[oh, ow + k] over one block's rows:
// OCB output channels by KB kernel columns, accumulators in registers.
// g: gl at [b, oc0, 0, 0] (plane g_plane, row g_row); x: xl at [b, c, ki, kj0].
template <int OCB, int KB>
void tile_weight(const float* g, int64_t g_plane, int64_t g_row, const float* x, int64_t x_row,
                 int64_t OH, int64_t OW, float* acc_mem) {
  __m512 acc[OCB][KB];
  for (int o = 0; o < OCB; ++o)
    for (int k = 0; k < KB; ++k) acc[o][k] = _mm512_setzero_ps();
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

// The weight gradient on lanes tensors: gl (gradient [NB, OC, OH, OW, V]
// inside planes of GPH x GPW, at offset qh, qw), xl [NB, C, PH, PW, V] ->
// gw [OC, C, KH, KW]. Item t of block b - tile t: (channel tile, c, ki,
// kernel-column tile) - writes its own sums acc[b, t]; reduce() then adds
// every weight's blocks in order, so the sums run in the same order at any
// thread count.
struct WeightPlan {
  int64_t GPH, GPW, qh, qw, C, PH, PW, OC, KH, KW, OH, OW, ocb, kb, tiles_oc, tiles_k;
  WeightPlan(int64_t GPH_, int64_t GPW_, int64_t qh_, int64_t qw_, int64_t C_, int64_t PH_,
             int64_t PW_, int64_t OC_, int64_t KH_, int64_t KW_)
      : GPH(GPH_), GPW(GPW_), qh(qh_), qw(qw_), C(C_), PH(PH_), PW(PW_), OC(OC_), KH(KH_),
        KW(KW_), OH(PH_ - KH_ + 1), OW(PW_ - KW_ + 1), ocb(even_block(OC_, kMaxOCB)),
        kb(even_block(KW_, ocb == 4 ? 6 : kMaxKB)), tiles_oc((OC_ + ocb - 1) / ocb),
        tiles_k((KW_ + kb - 1) / kb) {}
  int64_t items() const { return tiles_oc * C * KH * tiles_k; }
  int64_t tile_floats() const { return ocb * kb * V; }  // acc [NB, items, ocb * kb * V]

  // tile t -> its first output channel oc0, input channel c, row ki, column k0
  void decode(int64_t t, int64_t& oc0, int64_t& c, int64_t& ki, int64_t& k0) const {
    k0 = t % tiles_k * kb;
    t /= tiles_k;
    ki = t % KH;
    t /= KH;
    c = t % C;
    oc0 = t / C * ocb;
  }

  void item(const float* gl, const float* xl, float* acc, int64_t b, int64_t t) const {
    int64_t oc0, c, ki, k0;
    decode(t, oc0, c, ki, k0);
    const int64_t nc = std::min(ocb, OC - oc0), nk = std::min(kb, KW - k0);
    const int64_t g_plane = GPH * GPW * V;
    const float* g = gl + (b * OC + oc0) * g_plane + (qh * GPW + qw) * V;
    const float* x = xl + (b * C + c) * PH * PW * V + (ki * PW + k0) * V;
    kWeightTiles[nc - 1][nk - 1](g, g_plane, GPW * V, x, PW * V, OH, OW,
                                 acc + (b * items() + t) * tile_floats());
  }

  // gw[oc0 + o, c, ki, k0 + k] = the lanes' sum of the blocks' acc[o][k], blocks in order
  void reduce(const float* acc, int64_t NB, float* gw) const {
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < items(); ++t) {
      int64_t oc0, c, ki, k0;
      decode(t, oc0, c, ki, k0);
      const int64_t nc = std::min(ocb, OC - oc0), nk = std::min(kb, KW - k0);
      for (int64_t i = 0; i < nc * nk; ++i) {
        __m512 sum = _mm512_load_ps(acc + t * tile_floats() + i * V);
        for (int64_t b = 1; b < NB; ++b)
          sum = _mm512_add_ps(sum, _mm512_load_ps(acc + (b * items() + t) * tile_floats() + i * V));
        gw[(((oc0 + i / nk) * C + c) * KH + ki) * KW + k0 + i % nk] = _mm512_reduce_add_ps(sum);
      }
    }
  }
};

// A stage: item(b, i) for every block b and i < count.
struct Stage {
  int64_t count;
  std::function<void(int64_t, int64_t)> item;
};

// Runs the stages in order over NB blocks. With whole blocks for every thread,
// each thread takes its blocks through all stages: a block's data stays in
// the cache of the core that moved it into lanes (on this 2-core machine data
// crossing cores made the weight gradient as slow on 2 threads as on 1), and
// there is no barrier between stages. Else each stage is split across the
// threads in turn (items of a block next to each other).
void run_blocks(int64_t NB, const std::vector<Stage>& stages) {
  const int64_t threads = omp_get_max_threads();
  if (NB % threads == 0 || NB >= 4 * threads) {
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < NB; ++b)
      for (const Stage& s : stages)
        for (int64_t i = 0; i < s.count; ++i) s.item(b, i);
    return;
  }
  for (const Stage& s : stages) {
#pragma omp parallel for schedule(static)
    for (int64_t bi = 0; bi < NB * s.count; ++bi) s.item(bi / s.count, bi % s.count);
  }
}

}  // namespace
MINIDL_AVX512_END

bool lanes_conv_fits(const ConvGeometry& g) {
  const int64_t NB = (g.N + V - 1) / V;
  const bool plain = g.sh == 1 && g.sw == 1 && g.ph == g.pw && g.dh == 1 && g.dw == 1 &&
                     g.groups == 1 && g.OH == g.H + 2 * g.ph - g.KH + 1 &&
                     g.OW == g.W + 2 * g.pw - g.KW + 1;  // square padding, all else 1
  return cpu_has_avx512() && plain && g.ph < g.KH && g.ph < g.KW && g.N >= V &&
         4 * NB * V <= 5 * g.N;  // at most a quarter of the lanes left empty
}
MINIDL_AVX512_BEGIN

// x [N, C, H, W], w [OC, C, KH, KW], b [OC] or null -> y [N, OC, OH, OW]
void lanes_conv_forward(const ConvGeometry& g, const float* x, const float* w, const float* b,
                        float* y) {
  const int64_t NB = (g.N + V - 1) / V, L = g.OH * g.OW;
  const Lanes in{g.N, g.C, g.H, g.W, g.ph, g.ph};
  const ForwardPlan fp(g.C, in.PH(), in.PW(), g.ph, g.ph + g.H, g.ph, g.ph + g.W, g.OC, g.KH,
                       g.KW);
  Scratch xl(in.floats()), yl(NB * g.OC * L * V);
  run_blocks(NB, {{g.C, [&](int64_t n, int64_t c) { to_lanes(in, x, n, c, xl.data(), nullptr); }},
                  {fp.items(), [&](int64_t n, int64_t i) { fp.item(xl.data(), w, yl.data(), n, i); }},
                  {g.OC, [&](int64_t n, int64_t c) { from_lanes(g.N, g.OC, L, yl.data(), b, n, c, y); }}});
}

namespace {

// Channel c of block b: yl [NB, OC, OH, OW, V] -> pl [NB, OC, PH, PW, V] =
// max_pool2d(relu(yl + bias[c]), 2) and code [NB, OC, PH, PW, V] (int8): the
// window cell the gradient goes to (0, 1 top row, 2, 3 bottom row), -1 where
// it goes nowhere (relu's zero). The operations and their order are those of
// from_lanes' bias, relu (v < 0 ? 0 : v is max_ps(0, v)) and pool2x2_row
// (max2x2.h), so the bits are the three ops'.
void relu_pool_lanes(int64_t OC, int64_t OH, int64_t OW, const float* yl, const float* bias,
                     int64_t b, int64_t c, float* pl, int8_t* code) {
  const int64_t PH = OH / 2, PW = OW / 2, plane = (b * OC + c) * PH * PW;
  const float* y = yl + (b * OC + c) * OH * OW * V;
  const __m512 add = _mm512_set1_ps(bias ? bias[c] : 0.f), zero = _mm512_setzero_ps();
  auto cell = [&](int64_t oh, int64_t ow) {
    return _mm512_max_ps(zero, _mm512_add_ps(_mm512_load_ps(y + (oh * OW + ow) * V), add));
  };
  for (int64_t ph = 0; ph < PH; ++ph)
    for (int64_t pw = 0; pw < PW; ++pw) {
      const __m512 v = cell(2 * ph + 1, 2 * pw + 1);
      const Max2x2 w =
          max2x2(cell(2 * ph, 2 * pw), cell(2 * ph, 2 * pw + 1), cell(2 * ph + 1, 2 * pw), v);
      // relu passes the gradient where its output at the argmax is above 0:
      // the maximum, or with a NaN in the window the last cell
      const __mmask16 keep = _mm512_cmp_ps_mask(w.max, zero, _CMP_GT_OQ) |
                             (w.any_nan & _mm512_cmp_ps_mask(v, zero, _CMP_GT_OQ));
      const __m512i code_v = _mm512_mask_mov_epi32(_mm512_set1_epi32(-1), keep, w.cell);
      const int64_t at = (plane + ph * PW + pw) * V;
      _mm512_store_ps(pl + at, w.max);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(code + at), _mm512_cvtepi32_epi8(code_v));
    }
}

// Channel c of block b: gp [NB, OC, PH, PW, V] (the pooled gradient) and the
// forward's code -> the conv output's gradient in its lanes plane of gl (the
// rows and columns past 2 PH, 2 PW and the padding zero), and sums [NB, OC, V]
// as to_lanes adds them, so that gl and sums hold the bits to_lanes makes of
// max_pool_backward's and relu's gradient.
void unpool_lanes(const Lanes& l, const float* gp, const int8_t* code, int64_t b, int64_t c,
                  float* gl, float* sums) {
  const int64_t PH = l.H / 2, PW = l.W / 2, GPW = l.PW();
  const int64_t pooled = (b * l.C + c) * PH * PW * V;
  float* plane = zero_padding(l, b, c, gl);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t h = 0; h < l.H; ++h) {
    float* row = plane + (l.ph + h) * GPW * V;
    for (int64_t w = 0; w < l.W; ++w) {
      __m512 cell = _mm512_setzero_ps();
      if (h < 2 * PH && w < 2 * PW) {
        const int64_t at = pooled + (h / 2 * PW + w / 2) * V;
        const __m512i k = _mm512_cvtepi8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(code + at)));
        const __mmask16 mine = _mm512_cmpeq_epi32_mask(k, _mm512_set1_epi32(h % 2 * 2 + w % 2));
        // + 0 as max_pool_backward's does: a -0 gradient lands as +0
        cell = _mm512_maskz_add_ps(mine, _mm512_load_ps(gp + at), _mm512_setzero_ps());
      }
      _mm512_store_ps(row + (l.pw + w) * V, cell);
      sum = _mm512_add_ps(sum, cell);
    }
  }
  _mm512_store_ps(sums + (b * l.C + c) * V, sum);
}

// The backward of a lanes convolution once fill(gyl, gl, sums, b, oc) has put
// channel oc of block b of the output's gradient into gl (lanes, padded by
// KH-1-pad, KW-1-pad for gx's full convolution, unpadded without gx) and its
// per-sample sums into sums [NB, OC, V] -> gx, gw, gb (each optional).
using FillGradient = std::function<void(const Lanes&, float*, float*, int64_t, int64_t)>;
void lanes_backward(const ConvGeometry& g, const float* x, const float* w, const FillGradient& fill,
                    float* gx, float* gw, float* gb) {
  const int64_t NB = (g.N + V - 1) / V;
  const int64_t qh = gx ? g.KH - 1 - g.ph : 0, qw = gx ? g.KW - 1 - g.ph : 0;
  const Lanes gyl{g.N, g.OC, g.OH, g.OW, qh, qw}, xin{g.N, g.C, g.H, g.W, g.ph, g.ph};
  Scratch gl(gyl.floats()), sums(NB * g.OC * V);
  std::vector<Stage> stages = {
      {g.OC, [&](int64_t n, int64_t c) { fill(gyl, gl.data(), sums.data(), n, c); }}};
  // gw: x in lanes, then each block's accumulator tiles
  const WeightPlan wp(gyl.PH(), gyl.PW(), qh, qw, g.C, xin.PH(), xin.PW(), g.OC, g.KH, g.KW);
  Scratch xl(gw ? xin.floats() : 0), acc(gw ? NB * wp.items() * wp.tile_floats() : 0);
  if (gw) {
    stages.push_back({g.C, [&](int64_t n, int64_t c) { to_lanes(xin, x, n, c, xl.data(), nullptr); }});
    stages.push_back({wp.items(), [&](int64_t n, int64_t t) {
                        wp.item(gl.data(), xl.data(), acc.data(), n, t);
                      }});
  }
  // gx: the valid convolution of gl with wt [C, OC, KH, KW], w with its kernel
  // flipped and its channels swapped, then out of lanes. Planned only when
  // wanted: without gx, gl is unpadded and the plan's sizes would be negative.
  std::optional<ForwardPlan> dp;
  if (gx) dp.emplace(g.OC, gyl.PH(), gyl.PW(), qh, qh + g.OH, qw, qw + g.OW, g.C, g.KH, g.KW);
  const int64_t KK = g.KH * g.KW;
  Scratch wt(gx ? g.C * g.OC * KK : 0), gxl(gx ? NB * g.C * g.H * g.W * V : 0);
  if (gx) {
    for (int64_t oc = 0; oc < g.OC; ++oc)
      for (int64_t c = 0; c < g.C; ++c)
        for (int64_t k = 0; k < KK; ++k)
          wt.data()[(c * g.OC + oc) * KK + k] = w[(oc * g.C + c) * KK + KK - 1 - k];
    stages.push_back({dp->items(), [&](int64_t n, int64_t i) {
                        dp->item(gl.data(), wt.data(), gxl.data(), n, i);
                      }});
    stages.push_back({g.C, [&](int64_t n, int64_t c) {
                        from_lanes(g.N, g.C, g.H * g.W, gxl.data(), nullptr, n, c, gx);
                      }});
  }
  run_blocks(NB, stages);
  if (gw) wp.reduce(acc.data(), NB, gw);
  if (gb)  // gb[oc] = the samples' sums, added in sample order in double
    for (int64_t oc = 0; oc < g.OC; ++oc) {
      double total = 0;
      for (int64_t n = 0; n < g.N; ++n) total += sums.data()[(n / V * g.OC + oc) * V + n % V];
      gb[oc] = static_cast<float>(total);
    }
}

}  // namespace

// gy [N, OC, OH, OW] -> gx [N, C, H, W], gw [OC, C, KH, KW], gb [OC] (each optional)
void lanes_conv_backward(const ConvGeometry& g, const float* x, const float* w, const float* gy,
                         float* gx, float* gw, float* gb) {
  lanes_backward(
      g, x, w,
      [gy](const Lanes& gyl, float* gl, float* sums, int64_t b, int64_t oc) {
        to_lanes(gyl, gy, b, oc, gl, sums);
      },
      gx, gw, gb);
}

MINIDL_AVX512_END
// The state: code [NB, OC, PH, PW, V] int8 (relu_pool_lanes)
int64_t lanes_relu_pool_state_bytes(const ConvGeometry& g) {
  if (!lanes_conv_fits(g) || g.OH < 2 || g.OW < 2) return 0;
  return (g.N + V - 1) / V * V * g.OC * (g.OH / 2) * (g.OW / 2);
}
MINIDL_AVX512_BEGIN

// x [N, C, H, W], w [OC, C, KH, KW], b [OC] or null -> y [N, OC, OH/2, OW/2], state
void lanes_relu_pool_forward(const ConvGeometry& g, const float* x, const float* w, const float* b,
                             float* y, void* state) {
  const int64_t NB = (g.N + V - 1) / V, L = g.OH * g.OW, PL = g.OH / 2 * (g.OW / 2);
  const Lanes in{g.N, g.C, g.H, g.W, g.ph, g.ph};
  const ForwardPlan fp(g.C, in.PH(), in.PW(), g.ph, g.ph + g.H, g.ph, g.ph + g.W, g.OC, g.KH,
                       g.KW);
  Scratch xl(in.floats()), yl(NB * g.OC * L * V), pl(NB * g.OC * PL * V);
  int8_t* code = static_cast<int8_t*>(state);
  run_blocks(NB, {{g.C, [&](int64_t n, int64_t c) { to_lanes(in, x, n, c, xl.data(), nullptr); }},
                  {fp.items(), [&](int64_t n, int64_t i) { fp.item(xl.data(), w, yl.data(), n, i); }},
                  {g.OC, [&](int64_t n, int64_t c) {
                     relu_pool_lanes(g.OC, g.OH, g.OW, yl.data(), b, n, c, pl.data(), code);
                     from_lanes(g.N, g.OC, PL, pl.data(), nullptr, n, c, y);
                   }}});
}

// gy [N, OC, OH/2, OW/2], state -> gx [N, C, H, W], gw [OC, C, KH, KW], gb [OC] (each optional)
void lanes_relu_pool_backward(const ConvGeometry& g, const float* x, const float* w,
                              const float* gy, const void* state, float* gx, float* gw,
                              float* gb) {
  const Lanes pooled{g.N, g.OC, g.OH / 2, g.OW / 2, 0, 0};
  Scratch gp(pooled.floats());
  const int8_t* code = static_cast<const int8_t*>(state);
  lanes_backward(
      g, x, w,
      [&](const Lanes& gyl, float* gl, float* sums, int64_t b, int64_t oc) {
        to_lanes(pooled, gy, b, oc, gp.data(), nullptr);
        unpool_lanes(gyl, gp.data(), code, b, oc, gl, sums);
      },
      gx, gw, gb);
}

MINIDL_AVX512_END
#else  // no AVX-512: the im2col path serves every geometry, and nothing is fused

bool lanes_conv_fits(const ConvGeometry&) { return false; }
int64_t lanes_relu_pool_state_bytes(const ConvGeometry&) { return 0; }
void lanes_relu_pool_forward(const ConvGeometry&, const float*, const float*, const float*, float*,
                             void*) {}
void lanes_relu_pool_backward(const ConvGeometry&, const float*, const float*, const float*,
                              const void*, float*, float*, float*) {}
void lanes_conv_forward(const ConvGeometry&, const float*, const float*, const float*, float*) {}
void lanes_conv_backward(const ConvGeometry&, const float*, const float*, const float*, float*,
                         float*, float*) {}

#endif

}  // namespace minidl::cpu
