#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "framework/backend/cpu/cpu.h"

namespace minidl::cpu {

// src [R, C] -> dst [C, R], in 16x16 tiles so reads and writes both stay in cache lines
void transpose(const float* src, int64_t rows, int64_t cols, float* dst) {
  constexpr int64_t kTile = 16;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (int64_t c0 = 0; c0 < cols; c0 += kTile)
      for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r)
        for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c) dst[c * rows + r] = src[r * cols + c];
}

// im [C, H, W] -> col [C*KH*KW, OH*OW], row stride ld
void im2col(const ConvGeometry& g, const float* im, float* col, int64_t ld) {
  if (g.stride == 1) {  // rows are plain copies from a zero-padded plane
    const int64_t PH = g.H + 2 * g.pad, PW = g.W + 2 * g.pad;
    thread_local std::vector<float> padded;
    for (int64_t c = 0; c < g.C; ++c) {
      const float* plane = im + c * g.H * g.W;
      if (g.pad > 0) {
        padded.assign(PH * PW, 0.f);
        for (int64_t h = 0; h < g.H; ++h)
          std::copy(plane + h * g.W, plane + (h + 1) * g.W, padded.data() + (h + g.pad) * PW + g.pad);
        plane = padded.data();
      }
      for (int64_t ki = 0; ki < g.KH; ++ki)
        for (int64_t kj = 0; kj < g.KW; ++kj) {
          float* __restrict out = col + ((c * g.KH + ki) * g.KW + kj) * ld;
          for (int64_t oh = 0; oh < g.OH; ++oh) {
            const float* __restrict src = plane + (oh + ki) * PW + kj;
            for (int64_t ow = 0; ow < g.OW; ++ow) out[oh * g.OW + ow] = src[ow];
          }
        }
    }
    return;
  }
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t ki = 0; ki < g.KH; ++ki)
      for (int64_t kj = 0; kj < g.KW; ++kj) {
        float* out = col + ((c * g.KH + ki) * g.KW + kj) * ld;
        const float* src = im + c * g.H * g.W;
        // Output columns whose input column ow*stride - pad + kj lies inside [0, W).
        const int64_t lo = std::min(g.OW, std::max<int64_t>(0, (g.pad - kj + g.stride - 1) / g.stride));
        const int64_t hi = std::max(lo, std::min(g.OW, (g.W + g.pad - kj + g.stride - 1) / g.stride));
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          const int64_t h = oh * g.stride - g.pad + ki;
          float* row = out + oh * g.OW;
          if (h < 0 || h >= g.H) {
            for (int64_t ow = 0; ow < g.OW; ++ow) row[ow] = 0.f;
            continue;
          }
          const float* srow = src + h * g.W - g.pad + kj;
          for (int64_t ow = 0; ow < lo; ++ow) row[ow] = 0.f;
          for (int64_t ow = lo; ow < hi; ++ow) row[ow] = srow[ow * g.stride];
          for (int64_t ow = hi; ow < g.OW; ++ow) row[ow] = 0.f;
        }
      }
}

// col [C*KH*KW, OH*OW], row stride ld -> im [C, H, W] (accumulates)
void col2im(const ConvGeometry& g, const float* col, float* im, int64_t ld) {
  if (g.stride == 1) {  // rows add into a zero-padded plane, cropped into im
    const int64_t PH = g.H + 2 * g.pad, PW = g.W + 2 * g.pad;
    thread_local std::vector<float> padded;
    for (int64_t c = 0; c < g.C; ++c) {
      float* plane = im + c * g.H * g.W;
      if (g.pad > 0) {
        padded.assign(PH * PW, 0.f);
        plane = padded.data();
      }
      for (int64_t ki = 0; ki < g.KH; ++ki)
        for (int64_t kj = 0; kj < g.KW; ++kj) {
          const float* __restrict in = col + ((c * g.KH + ki) * g.KW + kj) * ld;
          for (int64_t oh = 0; oh < g.OH; ++oh) {
            float* __restrict dst = plane + (oh + ki) * PW + kj;
            for (int64_t ow = 0; ow < g.OW; ++ow) dst[ow] += in[oh * g.OW + ow];
          }
        }
      if (g.pad > 0)
        for (int64_t h = 0; h < g.H; ++h)
          for (int64_t w = 0; w < g.W; ++w)
            im[(c * g.H + h) * g.W + w] += padded[(h + g.pad) * PW + w + g.pad];
    }
    return;
  }
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t ki = 0; ki < g.KH; ++ki)
      for (int64_t kj = 0; kj < g.KW; ++kj) {
        const float* in = col + ((c * g.KH + ki) * g.KW + kj) * ld;
        float* dst = im + c * g.H * g.W;
        const int64_t lo = std::min(g.OW, std::max<int64_t>(0, (g.pad - kj + g.stride - 1) / g.stride));
        const int64_t hi = std::max(lo, std::min(g.OW, (g.W + g.pad - kj + g.stride - 1) / g.stride));
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          const int64_t h = oh * g.stride - g.pad + ki;
          if (h < 0 || h >= g.H) continue;
          const float* row = in + oh * g.OW;
          float* drow = dst + h * g.W - g.pad + kj;
          if (g.stride == 1)
            for (int64_t ow = lo; ow < hi; ++ow) drow[ow] += row[ow];
          else
            for (int64_t ow = lo; ow < hi; ++ow) drow[ow * g.stride] += row[ow];
        }
      }
}

// x [NC, H, W] -> y [NC, OH, OW], argmax [NC, OH, OW] (first maximal cell).
// Branch-free max then an index search: data-dependent branches on random
// activations mispredict and cost 30x.
void max_pool_forward(const PoolGeometry& g, const float* x, float* y, int32_t* argmax) {
#pragma omp parallel for if (g.NC * g.OH * g.OW > 16384)
  for (int64_t p = 0; p < g.NC; ++p) {
    const float* xp = x + p * g.H * g.W;
    float* yp = y + p * g.OH * g.OW;
    int32_t* ap = argmax + p * g.OH * g.OW;
    if (g.K == 2 && g.stride == 2 && g.pad == 0) {  // LeNet's pools: index by arithmetic
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const float *r0 = xp + 2 * oh * g.W + 2 * ow, *r1 = r0 + g.W;
          float m = std::max(std::max(r0[0], r0[1]), std::max(r1[0], r1[1]));
          if ((r0[0] != r0[0]) | (r0[1] != r0[1]) | (r1[0] != r1[0]) | (r1[1] != r1[1]))
            m = std::numeric_limits<float>::quiet_NaN();  // NaN propagates
          const int64_t f = r0[0] != m, s = r0[1] != m, t = r1[0] != m;  // not-max flags
          yp[oh * g.OW + ow] = m;
          ap[oh * g.OW + ow] = static_cast<int32_t>(2 * oh * g.W + 2 * ow + f * (1 + s * (g.W - 1 + t)));
        }
      continue;
    }
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const int64_t h0 = oh * g.stride - g.pad;
      const int64_t hlo = std::max<int64_t>(h0, 0), hhi = std::min(h0 + g.K, g.H);
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const int64_t w0 = ow * g.stride - g.pad;
        const int64_t wlo = std::max<int64_t>(w0, 0), whi = std::min(w0 + g.K, g.W);
        float best = xp[hlo * g.W + wlo];
        bool nan = false;
        for (int64_t h = hlo; h < hhi; ++h)
          for (int64_t w = wlo; w < whi; ++w) {
            float v = xp[h * g.W + w];
            best = std::max(best, v);
            nan |= v != v;
          }
        if (nan) best = std::numeric_limits<float>::quiet_NaN();  // NaN propagates
        int64_t arg = hlo * g.W + wlo;
        for (int64_t h = hlo; h < hhi; ++h)
          for (int64_t w = wlo; w < whi; ++w) {
            float v = xp[h * g.W + w];
            if (v == best || (nan && v != v)) {
              arg = h * g.W + w;
              h = hhi;
              break;
            }
          }
        yp[oh * g.OW + ow] = best;
        ap[oh * g.OW + ow] = static_cast<int32_t>(arg);
      }
    }
  }
}

// gy [NC, OH, OW] -> gx [NC, H, W]
void max_pool_backward(const PoolGeometry& g, const float* gy, const int32_t* argmax, float* gx) {
  std::memset(gx, 0, g.NC * g.H * g.W * sizeof(float));
#pragma omp parallel for if (g.NC * g.OH * g.OW > 16384)
  for (int64_t p = 0; p < g.NC; ++p)
    for (int64_t o = 0; o < g.OH * g.OW; ++o) {
      int64_t i = p * g.OH * g.OW + o;
      gx[p * g.H * g.W + argmax[i]] += gy[i];
    }
}

// x [NC, H, W] -> y [NC, OH, OW]
void avg_pool_forward(const PoolGeometry& g, const float* x, float* y) {
  const float inv = 1.0f / static_cast<float>(g.K * g.K);
#pragma omp parallel for if (g.NC * g.OH * g.OW > 16384)
  for (int64_t p = 0; p < g.NC; ++p)
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        float s = 0;
        for (int64_t i = 0; i < g.K; ++i) {
          int64_t h = oh * g.stride - g.pad + i;
          if (h < 0 || h >= g.H) continue;
          for (int64_t j = 0; j < g.K; ++j) {
            int64_t w = ow * g.stride - g.pad + j;
            if (w >= 0 && w < g.W) s += x[(p * g.H + h) * g.W + w];
          }
        }
        y[(p * g.OH + oh) * g.OW + ow] = s * inv;
      }
}

// gy [NC, OH, OW] -> gx [NC, H, W]
void avg_pool_backward(const PoolGeometry& g, const float* gy, float* gx) {
  const float inv = 1.0f / static_cast<float>(g.K * g.K);
  std::memset(gx, 0, g.NC * g.H * g.W * sizeof(float));
#pragma omp parallel for if (g.NC * g.OH * g.OW > 16384)
  for (int64_t p = 0; p < g.NC; ++p)
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        float v = gy[(p * g.OH + oh) * g.OW + ow] * inv;
        for (int64_t i = 0; i < g.K; ++i) {
          int64_t h = oh * g.stride - g.pad + i;
          if (h < 0 || h >= g.H) continue;
          for (int64_t j = 0; j < g.K; ++j) {
            int64_t w = ow * g.stride - g.pad + j;
            if (w >= 0 && w < g.W) gx[(p * g.H + h) * g.W + w] += v;
          }
        }
      }
}

}  // namespace minidl::cpu
