// Max and average pooling on CUDA, NCHW with NC planes. Forward: one thread
// per output. Backward: one thread per input pixel, summing the outputs whose
// windows cover it in (oh, ow) order, as the CPU adds them; no atomics.
#include <cmath>

#include "framework/backend/cuda/device.cuh"

namespace minidl::cuda {
namespace {

// Outputs o whose window [o*stride - pad, o*stride - pad + K) covers input i: [first, last)
__device__ inline int64_t first_window(int64_t i, const PoolGeometry& g) {
  const int64_t lo = i + g.pad - g.K + 1;  // o*stride >= lo
  return lo <= 0 ? 0 : (lo + g.stride - 1) / g.stride;
}
__device__ inline int64_t last_window(int64_t i, int64_t outs, const PoolGeometry& g) {
  const int64_t hi = (i + g.pad) / g.stride + 1;  // o*stride <= i + pad
  return hi < outs ? hi : outs;
}

// x [NC, H, W] -> y [NC, OH, OW], argmax [NC, OH, OW]: the window's max
// (NaN if any cell is NaN) and its first cell holding it (the first NaN)
__global__ void max_pool_forward_kernel(PoolGeometry g, const float* x, float* y, int32_t* argmax) {
  for (int64_t i = thread_index(); i < g.NC * g.OH * g.OW; i += thread_count()) {
    const int64_t ow = i % g.OW, oh = i / g.OW % g.OH, p = i / (g.OW * g.OH);
    const float* xp = x + p * g.H * g.W;
    const int64_t h0 = oh * g.stride - g.pad, w0 = ow * g.stride - g.pad;
    const int64_t hlo = h0 > 0 ? h0 : 0, hhi = h0 + g.K < g.H ? h0 + g.K : g.H;
    const int64_t wlo = w0 > 0 ? w0 : 0, whi = w0 + g.K < g.W ? w0 + g.K : g.W;
    float best = xp[hlo * g.W + wlo];
    int64_t arg = hlo * g.W + wlo;
    bool nan = best != best;
    for (int64_t h = hlo; h < hhi && !nan; ++h)
      for (int64_t w = wlo; w < whi; ++w) {
        const float v = xp[h * g.W + w];
        if (v > best || v != v) best = v, arg = h * g.W + w;
        if (v != v) {
          nan = true;
          break;
        }
      }
    y[i] = best;
    argmax[i] = static_cast<int32_t>(arg);
  }
}

// gy [NC, OH, OW] -> gx [NC, H, W] (overwritten), via argmax
__global__ void max_pool_backward_kernel(PoolGeometry g, const float* gy, const int32_t* argmax,
                                         float* gx) {
  for (int64_t i = thread_index(); i < g.NC * g.H * g.W; i += thread_count()) {
    const int64_t w = i % g.W, h = i / g.W % g.H, p = i / (g.W * g.H);
    const int64_t cell = h * g.W + w, base = p * g.OH * g.OW;
    float sum = 0.f;
    for (int64_t oh = first_window(h, g); oh < last_window(h, g.OH, g); ++oh)
      for (int64_t ow = first_window(w, g); ow < last_window(w, g.OW, g); ++ow) {
        const int64_t o = base + oh * g.OW + ow;
        if (argmax[o] == cell) sum += gy[o];
      }
    gx[i] = sum;
  }
}

// x [NC, H, W] -> y [NC, OH, OW], window means with padding counted
__global__ void avg_pool_forward_kernel(PoolGeometry g, const float* x, float* y) {
  const float inv = 1.0f / static_cast<float>(g.K * g.K);
  for (int64_t i = thread_index(); i < g.NC * g.OH * g.OW; i += thread_count()) {
    const int64_t ow = i % g.OW, oh = i / g.OW % g.OH, p = i / (g.OW * g.OH);
    float s = 0.f;
    for (int64_t ki = 0; ki < g.K; ++ki) {
      const int64_t h = oh * g.stride - g.pad + ki;
      if (h < 0 || h >= g.H) continue;
      for (int64_t kj = 0; kj < g.K; ++kj) {
        const int64_t w = ow * g.stride - g.pad + kj;
        if (w >= 0 && w < g.W) s += x[(p * g.H + h) * g.W + w];
      }
    }
    y[i] = s * inv;
  }
}

// gy [NC, OH, OW] -> gx [NC, H, W] (overwritten)
__global__ void avg_pool_backward_kernel(PoolGeometry g, const float* gy, float* gx) {
  const float inv = 1.0f / static_cast<float>(g.K * g.K);
  for (int64_t i = thread_index(); i < g.NC * g.H * g.W; i += thread_count()) {
    const int64_t w = i % g.W, h = i / g.W % g.H, p = i / (g.W * g.H);
    float sum = 0.f;
    for (int64_t oh = first_window(h, g); oh < last_window(h, g.OH, g); ++oh)
      for (int64_t ow = first_window(w, g); ow < last_window(w, g.OW, g); ++ow)
        sum += gy[(p * g.OH + oh) * g.OW + ow] * inv;
    gx[i] = sum;
  }
}

}  // namespace

void max_pool_forward(const PoolGeometry& g, const float* x, float* y, int32_t* argmax) {
  const int64_t n = g.NC * g.OH * g.OW;
  if (n == 0) return;
  max_pool_forward_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(g, x, y, argmax);
  CUDA_CHECK_LAUNCH();
}

void max_pool_backward(const PoolGeometry& g, const float* gy, const int32_t* argmax, float* gx) {
  const int64_t n = g.NC * g.H * g.W;
  if (n == 0) return;
  max_pool_backward_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(g, gy, argmax, gx);
  CUDA_CHECK_LAUNCH();
}

void avg_pool_forward(const PoolGeometry& g, const float* x, float* y) {
  const int64_t n = g.NC * g.OH * g.OW;
  if (n == 0) return;
  avg_pool_forward_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(g, x, y);
  CUDA_CHECK_LAUNCH();
}

void avg_pool_backward(const PoolGeometry& g, const float* gy, float* gx) {
  const int64_t n = g.NC * g.H * g.W;
  if (n == 0) return;
  avg_pool_backward_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(g, gy, gx);
  CUDA_CHECK_LAUNCH();
}

// ---- nearest resizing (issue 22) ----
namespace {

// x [NC, H, W] -> y [NC, OH, OW] = x[p, rows[i], cols[j]], one thread per output
__global__ void upsample_nearest_forward_kernel(int64_t nc, int64_t h, int64_t w, int64_t oh,
                                                int64_t ow, const int32_t* rows,
                                                const int32_t* cols, const float* x, float* y) {
  for (int64_t i = thread_index(); i < nc * oh * ow; i += thread_count()) {
    const int64_t j = i % ow, r = i / ow % oh, p = i / (ow * oh);
    y[i] = x[(p * h + rows[r]) * w + cols[j]];
  }
}

// gy [NC, OH, OW] -> gx [NC, H, W], one thread per input summing its copies
// in (i, j) order as the CPU does; no atomics
__global__ void upsample_nearest_backward_kernel(int64_t nc, int64_t h, int64_t w, int64_t oh,
                                                 int64_t ow, const int32_t* row_first,
                                                 const int32_t* col_first, const float* gy,
                                                 float* gx) {
  for (int64_t k = thread_index(); k < nc * h * w; k += thread_count()) {
    const int64_t c = k % w, r = k / w % h, p = k / (w * h);
    float sum = 0.f;
    for (int64_t i = row_first[r]; i < row_first[r + 1]; ++i)
      for (int64_t j = col_first[c]; j < col_first[c + 1]; ++j) sum += gy[(p * oh + i) * ow + j];
    gx[k] = sum;
  }
}

}  // namespace

void upsample_nearest_forward(int64_t nc, int64_t h, int64_t w, int64_t oh, int64_t ow,
                              const int32_t* rows, const int32_t* cols, const float* x, float* y) {
  if (nc * oh * ow == 0) return;
  upsample_nearest_forward_kernel<<<blocks_for(nc * oh * ow), kThreads, 0, stream()>>>(
      nc, h, w, oh, ow, rows, cols, x, y);
  CUDA_CHECK_LAUNCH();
}

void upsample_nearest_backward(int64_t nc, int64_t h, int64_t w, int64_t oh, int64_t ow,
                               const int32_t* row_first, const int32_t* col_first, const float* gy,
                               float* gx) {
  if (nc * h * w == 0) return;
  upsample_nearest_backward_kernel<<<blocks_for(nc * h * w), kThreads, 0, stream()>>>(
      nc, h, w, oh, ow, row_first, col_first, gy, gx);
  CUDA_CHECK_LAUNCH();
}

// ---- bilinear resizing ----
namespace {

// x [NC, H, W] -> y [NC, OH, OW], one thread per output, the CPU's order
__global__ void upsample_bilinear_forward_kernel(int64_t nc, int64_t h, int64_t w, int64_t oh,
                                                 int64_t ow, LinearAxis rows, LinearAxis cols,
                                                 const float* x, float* y) {
  for (int64_t k = thread_index(); k < nc * oh * ow; k += thread_count()) {
    const int64_t j = k % ow, i = k / ow % oh, p = k / (ow * oh);
    const float* top = x + (p * h + rows.i0[i]) * w;
    const float* bottom = x + (p * h + rows.i1[i]) * w;
    const float l1 = cols.l1[j], l0 = 1.f - l1;
    const float v0 = top[cols.i0[j]] * l0 + top[cols.i1[j]] * l1;
    const float v1 = bottom[cols.i0[j]] * l0 + bottom[cols.i1[j]] * l1;
    y[k] = v0 * (1.f - rows.l1[i]) + v1 * rows.l1[i];
  }
}

// The weight output o of `axis` gives input r, as the terms the CPU adds:
// (1 - l1) where i0 == r, then l1 where i1 == r
__device__ float tap_sum(const LinearAxis& axis, int64_t o, int64_t r, float v, float sum) {
  if (axis.i0[o] == r) sum += (1.f - axis.l1[o]) * v;
  if (axis.i1[o] == r) sum += axis.l1[o] * v;
  return sum;
}

// gy [NC, OH, OW] -> gx [NC, H, W], one thread per input gathering the
// outputs that read it in the CPU's order; no atomics
__global__ void upsample_bilinear_backward_kernel(int64_t nc, int64_t h, int64_t w, int64_t oh,
                                                  int64_t ow, LinearAxis rows, LinearAxis cols,
                                                  const float* gy, float* gx) {
  for (int64_t k = thread_index(); k < nc * h * w; k += thread_count()) {
    const int64_t c = k % w, r = k / w % h, p = k / (w * h);
    float sum = 0.f;
    for (int64_t i = rows.first[r]; i < rows.last[r]; ++i) {
      float t = 0.f;
      for (int64_t j = cols.first[c]; j < cols.last[c]; ++j)
        t = tap_sum(cols, j, c, gy[(p * oh + i) * ow + j], t);
      sum = tap_sum(rows, i, r, t, sum);
    }
    gx[k] = sum;
  }
}

}  // namespace

void upsample_bilinear_forward(int64_t nc, int64_t h, int64_t w, int64_t oh, int64_t ow,
                               LinearAxis rows, LinearAxis cols, const float* x, float* y) {
  if (nc * oh * ow == 0) return;
  upsample_bilinear_forward_kernel<<<blocks_for(nc * oh * ow), kThreads, 0, stream()>>>(
      nc, h, w, oh, ow, rows, cols, x, y);
  CUDA_CHECK_LAUNCH();
}

void upsample_bilinear_backward(int64_t nc, int64_t h, int64_t w, int64_t oh, int64_t ow,
                                LinearAxis rows, LinearAxis cols, const float* gy, float* gx) {
  if (nc * h * w == 0) return;
  upsample_bilinear_backward_kernel<<<blocks_for(nc * h * w), kThreads, 0, stream()>>>(
      nc, h, w, oh, ow, rows, cols, gy, gx);
  CUDA_CHECK_LAUNCH();
}

}  // namespace minidl::cuda
