// The LSTM and GRU cells' pointwise parts (kernels.h, issue 23) on CUDA: one thread
// per (row, hidden unit), as cpu/rnn.cpp. The forward keeps the activations,
// so the backward evaluates no exp or tanh. And a small layer's whole step,
// its hidden GEMM and the cell, in one launch each way (issue 26).
// Each cell is a functor of (row r, unit j), run by either kernel.
#include "framework/backend/cuda/cuda.h"
#include "framework/backend/cuda/device.cuh"

namespace minidl::cuda {
namespace {

__device__ inline float sigmoid(float v) { return 1.f / (1.f + expf(-v)); }

// a [B, 4H] (i, f, g, o), c [B, H] -> act [B, 5H], c_out, h_out [B, H]
struct LstmCell {
  int64_t h;
  const float *a, *c;
  float *act, *c_out, *h_out;
  __device__ void operator()(int64_t r, int64_t j) const {
    const int64_t k = r * h + j;
    const float* ar = a + r * 4 * h;
    float* s = act + r * 5 * h;  // sigmoid(i), sigmoid(f), tanh(g), sigmoid(o), tanh(c')
    const float i = sigmoid(ar[j]), f = sigmoid(ar[h + j]), g = tanhf(ar[2 * h + j]);
    const float o = sigmoid(ar[3 * h + j]), cn = f * c[k] + i * g, t = tanhf(cn);
    s[j] = i, s[h + j] = f, s[2 * h + j] = g, s[3 * h + j] = o, s[4 * h + j] = t;
    c_out[k] = cn;
    h_out[k] = o * t;
  }
};

// act [B, 5H], c, gh, gc_next [B, H] (gh, gc_next null: zero) -> ga [B, 4H],
// gc [B, H] or null (may be gc_next)
struct LstmCellBackward {
  int64_t h;
  const float *act, *c, *gh, *gc_next;
  float *ga, *gc;
  __device__ void operator()(int64_t r, int64_t j) const {
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
};

// gx, gh [B, 3H] (r, z, n), hp [B, H] -> act [B, 4H] (r, z, n, gh_n), h_out [B, H]
struct GruCell {
  int64_t h;
  const float *gx, *gh, *hp;
  float *act, *h_out;
  __device__ void operator()(int64_t r, int64_t j) const {
    const int64_t k = r * h + j;
    const float *x = gx + r * 3 * h, *g = gh + r * 3 * h;
    float* s = act + r * 4 * h;
    const float rg = sigmoid(x[j] + g[j]), z = sigmoid(x[h + j] + g[h + j]);
    const float n = tanhf(x[2 * h + j] + rg * g[2 * h + j]);
    s[j] = rg, s[h + j] = z, s[2 * h + j] = n, s[3 * h + j] = g[2 * h + j];
    h_out[k] = n + z * (hp[k] - n);
  }
};

// act [B, 4H], hp, gy [B, H] -> ggx, ggh [B, 3H]; ghp [B, H] += gy z (null: not wanted)
struct GruCellBackward {
  int64_t h;
  const float *act, *hp, *gy;
  float *ggx, *ggh, *ghp;
  __device__ void operator()(int64_t r, int64_t j) const {
    const int64_t k = r * h + j;
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
};

// cell(r, j) for every (r < B, j < H), grid-stride
template <class Cell>
__global__ void cell_kernel(int64_t b, int64_t h, Cell cell) {
  for (int64_t k = thread_index(); k < b * h; k += thread_count()) cell(k / h, k % h);
}

// A whole step of a small layer in one launch (kernels.h, *_step_*): a block
// per hidden unit j, a warp per row r. Its lanes split the hidden path's dot
// products; lane 0 gets the sums (a fixed butterfly: deterministic) and runs
// the cell at (r, j), which reads only row r's gates of unit j.
// w [QH, H], hp [B, H]: a[r, qH + j] += hp[r] . w[qH + j] for q < Q, then cell(r, j)
template <int Q, class Cell>
__global__ void step_forward_kernel(int64_t b, int64_t h, const float* w, const float* hp,
                                    float* a, Cell cell) {
  const int lane = threadIdx.x % 32;
  for (int64_t j = blockIdx.x; j < h; j += gridDim.x) {
    for (int64_t r = threadIdx.x / 32; r < b; r += blockDim.x / 32) {
      float s[Q] = {};
#pragma unroll 4
      for (int64_t k = lane; k < h; k += 32) {
        const float x = hp[r * h + k];
        for (int q = 0; q < Q; ++q) s[q] += x * w[(q * h + j) * h + k];
      }
      for (int q = 0; q < Q; ++q) s[q] = warp_sum(s[q]);
      if (lane == 0) {
        for (int q = 0; q < Q; ++q) a[(r * Q + q) * h + j] += s[q];
        cell(r, j);
      }
    }
  }
}

// g [B, QH] (null: none), wt [H, QH]: dh[r, j] += g[r] . wt[j], then cell(r, j)
template <int Q, class Cell>
__global__ void step_backward_kernel(int64_t b, int64_t h, const float* wt, const float* g,
                                     float* dh, Cell cell) {
  const int lane = threadIdx.x % 32;
  for (int64_t j = blockIdx.x; j < h; j += gridDim.x) {
    for (int64_t r = threadIdx.x / 32; r < b; r += blockDim.x / 32) {
      float s = 0.f;
      if (g)
#pragma unroll 4
        for (int64_t p = lane; p < Q * h; p += 32) s += g[r * Q * h + p] * wt[j * Q * h + p];
      s = warp_sum(s);
      if (lane == 0) {
        dh[r * h + j] += s;
        cell(r, j);
      }
    }
  }
}

template <class Cell>
void cells(int64_t b, int64_t h, Cell cell) {
  if (b * h == 0) return;
  cell_kernel<<<blocks_for(b * h), kThreads, 0, stream()>>>(b, h, cell);
  CUDA_CHECK_LAUNCH();
}

// The fused step where its work is small, B QH H products up to 2^23 (a
// GEMM's launches would outweigh it: char_lstm's layers, B 20 and H 128, are
// 1.3 M), else cuBLAS and the cell. A warp per row, up to a block's 32.
bool fuse_step(int64_t b, int64_t q, int64_t h) { return b * q * h * h <= (int64_t{1} << 23); }
unsigned step_threads(int64_t b) { return static_cast<unsigned>(32 * (b < 32 ? b : 32)); }

template <int Q, class Cell>
void step_forward(int64_t b, int64_t h, const float* w, const float* hp, float* a, Cell cell) {
  if (b * h == 0) return;
  if (!fuse_step(b, Q, h)) {
    gemm(false, true, b, Q * h, h, 1.f, hp, h, 0, w, h, 0, 1.f, a, Q * h, 0, 1);
    return cells(b, h, cell);
  }
  step_forward_kernel<Q><<<blocks_for(h, 1), step_threads(b), 0, stream()>>>(b, h, w, hp, a, cell);
  CUDA_CHECK_LAUNCH();
}

template <int Q, class Cell>
void step_backward(int64_t b, int64_t h, const float* wt, const float* g, float* dh, Cell cell) {
  if (b * h == 0) return;
  if (!fuse_step(b, Q, h)) {
    if (g) gemm(false, true, b, h, Q * h, 1.f, g, Q * h, 0, wt, Q * h, 0, 1.f, dh, h, 0, 1);
    return cells(b, h, cell);
  }
  step_backward_kernel<Q><<<blocks_for(h, 1), step_threads(b), 0, stream()>>>(b, h, wt, g, dh,
                                                                              cell);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void lstm_cell_forward(int64_t b, int64_t h, const float* a, const float* c, float* act,
                       float* c_out, float* h_out) {
  cells(b, h, LstmCell{h, a, c, act, c_out, h_out});
}

void lstm_cell_backward(int64_t b, int64_t h, const float* act, const float* c,
                        const float* gh, const float* gc_next, float* ga, float* gc) {
  cells(b, h, LstmCellBackward{h, act, c, gh, gc_next, ga, gc});
}

void lstm_step_forward(int64_t b, int64_t h, const float* w, const float* hp, float* a,
                       const float* c, float* act, float* c_out, float* h_out) {
  step_forward<4>(b, h, w, hp, a, LstmCell{h, a, c, act, c_out, h_out});
}

void lstm_step_backward(int64_t b, int64_t h, const float* /*w*/, const float* wt, const float* g,
                        const float* act, const float* c, float* dh, const float* gc_next,
                        float* ga, float* gc) {
  step_backward<4>(b, h, wt, g, dh, LstmCellBackward{h, act, c, dh, gc_next, ga, gc});
}

void gru_cell_forward(int64_t b, int64_t h, const float* gx, const float* gh, const float* hp,
                      float* act, float* h_out) {
  cells(b, h, GruCell{h, gx, gh, hp, act, h_out});
}

void gru_cell_backward(int64_t b, int64_t h, const float* act, const float* hp, const float* gy,
                       float* ggx, float* ggh, float* ghp) {
  cells(b, h, GruCellBackward{h, act, hp, gy, ggx, ggh, ghp});
}

void gru_step_forward(int64_t b, int64_t h, const float* w, const float* hp, const float* gx,
                      float* gh, float* act, float* h_out) {
  step_forward<3>(b, h, w, hp, gh, GruCell{h, gx, gh, hp, act, h_out});
}

void gru_step_backward(int64_t b, int64_t h, const float* /*w*/, const float* wt, const float* g,
                       const float* act, const float* hp, float* dh, float* ggx, float* ggh,
                       float* ghp) {
  step_backward<3>(b, h, wt, g, dh, GruCellBackward{h, act, hp, dh, ggx, ggh, ghp});
}

}  // namespace minidl::cuda
