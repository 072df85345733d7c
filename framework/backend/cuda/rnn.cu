// The LSTM cell's pointwise part (kernels.h, issue 23) on CUDA: one thread
// per (row, hidden unit), as cpu/rnn.cpp.
#include "framework/backend/cuda/device.cuh"

namespace minidl::cuda {
namespace {

__device__ inline float sigmoid(float v) { return 1.f / (1.f + expf(-v)); }

// a [B, 4H] (i, f, g, o), c [B, H] -> c_out, h_out [B, H]
__global__ void lstm_cell_forward_kernel(int64_t b, int64_t h, const float* a, const float* c,
                                         float* c_out, float* h_out) {
  for (int64_t k = thread_index(); k < b * h; k += thread_count()) {
    const float* ar = a + k / h * 4 * h;
    const int64_t j = k % h;
    const float cn = sigmoid(ar[h + j]) * c[k] + sigmoid(ar[j]) * tanhf(ar[2 * h + j]);
    c_out[k] = cn;
    h_out[k] = sigmoid(ar[3 * h + j]) * tanhf(cn);
  }
}

// a [B, 4H], s and gout [B, H] -> ga [B, 4H], gs [B, H] or null (kernels.h)
__global__ void lstm_cell_backward_kernel(bool of_h, int64_t b, int64_t h, const float* a,
                                          const float* s, const float* gout, float* ga,
                                          float* gs) {
  for (int64_t k = thread_index(); k < b * h; k += thread_count()) {
    const int64_t row = k / h * 4 * h, j = k % h;
    const float* ar = a + row;
    float* gr = ga + row;
    const float go = gout[k];
    if (of_h) {  // h = o tanh(c'), s = c': only o's gate is read
      const float o = sigmoid(ar[3 * h + j]), t = tanhf(s[k]);
      gr[j] = gr[h + j] = gr[2 * h + j] = 0.f;
      gr[3 * h + j] = go * t * o * (1.f - o);
      if (gs) gs[k] = go * o * (1.f - t * t);
    } else {  // c' = f c + i g, s = c
      const float i = sigmoid(ar[j]), f = sigmoid(ar[h + j]), g = tanhf(ar[2 * h + j]);
      gr[j] = go * g * i * (1.f - i);
      gr[h + j] = go * s[k] * f * (1.f - f);
      gr[2 * h + j] = go * i * (1.f - g * g);
      gr[3 * h + j] = 0.f;
      if (gs) gs[k] = go * f;
    }
  }
}

}  // namespace

void lstm_cell_forward(int64_t b, int64_t h, const float* a, const float* c, float* c_out,
                       float* h_out) {
  if (b * h == 0) return;
  lstm_cell_forward_kernel<<<blocks_for(b * h), kThreads, 0, stream()>>>(b, h, a, c, c_out, h_out);
  CUDA_CHECK_LAUNCH();
}

void lstm_cell_backward(bool of_h, int64_t b, int64_t h, const float* a, const float* s,
                        const float* gout, float* ga, float* gs) {
  if (b * h == 0) return;
  lstm_cell_backward_kernel<<<blocks_for(b * h), kThreads, 0, stream()>>>(of_h, b, h, a, s, gout,
                                                                          ga, gs);
  CUDA_CHECK_LAUNCH();
}

}  // namespace minidl::cuda
