// The LSTM and GRU cells' pointwise parts (kernels.h, issue 23) on CUDA: one thread
// per (row, hidden unit), as cpu/rnn.cpp. The forward keeps the activations,
// so the backward evaluates no exp or tanh. And a small LSTM layer's whole
// step, its hidden GEMM and the cell, in one launch each way (issue 26).
#include "framework/backend/cuda/cuda.h"
#include "framework/backend/cuda/device.cuh"

namespace minidl::cuda {
namespace {

__device__ inline float sigmoid(float v) { return 1.f / (1.f + expf(-v)); }

// The cell at row r, unit j: a [B, 4H] (i, f, g, o), c [B, H] -> act [B, 5H], c_out, h_out [B, H]
__device__ inline void lstm_cell_at(int64_t r, int64_t j, int64_t h, const float* a,
                                    const float* c, float* act, float* c_out, float* h_out) {
  const int64_t k = r * h + j;
  const float* ar = a + r * 4 * h;
  float* s = act + r * 5 * h;  // sigmoid(i), sigmoid(f), tanh(g), sigmoid(o), tanh(c')
  const float i = sigmoid(ar[j]), f = sigmoid(ar[h + j]), g = tanhf(ar[2 * h + j]);
  const float o = sigmoid(ar[3 * h + j]), cn = f * c[k] + i * g, t = tanhf(cn);
  s[j] = i, s[h + j] = f, s[2 * h + j] = g, s[3 * h + j] = o, s[4 * h + j] = t;
  c_out[k] = cn;
  h_out[k] = o * t;
}

// The cell's backward at row r, unit j: act [B, 5H], c, gh, gc_next [B, H]
// (gh, gc_next null: zero) -> ga [B, 4H], gc [B, H] or null (may be gc_next)
__device__ inline void lstm_cell_backward_at(int64_t r, int64_t j, int64_t h, const float* act,
                                             const float* c, const float* gh,
                                             const float* gc_next, float* ga, float* gc) {
  const int64_t k = r * h + j;
  const float* s = act + r * 5 * h;
  float* gr = ga + r * 4 * h;
  const float i = s[j], f = s[h + j], g = s[2 * h + j], o = s[3 * h + j], t = s[4 * h + j];
  const float dh = gh ? gh[k] : 0.f;
  const float dc = (gc_next ? gc_next[k] : 0.f) + dh * o * (1.f - t * t);
  gr[j] = dc * g * i * (1.f - i);
  gr[h + j] = dc * c[k] * f * (1.f - f);
  gr[2 * h + j] = dc * i * (1.f - g * g);
  gr[3 * h + j] = dh * t * o * (1.f - o);
  if (gc) gc[k] = dc * f;
}

__global__ void lstm_cell_forward_kernel(int64_t b, int64_t h, const float* a, const float* c,
                                         float* act, float* c_out, float* h_out) {
  for (int64_t k = thread_index(); k < b * h; k += thread_count())
    lstm_cell_at(k / h, k % h, h, a, c, act, c_out, h_out);
}

__global__ void lstm_cell_backward_kernel(int64_t b, int64_t h, const float* act,
                                          const float* c, const float* gh,
                                          const float* gc_next, float* ga, float* gc) {
  for (int64_t k = thread_index(); k < b * h; k += thread_count())
    lstm_cell_backward_at(k / h, k % h, h, act, c, gh, gc_next, ga, gc);
}

// A whole step of a small layer in one launch (kernels.h, lstm_step_*): a
// block per hidden unit j, a warp per row r. Its lanes split the dot
// products along them; lane 0 gets the sums (a fixed butterfly:
// deterministic) and runs the cell for (r, j).
// w [4H, H], hp [B, H]: a[r, q H + j] += hp[r] . w[q H + j] for q < 4, then the cell
__global__ void lstm_step_forward_kernel(int64_t b, int64_t h, const float* w, const float* hp,
                                         float* a, const float* c, float* act, float* c_out,
                                         float* h_out) {
  const int lane = threadIdx.x % 32;
  for (int64_t j = blockIdx.x; j < h; j += gridDim.x) {
    for (int64_t r = threadIdx.x / 32; r < b; r += blockDim.x / 32) {
      float s[4] = {0.f, 0.f, 0.f, 0.f};
      for (int64_t k = lane; k < h; k += 32) {
        const float x = hp[r * h + k];
        for (int q = 0; q < 4; ++q) s[q] += x * w[(q * h + j) * h + k];
      }
      for (int q = 0; q < 4; ++q) s[q] = warp_sum(s[q]);
      if (lane == 0) {
        for (int q = 0; q < 4; ++q) a[r * 4 * h + q * h + j] += s[q];
        lstm_cell_at(r, j, h, a, c, act, c_out, h_out);
      }
    }
  }
}

// g [B, 4H] (null: none): dh[r, j] += g[r] . w[:, j], then the cell's backward for (r, j)
__global__ void lstm_step_backward_kernel(int64_t b, int64_t h, const float* w, const float* g,
                                          const float* act, const float* c, float* dh,
                                          const float* gc_next, float* ga, float* gc) {
  const int lane = threadIdx.x % 32;
  for (int64_t j = blockIdx.x; j < h; j += gridDim.x) {
    for (int64_t r = threadIdx.x / 32; r < b; r += blockDim.x / 32) {
      float s = 0.f;
      if (g)
        for (int64_t p = lane; p < 4 * h; p += 32) s += g[r * 4 * h + p] * w[p * h + j];
      s = warp_sum(s);
      if (lane == 0) {
        dh[r * h + j] += s;
        lstm_cell_backward_at(r, j, h, act, c, dh, gc_next, ga, gc);
      }
    }
  }
}

// gx, gh [B, 3H] (r, z, n), hp [B, H] -> act [B, 4H] (r, z, n, gh_n), h_out [B, H]
__global__ void gru_cell_forward_kernel(int64_t b, int64_t h, const float* gx, const float* gh,
                                        const float* hp, float* act, float* h_out) {
  for (int64_t k = thread_index(); k < b * h; k += thread_count()) {
    const int64_t r = k / h, j = k % h;
    const float *x = gx + r * 3 * h, *g = gh + r * 3 * h;
    float* s = act + r * 4 * h;
    const float rg = sigmoid(x[j] + g[j]), z = sigmoid(x[h + j] + g[h + j]);
    const float n = tanhf(x[2 * h + j] + rg * g[2 * h + j]);
    s[j] = rg, s[h + j] = z, s[2 * h + j] = n, s[3 * h + j] = g[2 * h + j];
    h_out[k] = n + z * (hp[k] - n);
  }
}

// act [B, 4H], hp, gy [B, H] -> ggx, ggh [B, 3H]; ghp [B, H] += gy z (null: not wanted)
__global__ void gru_cell_backward_kernel(int64_t b, int64_t h, const float* act,
                                         const float* hp, const float* gy, float* ggx,
                                         float* ggh, float* ghp) {
  for (int64_t k = thread_index(); k < b * h; k += thread_count()) {
    const int64_t r = k / h, j = k % h;
    const float* s = act + r * 4 * h;
    float *gx = ggx + r * 3 * h, *gh = ggh + r * 3 * h;
    const float rg = s[j], z = s[h + j], n = s[2 * h + j], hn = s[3 * h + j];
    const float dy = gy[k], dn = dy * (1.f - z) * (1.f - n * n);
    const float dr = dn * hn * rg * (1.f - rg), dz = dy * (hp[k] - n) * z * (1.f - z);
    gx[j] = gh[j] = dr;
    gx[h + j] = gh[h + j] = dz;
    gx[2 * h + j] = dn;
    gh[2 * h + j] = dn * rg;
    if (ghp) ghp[k] += dy * z;
  }
}

}  // namespace

void lstm_cell_forward(int64_t b, int64_t h, const float* a, const float* c, float* act,
                       float* c_out, float* h_out) {
  if (b * h == 0) return;
  lstm_cell_forward_kernel<<<blocks_for(b * h), kThreads, 0, stream()>>>(b, h, a, c, act, c_out,
                                                                         h_out);
  CUDA_CHECK_LAUNCH();
}

void lstm_cell_backward(int64_t b, int64_t h, const float* act, const float* c,
                        const float* gh, const float* gc_next, float* ga, float* gc) {
  if (b * h == 0) return;
  lstm_cell_backward_kernel<<<blocks_for(b * h), kThreads, 0, stream()>>>(b, h, act, c, gh,
                                                                          gc_next, ga, gc);
  CUDA_CHECK_LAUNCH();
}

// The fused step where its work is small (a GEMM's launches would outweigh
// it: char_lstm's layers, B 20 and H 128, 1.3 M products), else cuBLAS and the cell.
static bool fuse_step(int64_t b, int64_t h) { return b * 4 * h * h <= (int64_t{1} << 23); }
static unsigned step_threads(int64_t b) { return static_cast<unsigned>(32 * (b < 8 ? b : 8)); }

void lstm_step_forward(int64_t b, int64_t h, const float* w, const float* hp, float* a,
                       const float* c, float* act, float* c_out, float* h_out) {
  if (b * h == 0) return;
  if (!fuse_step(b, h)) {
    gemm(false, true, b, 4 * h, h, 1.f, hp, h, 0, w, h, 0, 1.f, a, 4 * h, 0, 1);
    return lstm_cell_forward(b, h, a, c, act, c_out, h_out);
  }
  lstm_step_forward_kernel<<<blocks_for(h, 1), step_threads(b), 0, stream()>>>(
      b, h, w, hp, a, c, act, c_out, h_out);
  CUDA_CHECK_LAUNCH();
}

void lstm_step_backward(int64_t b, int64_t h, const float* w, const float* g, const float* act,
                        const float* c, float* dh, const float* gc_next, float* ga, float* gc) {
  if (b * h == 0) return;
  if (!fuse_step(b, h)) {
    if (g) gemm(false, false, b, h, 4 * h, 1.f, g, 4 * h, 0, w, h, 0, 1.f, dh, h, 0, 1);
    return lstm_cell_backward(b, h, act, c, dh, gc_next, ga, gc);
  }
  lstm_step_backward_kernel<<<blocks_for(h, 1), step_threads(b), 0, stream()>>>(
      b, h, w, g, act, c, dh, gc_next, ga, gc);
  CUDA_CHECK_LAUNCH();
}

void gru_cell_forward(int64_t b, int64_t h, const float* gx, const float* gh, const float* hp,
                      float* act, float* h_out) {
  if (b * h == 0) return;
  gru_cell_forward_kernel<<<blocks_for(b * h), kThreads, 0, stream()>>>(b, h, gx, gh, hp, act,
                                                                        h_out);
  CUDA_CHECK_LAUNCH();
}

void gru_cell_backward(int64_t b, int64_t h, const float* act, const float* hp, const float* gy,
                       float* ggx, float* ggh, float* ghp) {
  if (b * h == 0) return;
  gru_cell_backward_kernel<<<blocks_for(b * h), kThreads, 0, stream()>>>(b, h, act, hp, gy, ggx,
                                                                         ggh, ghp);
  CUDA_CHECK_LAUNCH();
}

}  // namespace minidl::cuda
