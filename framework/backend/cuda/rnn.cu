// The LSTM and GRU cells' pointwise parts (kernels.h, issue 23) on CUDA: one thread
// per (row, hidden unit), as cpu/rnn.cpp. The forward keeps the activations,
// so the backward evaluates no exp or tanh.
#include "framework/backend/cuda/device.cuh"

namespace minidl::cuda {
namespace {

__device__ inline float sigmoid(float v) { return 1.f / (1.f + expf(-v)); }

// a [B, 4H] (i, f, g, o), c [B, H] -> act [B, 5H], c_out, h_out [B, H]
__global__ void lstm_cell_forward_kernel(int64_t b, int64_t h, const float* a, const float* c,
                                         float* act, float* c_out, float* h_out) {
  for (int64_t k = thread_index(); k < b * h; k += thread_count()) {
    const int64_t r = k / h, j = k % h;
    const float* ar = a + r * 4 * h;
    float* s = act + r * 5 * h;  // sigmoid(i), sigmoid(f), tanh(g), sigmoid(o), tanh(c')
    const float i = sigmoid(ar[j]), f = sigmoid(ar[h + j]), g = tanhf(ar[2 * h + j]);
    const float o = sigmoid(ar[3 * h + j]), cn = f * c[k] + i * g, t = tanhf(cn);
    s[j] = i, s[h + j] = f, s[2 * h + j] = g, s[3 * h + j] = o, s[4 * h + j] = t;
    c_out[k] = cn;
    h_out[k] = o * t;
  }
}

// act [B, 5H], c, gh, gc_next [B, H] (gh, gc_next null: zero) -> ga [B, 4H], gc [B, H] or null
__global__ void lstm_cell_backward_kernel(int64_t b, int64_t h, const float* act,
                                          const float* c, const float* gh,
                                          const float* gc_next, float* ga, float* gc) {
  for (int64_t k = thread_index(); k < b * h; k += thread_count()) {
    const int64_t r = k / h, j = k % h;
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
