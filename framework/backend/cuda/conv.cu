// conv2d on CUDA: im2col into a column buffer, then cuBLAS GEMMs over groups
// of samples; backward scatters the column gradient back with col2im. Small
// windows may run by direct kernels instead, one launch a pass, and any pass
// by cuDNN: the choice is per shape (conv_cudnn.cpp).
// Letters as in kernels.h; L = OH*OW, G = groups, CKK = C/G*KH*KW (one
// channel group's column rows: each channel group cg is its own im2col and
// GEMMs with its weight rows w_cg [OC/G, CKK]). A sample group is the samples
// whose columns fit kColumnBytes. A column buffer holds sample s's element
// (row, l) at s * sample_stride + row * ld + l: per sample ([G, CKK, L],
// sample_stride CKK*L, ld L) for batched GEMMs with the weight, or side by
// side ([CKK, G*L], sample_stride L, ld G*L) for the weight gradient, one GEMM
// whose inner dimension runs over the group's samples.
#include <algorithm>
#include <climits>
#include <functional>
#include <utility>

#include "framework/backend/cuda/device.cuh"

namespace minidl::cuda {
namespace {

constexpr int64_t kColumnBytes = int64_t{128} << 20;

int64_t group_size(const ConvGeometry& g) {
  const int64_t per_sample = g.C / g.groups * g.KH * g.KW * g.OH * g.OW * int64_t{sizeof(float)};
  return std::clamp<int64_t>(kColumnBytes / std::max<int64_t>(per_sample, 1), 1,
                             std::max<int64_t>(g.N, 1));
}

// Whether 32-bit indices hold `elements` with room for a grid-stride step
// (a 64-bit division is many times a 32-bit one, and these kernels divide
// per thread).
bool fits_int32(int64_t elements) { return elements < INT_MAX / 2; }

// Whether x's (samples of them) and a column buffer's offsets fit in 32 bits
bool column_offsets_fit(const ConvGeometry& g, int64_t samples, int64_t sample_stride, int64_t ld) {
  return fits_int32(
      std::max(samples * g.C * g.H * g.W, samples * sample_stride + g.C * g.KH * g.KW * ld));
}

// x [S, C, H, W], channel group cg -> col (S samples, layout above), zero
// where the window hits padding. One thread per (sample, channel, output
// pixel) writes that pixel's KH*KW column rows: its divisions are per window,
// not per column element.
template <class I>
__global__ void im2col_kernel(ConvGeometry g, I cg, I samples, const float* x, float* col,
                              I sample_stride, I ld) {
  const I C = g.C, H = g.H, W = g.W, KH = g.KH, KW = g.KW, OW = g.OW, Cg = C / g.groups;
  const I sh = g.sh, sw = g.sw, ph = g.ph, pw = g.pw, dh = g.dh, dw = g.dw;
  const I L = g.OH * OW, total = samples * Cg * L;
  for (I i = thread_index(); i < total; i += thread_count()) {
    const I l = i % L, c = i / L % Cg, s = i / (L * Cg);
    const I h0 = l / OW * sh - ph, w0 = l % OW * sw - pw;
    const float* xc = x + ((s * C + cg * Cg + c) * H) * W;
    float* out = col + s * sample_stride + c * KH * KW * ld + l;
    for (I ki = 0; ki < KH; ++ki) {
      const I h = h0 + ki * dh;
      const bool row_inside = h >= 0 && h < H;
      for (I kj = 0; kj < KW; ++kj, out += ld) {
        const I w = w0 + kj * dw;
        *out = row_inside && w >= 0 && w < W ? xc[h * W + w] : 0.f;
      }
    }
  }
}

// col (S samples, layout above) -> channel group cg of x [S, C, H, W]
// (overwritten): each pixel sums the column entries of the windows that
// cover it, in (ki, kj) order as the CPU's col2im adds them; no atomics,
// deterministic. Without dilation the covering taps of an axis are every
// stride-th from the first: one division per axis, not one per tap.
template <class I>
__global__ void col2im_kernel(ConvGeometry g, I cg, I samples, const float* col, I sample_stride,
                              I ld, float* x) {
  const I C = g.C, H = g.H, W = g.W, KH = g.KH, KW = g.KW, OH = g.OH, OW = g.OW, Cg = C / g.groups;
  const I sh = g.sh, sw = g.sw, ph = g.ph, pw = g.pw, dh = g.dh, dw = g.dw;
  const I total = samples * Cg * H * W;
  for (I i = thread_index(); i < total; i += thread_count()) {
    const I w = i % W, h = i / W % H, c = i / (W * H) % Cg, s = i / (W * H * Cg);
    const float* cs = col + s * sample_stride + c * KH * KW * ld;
    float sum = 0.f;
    if (dh == 1 && dw == 1) {  // tap k covers output (p - k) / stride where that divides
      const I hp = h + ph, wp = w + pw, kj0 = wp % sw, ow0 = wp / sw;
      for (I ki = hp % sh, oh = hp / sh; ki < KH && oh >= 0; ki += sh, --oh) {
        if (oh >= OH) continue;
        for (I kj = kj0, ow = ow0; kj < KW && ow >= 0; kj += sw, --ow)
          if (ow < OW) sum += cs[(ki * KW + kj) * ld + oh * OW + ow];
      }
    } else {
      for (I ki = 0; ki < KH; ++ki) {
        const I hp = h + ph - ki * dh;  // = oh * sh for the window row that covers h
        if (hp < 0 || hp % sh != 0 || hp / sh >= OH) continue;
        for (I kj = 0; kj < KW; ++kj) {
          const I wp = w + pw - kj * dw;
          if (wp < 0 || wp % sw != 0 || wp / sw >= OW) continue;
          sum += cs[(ki * KW + kj) * ld + hp / sh * OW + wp / sw];
        }
      }
    }
    x[((s * C + cg * Cg + c) * H + h) * W + w] = sum;
  }
}

// y [N, OC, L] += b [OC]
__global__ void add_bias_kernel(int64_t n, int64_t oc, int64_t l, const float* b, float* y) {
  for (int64_t i = thread_index(); i < n * oc * l; i += thread_count()) y[i] += b[i / l % oc];
}

// gy [N, OC, L] -> gb [OC], one block per output channel (for_channel)
__global__ void bias_grad_kernel(int64_t n, int64_t oc, int64_t l, const float* gy, float* gb) {
  for (int64_t o = blockIdx.x; o < oc; o += gridDim.x) {
    float s = 0.f;
    for_channel(n, oc, l, o, [&](int64_t k) { s += gy[k]; });
    s = block_sum(s);
    if (threadIdx.x == 0) gb[o] = s;
  }
}

// src [A, B, L] -> dst [B, A, L]
template <class I>
__global__ void swap01_kernel(I a, I b, I l, const float* src, float* dst) {
  for (I i = thread_index(); i < a * b * l; i += thread_count()) {
    const I li = i % l, ai = i / l % a, bi = i / (l * a);
    dst[i] = src[(ai * b + bi) * l + li];
  }
}

// ---- direct kernels: no column buffer, one launch a pass (the bias in
// it), for small windows where im2col's buffer and extra launches cost more
// than the GEMM saves (LeNet's 5x5 convolutions). 32-bit indices:
// direct_suits checks the sizes. Each output is summed by one thread, or one
// block, in a fixed order: deterministic.

// x [N, C, H, W], w [OC, C/G, KH, KW], b [OC] or null -> y [N, OC, OH, OW]:
// one thread per output sums its window in (c, ki, kj) order, then adds b
__global__ void direct_forward_kernel(ConvGeometry g, const float* x, const float* w,
                                      const float* b, float* y) {
  const int C = g.C, H = g.H, W = g.W, OC = g.OC, KH = g.KH, KW = g.KW, OH = g.OH, OW = g.OW;
  const int sh = g.sh, sw = g.sw, dh = g.dh, dw = g.dw;  // 32-bit in the loops
  const int Cg = C / g.groups, OCg = OC / g.groups, total = g.N * OC * OH * OW;
  for (int i = thread_index(); i < total; i += thread_count()) {
    const int ow = i % OW, oh = i / OW % OH, oc = i / (OW * OH) % OC, n = i / (OW * OH * OC);
    const int h0 = oh * sh - g.ph, w0 = ow * sw - g.pw;
    const float* xn = x + (n * C + oc / OCg * Cg) * H * W;
    const float* wo = w + oc * Cg * KH * KW;
    float s = 0.f;
    for (int c = 0; c < Cg; ++c)
      for (int ki = 0; ki < KH; ++ki) {
        const int h = h0 + ki * dh;
        if (h < 0 || h >= H) continue;
        for (int kj = 0; kj < KW; ++kj) {
          const int wi = w0 + kj * dw;
          if (wi >= 0 && wi < W) s += xn[(c * H + h) * W + wi] * wo[(c * KH + ki) * KW + kj];
        }
      }
    y[i] = b ? s + b[oc] : s;
  }
}

// gy [N, OC, OH, OW], w -> gx [N, C, H, W] (overwritten): one thread per
// input pixel sums gy * w over the windows that cover it, in (oc, ki, kj) order
__global__ void direct_input_grad_kernel(ConvGeometry g, const float* w, const float* gy,
                                         float* gx) {
  const int C = g.C, H = g.H, W = g.W, OC = g.OC, KH = g.KH, KW = g.KW, OH = g.OH, OW = g.OW;
  const int sh = g.sh, sw = g.sw, ph = g.ph, pw = g.pw, dh = g.dh, dw = g.dw;
  const int Cg = C / g.groups, OCg = OC / g.groups, total = g.N * C * H * W;
  for (int i = thread_index(); i < total; i += thread_count()) {
    const int wi = i % W, h = i / W % H, c = i / (W * H) % C, n = i / (W * H * C);
    const int oc0 = c / Cg * OCg;
    float s = 0.f;
    for (int o = oc0; o < oc0 + OCg; ++o) {
      const float* gyo = gy + (n * OC + o) * OH * OW;
      const float* wo = w + (o * Cg + c % Cg) * KH * KW;
      for (int ki = 0; ki < KH; ++ki) {
        int oh = h + ph - ki * dh;  // = oh * sh for the window row that covers h
        if (oh < 0 || (sh != 1 && oh % sh != 0)) continue;
        if ((oh = sh == 1 ? oh : oh / sh) >= OH) continue;
        for (int kj = 0; kj < KW; ++kj) {
          int ow = wi + pw - kj * dw;
          if (ow < 0 || (sw != 1 && ow % sw != 0)) continue;
          if ((ow = sw == 1 ? ow : ow / sw) >= OW) continue;
          s += gyo[oh * OW + ow] * wo[ki * KW + kj];
        }
      }
    }
    gx[i] = s;
  }
}

// ---- the tiled direct kernel: stride 1, no dilation, one group, windows
// up to 5x5, 16 or more output channels; the forward, and the input gradient
// as the forward of gy with w flipped and transposed. Each thread sums one
// output pixel for kTileOc output channels at once; the block's weights go
// through shared memory kTileChunk input channels at a time, laid out
// [c][tap][oc] so that a thread reads its kTileOc weights as float4s that the
// whole warp shares. Per output the sum runs in (c, ki, kj) order:
// deterministic.

constexpr int kTileOc = 16, kTileChunk = 16, kTileMaxTaps = 25;

// in [N, CI, IH, IW] -> out [N, CO, OH, OW], window KH x KW, padding ph, pw
// (negative: cropped)
struct TileShape {
  int N, CI, IH, IW, CO, OH, OW, KH, KW, ph, pw;
};

// kFlipped: w is [CI, CO, KH, KW] read with both window axes reversed (the
// input gradient); else w is [CO, CI, KH, KW]. b [CO] or null.
// grid (pixel blocks, CO / kTileOc rounded up), kThreads threads
template <bool kFlipped>
__global__ void tile_conv_kernel(TileShape t, const float* in, const float* w, const float* b,
                                 float* out) {
  __shared__ float4 ws[kTileChunk * kTileMaxTaps * kTileOc / 4];
  const int taps = t.KH * t.KW, co0 = blockIdx.y * kTileOc, pixels = t.N * t.OH * t.OW;
  // the loop is the block's, not the thread's: every thread meets each __syncthreads
  for (int base = blockIdx.x * blockDim.x; base < pixels; base += gridDim.x * blockDim.x) {
    const int pixel = base + threadIdx.x;
    const bool active = pixel < pixels;
    const int ow = pixel % t.OW, oh = pixel / t.OW % t.OH, n = active ? pixel / (t.OW * t.OH) : 0;
    const float* in_n = in + n * t.CI * t.IH * t.IW;
    float acc[kTileOc] = {};
    for (int c0 = 0; c0 < t.CI; c0 += kTileChunk) {
      const int cc = t.CI - c0 < kTileChunk ? t.CI - c0 : kTileChunk;
      float* wf = reinterpret_cast<float*>(ws);
      for (int e = threadIdx.x; e < cc * taps * kTileOc; e += blockDim.x) {
        const int o = e % kTileOc, k = e / kTileOc % taps, ci = c0 + e / (kTileOc * taps);
        const int co = co0 + o;
        wf[e] = co >= t.CO ? 0.f
                : kFlipped ? w[(ci * t.CO + co) * taps + taps - 1 - k]
                           : w[(co * t.CI + ci) * taps + k];
      }
      __syncthreads();
      for (int c = 0; active && c < cc; ++c) {
        const float* ic = in_n + (c0 + c) * t.IH * t.IW;
        for (int ki = 0; ki < t.KH; ++ki) {
          const int h = oh - t.ph + ki;
          if (h < 0 || h >= t.IH) continue;
          for (int kj = 0; kj < t.KW; ++kj) {
            const int x = ow - t.pw + kj;
            if (x < 0 || x >= t.IW) continue;
            const float v = ic[h * t.IW + x];
            const float4* wk = ws + (c * taps + ki * t.KW + kj) * (kTileOc / 4);
#pragma unroll
            for (int q = 0; q < kTileOc / 4; ++q) {
              const float4 f = wk[q];
              acc[4 * q] += v * f.x;
              acc[4 * q + 1] += v * f.y;
              acc[4 * q + 2] += v * f.z;
              acc[4 * q + 3] += v * f.w;
            }
          }
        }
      }
      __syncthreads();
    }
    if (!active) continue;
#pragma unroll
    for (int o = 0; o < kTileOc; ++o)
      if (co0 + o < t.CO)
        out[((n * t.CO + co0 + o) * t.OH + oh) * t.OW + ow] = b ? acc[o] + b[co0 + o] : acc[o];
  }
}

// The tiled weight gradient of a K x K window (stride 1, no dilation, one
// group): x [N, C, H, W] (t's in), gy [N, OC, OH, OW] (t's out) -> part [P,
// OC*C*K*K] (w's order; with P = 1 that is gw itself). Block (c, a group of
// kGradOc output channels, part p of the samples); its threads run along the
// part's output pixels, each keeping kGradOc*K*K sums in registers; then each
// sum is folded over the block's threads by a fixed tree: deterministic.
// kThreads threads.
constexpr int kGradOc = 4;

template <int K>
__global__ void tile_weight_grad_kernel(TileShape t, int per_part, const float* x, const float* gy,
                                        float* part) {
  __shared__ float sums[kGradOc * K * K * kThreads];  // 36 KiB for 3x3
  const int c = blockIdx.x, oc0 = blockIdx.y * kGradOc, L = t.OH * t.OW;
  const int n0 = blockIdx.z * per_part, n1 = n0 + per_part < t.N ? n0 + per_part : t.N;
  float acc[kGradOc][K * K] = {};
  for (int i = threadIdx.x; i < (n1 - n0) * L; i += kThreads) {
    const int n = n0 + i / L, l = i % L, oh = l / t.OW, ow = l % t.OW;
    float v[kGradOc];
#pragma unroll
    for (int o = 0; o < kGradOc; ++o)
      v[o] = oc0 + o < t.CO ? gy[(n * t.CO + oc0 + o) * L + l] : 0.f;
    const float* xc = x + (n * t.CI + c) * t.IH * t.IW;
#pragma unroll
    for (int ki = 0; ki < K; ++ki) {
      const int h = oh - t.ph + ki;
#pragma unroll
      for (int kj = 0; kj < K; ++kj) {
        const int w = ow - t.pw + kj;
        const float xv = h >= 0 && h < t.IH && w >= 0 && w < t.IW ? xc[h * t.IW + w] : 0.f;
#pragma unroll
        for (int o = 0; o < kGradOc; ++o) acc[o][ki * K + kj] += v[o] * xv;
      }
    }
  }
  // the block's sums: a tree over the threads in shared memory, the same pairs every time
#pragma unroll
  for (int o = 0; o < kGradOc; ++o)
#pragma unroll
    for (int k = 0; k < K * K; ++k) sums[(o * K * K + k) * kThreads + threadIdx.x] = acc[o][k];
  for (int half = kThreads / 2; half > 0; half /= 2) {
    __syncthreads();
    for (int e = threadIdx.x; e < kGradOc * K * K * half; e += kThreads) {
      const int r = e / half, j = e % half;
      sums[r * kThreads + j] += sums[r * kThreads + j + half];
    }
  }
  __syncthreads();
  const int rows = t.CO * t.CI * K * K;
  for (int r = threadIdx.x; r < kGradOc * K * K; r += kThreads) {
    const int o = r / (K * K), k = r % (K * K);
    if (oc0 + o < t.CO)
      part[blockIdx.z * rows + ((oc0 + o) * t.CI + c) * K * K + k] = sums[r * kThreads];
  }
}

// x, gy -> the rows r of [gw (OC*CKK, w's order); gb (OC) where wanted],
// over the samples of part p: one block per (r, p), its threads along the
// output pixels l, each over the part's samples. One part writes gw and gb
// itself; more write part [P, rows] for sum_parts_kernel.
__global__ void direct_weight_grad_kernel(ConvGeometry g, int rows, int parts, int per_part,
                                          const float* x, const float* gy, float* gw, float* gb,
                                          float* part) {
  const int C = g.C, H = g.H, W = g.W, OC = g.OC, KH = g.KH, KW = g.KW, OW = g.OW;
  const int sh = g.sh, sw = g.sw, ph = g.ph, pw = g.pw, dh = g.dh, dw = g.dw;
  const int Cg = C / g.groups, OCg = OC / g.groups, CKK = Cg * KH * KW, L = g.OH * OW;
  for (int t = blockIdx.x; t < rows * parts; t += gridDim.x) {
    const int r = t % rows, p = t / rows, n0 = p * per_part;
    const int n1 = n0 + per_part < g.N ? n0 + per_part : static_cast<int>(g.N);
    const bool bias = r >= OC * CKK;
    const int oc = bias ? r - OC * CKK : r / CKK, k = r % CKK;
    const int c = oc / OCg * Cg + k / (KH * KW), ki = k / KW % KH, kj = k % KW;
    float s = 0.f;
    for (int l = threadIdx.x; l < L; l += blockDim.x) {
      const int h = l / OW * sh - ph + ki * dh, wi = l % OW * sw - pw + kj * dw;
      if (!bias && (h < 0 || h >= H || wi < 0 || wi >= W)) continue;
      for (int n = n0; n < n1; ++n) {
        const float v = gy[(n * OC + oc) * L + l];
        s += bias ? v : v * x[((n * C + c) * H + h) * W + wi];
      }
    }
    s = block_sum(s);
    if (threadIdx.x != 0) continue;
    if (parts > 1) part[p * rows + r] = s;
    else if (bias) gb[oc] = s;
    else gw[r] = s;
  }
}

// part [P, rows] -> gw, gb as above, each row summed over p in order
__global__ void sum_parts_kernel(int rows, int parts, int weight_rows, const float* part,
                                 float* gw, float* gb) {
  for (int r = thread_index(); r < rows; r += thread_count()) {
    float s = 0.f;
    for (int p = 0; p < parts; ++p) s += part[p * rows + r];
    if (r < weight_rows) gw[r] = s;
    else gb[r - weight_rows] = s;
  }
}

void im2col(const ConvGeometry& g, int64_t cg, int64_t samples, const float* x, float* col,
            int64_t sample_stride, int64_t ld) {
  const int64_t n = samples * g.C / g.groups * g.OH * g.OW;  // threads' work items
  if (column_offsets_fit(g, samples, sample_stride, ld))
    im2col_kernel<int><<<blocks_for(n), kThreads, 0, stream()>>>(
        g, static_cast<int>(cg), static_cast<int>(samples), x, col, static_cast<int>(sample_stride),
        static_cast<int>(ld));
  else
    im2col_kernel<int64_t>
        <<<blocks_for(n), kThreads, 0, stream()>>>(g, cg, samples, x, col, sample_stride, ld);
  CUDA_CHECK_LAUNCH();
}

// col -> channel group cg of x (samples of them), as col2im_kernel
void col2im(const ConvGeometry& g, int64_t cg, int64_t samples, const float* col,
            int64_t sample_stride, int64_t ld, float* x) {
  const int64_t n = samples * g.C / g.groups * g.H * g.W;
  if (column_offsets_fit(g, samples, sample_stride, ld))
    col2im_kernel<int><<<blocks_for(n), kThreads, 0, stream()>>>(
        g, static_cast<int>(cg), static_cast<int>(samples), col, static_cast<int>(sample_stride),
        static_cast<int>(ld), x);
  else
    col2im_kernel<int64_t>
        <<<blocks_for(n), kThreads, 0, stream()>>>(g, cg, samples, col, sample_stride, ld, x);
  CUDA_CHECK_LAUNCH();
}

// Whether the direct kernels take g: sizes within 32 bits, and windows small
// enough that a thread's loop stays short (an output reads C/G*KH*KW inputs;
// an input pixel feeds OC/G*KH*KW outputs).
bool direct_suits(const ConvGeometry& g) {
  const int64_t biggest = std::max({g.N * g.C * g.H * g.W, g.N * g.OC * g.OH * g.OW,
                                    g.OC * (g.C / g.groups * g.KH * g.KW + 1)});
  return biggest < INT_MAX && g.C / g.groups * g.KH * g.KW <= 1024 &&
         g.OC / g.groups * g.KH * g.KW <= 1024;
}

// gy [N, OC, OH, OW] -> gb [OC] by bias_grad_kernel
void bias_grad(const ConvGeometry& g, const float* gy, float* gb) {
  bias_grad_kernel<<<blocks_for(g.OC, 1), kThreads, 0, stream()>>>(g.N, g.OC, g.OH * g.OW, gy, gb);
  CUDA_CHECK_LAUNCH();
}

// g's forward as the tiled kernels' shape: x in, y out (the weight gradient's too)
TileShape forward_tile(const ConvGeometry& g) {
  return {int(g.N),  int(g.C),  int(g.H),  int(g.W),  int(g.OC), int(g.OH),
          int(g.OW), int(g.KH), int(g.KW), int(g.ph), int(g.pw)};
}

// Whether the tiled kernel takes g's forward (its input gradient: the same
// with C for OC); direct_suits too
bool tile_suits(const ConvGeometry& g, int64_t out_channels) {
  return g.groups == 1 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 &&
         g.KH * g.KW <= kTileMaxTaps && out_channels >= kTileOc && direct_suits(g) &&
         fits_int32(g.N * std::max(g.C * g.H * g.W, g.OC * g.OH * g.OW));
}

// The samples in parts of about 4096 output pixels, so that small weights
// still give the GPU enough blocks, and at most max_parts: {parts, samples
// per part}; 32-bit offsets need parts * rows < INT_MAX
std::pair<int64_t, int64_t> sample_parts(const ConvGeometry& g, int64_t max_parts) {
  int64_t parts = std::clamp<int64_t>(g.N * g.OH * g.OW / 4096, 1, std::max<int64_t>(g.N, 1));
  parts = std::min(parts, max_parts);
  const int64_t per_part = std::max<int64_t>((g.N + parts - 1) / parts, 1);
  return {std::max<int64_t>((g.N + per_part - 1) / per_part, 1), per_part};
}

void tile_conv(const TileShape& t, bool flipped, const float* in, const float* w, const float* b,
               float* out) {
  const dim3 grid(blocks_for(int64_t{t.N} * t.OH * t.OW, kThreads), (t.CO + kTileOc - 1) / kTileOc);
  if (flipped)
    tile_conv_kernel<true><<<grid, kThreads, 0, stream()>>>(t, in, w, b, out);
  else
    tile_conv_kernel<false><<<grid, kThreads, 0, stream()>>>(t, in, w, b, out);
  CUDA_CHECK_LAUNCH();
}

// gw [OC, C, 3, 3] by tile_weight_grad_kernel, the samples' parts summed by
// sum_parts_kernel (grid z: at most 65535 parts)
void tile_weight_grad(const ConvGeometry& g, const float* x, const float* gy, float* gw) {
  const int64_t rows = g.OC * g.C * 9;
  const auto [parts, per_part] = sample_parts(g, std::min<int64_t>(65535, (INT_MAX - 1) / rows));
  Scratch<float> part(parts > 1 ? parts * rows : 1);
  const dim3 grid(static_cast<unsigned>(g.C), static_cast<unsigned>((g.OC + kGradOc - 1) / kGradOc),
                  static_cast<unsigned>(parts));
  tile_weight_grad_kernel<3><<<grid, kThreads, 0, stream()>>>(
      forward_tile(g), static_cast<int>(per_part), x, gy, parts > 1 ? part.data() : gw);
  CUDA_CHECK_LAUNCH();
  if (parts == 1) return;
  sum_parts_kernel<<<blocks_for(rows), kThreads, 0, stream()>>>(
      static_cast<int>(rows), static_cast<int>(parts), static_cast<int>(rows), part.data(), gw,
      nullptr);
  CUDA_CHECK_LAUNCH();
}

// gw [OC, CKK] and gb [OC] (null: not wanted) by the tiled kernel where it
// takes g (3x3 windows, C * OC >= 256), else direct_weight_grad_kernel, the
// samples' parts summed by sum_parts_kernel
void direct_weight_grad(const ConvGeometry& g, const float* x, const float* gy, float* gw,
                        float* gb) {
  if (tile_suits(g, g.OC) && g.KH == 3 && g.KW == 3 && g.C * g.OC >= 256 && g.C <= 65535) {
    tile_weight_grad(g, x, gy, gw);
    if (gb) bias_grad(g, gy, gb);
    return;
  }
  const int64_t L = g.OH * g.OW, weight_rows = g.OC * (g.C / g.groups) * g.KH * g.KW;
  const int64_t rows = weight_rows + (gb ? g.OC : 0);
  const auto [parts, per_part] = sample_parts(g, (INT_MAX - 1) / rows);
  const int threads = static_cast<int>(std::clamp<int64_t>((L + 31) / 32 * 32, 32, kThreads));
  Scratch<float> part(parts > 1 ? parts * rows : 1);
  direct_weight_grad_kernel<<<blocks_for(rows * parts, 1), threads, 0, stream()>>>(
      g, static_cast<int>(rows), static_cast<int>(parts), static_cast<int>(per_part), x, gy, gw,
      gb, part.data());
  CUDA_CHECK_LAUNCH();
  if (parts == 1) return;
  sum_parts_kernel<<<blocks_for(rows), kThreads, 0, stream()>>>(
      static_cast<int>(rows), static_cast<int>(parts), static_cast<int>(weight_rows), part.data(),
      gw, gb);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

// x [N, C, H, W], w [OC, C/G, KH, KW], b [OC] or null -> y [N, OC, OH, OW]:
// the direct kernel (the bias in it) or cuDNN where the plan says, else per
// sample group and channel group cg y_s[cg rows] [OC/G, L] = w_cg [OC/G, CKK]
// col_s [CKK, L] as one batched GEMM (weight stride 0); then the bias. A 1x1
// kernel with stride 1, no padding and OH, OW = H, W reads x itself as the
// columns.
void conv2d_forward(const ConvGeometry& g, const float* x, const float* w, const float* b,
                    float* y) {
  const int64_t L = g.OH * g.OW, chw = g.C * g.H * g.W;
  const int64_t Cg = g.C / g.groups, OCg = g.OC / g.groups, CKK = Cg * g.KH * g.KW;
  if (g.N * g.OC * L == 0) return;
  auto by_im2col = [&] {
    const bool direct = g.KH == 1 && g.KW == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 &&
                        g.pw == 0 && g.OH == g.H && g.OW == g.W;
    const int64_t G = group_size(g);
    Scratch<float> col(direct ? 1 : G * CKK * L);
    for (int64_t s0 = 0; s0 < g.N; s0 += G) {
      const int64_t gs = std::min(G, g.N - s0);
      for (int64_t cg = 0; cg < g.groups; ++cg) {
        const float* cols = direct ? x + s0 * chw + cg * Cg * L : col.data();
        if (!direct) im2col(g, cg, gs, x + s0 * chw, col.data(), CKK * L, L);
        gemm(false, false, OCg, L, CKK, 1.f, w + cg * OCg * CKK, CKK, 0, cols, L,
             direct ? chw : CKK * L, 0.f, y + (s0 * g.OC + cg * OCg) * L, L, g.OC * L, gs);
      }
    }
  };
  auto direct = [&] {  // the bias included
    if (tile_suits(g, g.OC)) {
      tile_conv(forward_tile(g), false, x, w, b, y);
      return;
    }
    direct_forward_kernel<<<blocks_for(g.N * g.OC * L), kThreads, 0, stream()>>>(g, x, w, b, y);
    CUDA_CHECK_LAUNCH();
  };
  const ConvPath path = run_conv(ConvPass::Forward, g, {x, w, nullptr, y}, by_im2col,
                                 direct_suits(g) ? std::function<void()>(direct) : nullptr);
  if (b && path != ConvPath::Direct) {
    add_bias_kernel<<<blocks_for(g.N * g.OC * L), kThreads, 0, stream()>>>(g.N, g.OC, L, b, y);
    CUDA_CHECK_LAUNCH();
  }
}

// gy [N, OC, L] -> gx [N, C, H, W], gw [OC, CKK], gb [OC] (each optional):
// gb sums gy over N and L (in the direct weight gradient's launch where that
// runs). gw and gx by the direct kernels or cuDNN where their plans say, else,
// per channel group cg: gw_cg = sum over sample groups of g2[cg rows, group]
// col^T with g2 = gy as [OC, N*L]; gcol_s [CKK, L] = w_cg^T gy_s[cg rows]
// per sample group (batched), then col2im.
void conv2d_backward(const ConvGeometry& g, const float* x, const float* w, const float* gy,
                     float* gx, float* gw, float* gb) {
  const int64_t L = g.OH * g.OW, chw = g.C * g.H * g.W;
  const int64_t Cg = g.C / g.groups, OCg = g.OC / g.groups, CKK = Cg * g.KH * g.KW;
  const int64_t NL = g.N * L, G = group_size(g);
  const bool suits = direct_suits(g);
  bool gb_done = false;  // by the direct weight gradient
  if (gw) {
    auto by_im2col = [&] {
      Scratch<float> g2(g.OC * NL), col(G * CKK * L);
      if (fits_int32(g.OC * NL))
        swap01_kernel<int><<<blocks_for(g.OC * NL), kThreads, 0, stream()>>>(
            static_cast<int>(g.N), static_cast<int>(g.OC), static_cast<int>(L), gy, g2.data());
      else
        swap01_kernel<int64_t>
            <<<blocks_for(g.OC * NL), kThreads, 0, stream()>>>(g.N, g.OC, L, gy, g2.data());
      CUDA_CHECK_LAUNCH();
      for (int64_t s0 = 0; s0 < g.N; s0 += G) {
        const int64_t gs = std::min(G, g.N - s0);
        for (int64_t cg = 0; cg < g.groups; ++cg) {
          im2col(g, cg, gs, x + s0 * chw, col.data(), L, gs * L);
          gemm(false, true, OCg, CKK, gs * L, 1.f, g2.data() + cg * OCg * NL + s0 * L, NL, 0,
               col.data(), gs * L, 0, s0 == 0 ? 0.f : 1.f, gw + cg * OCg * CKK, CKK, 0, 1);
        }
      }
      if (g.N == 0) fill(kFloat32, g.OC * CKK, 0.0, 0.0, gw);  // no group wrote it
    };
    auto direct = [&] { direct_weight_grad(g, x, gy, gw, gb); };
    gb_done = run_conv(ConvPass::WeightGrad, g, {x, nullptr, gy, gw}, by_im2col,
                       suits ? std::function<void()>(direct) : nullptr) == ConvPath::Direct;
  }
  if (gb && !gb_done) bias_grad(g, gy, gb);
  if (gx && g.N * chw > 0) {
    auto by_im2col = [&] {
      Scratch<float> col(G * CKK * L);
      for (int64_t s0 = 0; s0 < g.N; s0 += G) {
        const int64_t gs = std::min(G, g.N - s0);
        for (int64_t cg = 0; cg < g.groups; ++cg) {
          gemm(true, false, CKK, L, OCg, 1.f, w + cg * OCg * CKK, CKK, 0,
               gy + (s0 * g.OC + cg * OCg) * L, L, g.OC * L, 0.f, col.data(), L, CKK * L, gs);
          col2im(g, cg, gs, col.data(), CKK * L, L, gx + s0 * chw);
        }
      }
    };
    auto direct = [&] {
      if (tile_suits(g, g.C)) {  // the forward of gy, padded KH-1-ph, with w flipped
        tile_conv({int(g.N), int(g.OC), int(g.OH), int(g.OW), int(g.C), int(g.H), int(g.W),
                   int(g.KH), int(g.KW), int(g.KH - 1 - g.ph), int(g.KW - 1 - g.pw)},
                  true, gy, w, nullptr, gx);
        return;
      }
      direct_input_grad_kernel<<<blocks_for(g.N * chw), kThreads, 0, stream()>>>(g, w, gy, gx);
      CUDA_CHECK_LAUNCH();
    };
    run_conv(ConvPass::InputGrad, g, {nullptr, w, gy, gx}, by_im2col,
             suits ? std::function<void()>(direct) : nullptr);
  }
}

}  // namespace minidl::cuda
