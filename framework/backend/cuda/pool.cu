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

}  // namespace minidl::cuda
