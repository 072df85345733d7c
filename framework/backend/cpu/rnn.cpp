// The LSTM cell's pointwise part (kernels.h, issue 23): one pass over the
// gates where the composed step took ten ops, each a pass with its backward.
#include <cmath>

#include "framework/backend/cpu/cpu.h"

namespace minidl::cpu {
namespace {

inline float sigmoid(float v) { return 1.f / (1.f + std::exp(-v)); }

}  // namespace

// a [B, 4H] (i, f, g, o), c [B, H] -> c_out, h_out [B, H]
void lstm_cell_forward(int64_t b, int64_t h, const float* a, const float* c, float* c_out,
                       float* h_out) {
  for (int64_t r = 0; r < b; ++r) {
    const float* ar = a + r * 4 * h;
    for (int64_t j = 0; j < h; ++j) {
      const int64_t k = r * h + j;
      c_out[k] = sigmoid(ar[h + j]) * c[k] + sigmoid(ar[j]) * std::tanh(ar[2 * h + j]);
      h_out[k] = sigmoid(ar[3 * h + j]) * std::tanh(c_out[k]);
    }
  }
}

// a [B, 4H], s and gout [B, H] -> ga [B, 4H], gs [B, H] or null (kernels.h)
void lstm_cell_backward(bool of_h, int64_t b, int64_t h, const float* a, const float* s,
                        const float* gout, float* ga, float* gs) {
  for (int64_t r = 0; r < b; ++r) {
    const float* ar = a + r * 4 * h;
    float* gr = ga + r * 4 * h;
    for (int64_t j = 0; j < h; ++j) {  // each output's backward takes only its gates
      const int64_t k = r * h + j;
      const float go = gout[k];
      if (of_h) {  // h = o tanh(c'), s = c'
        const float o = sigmoid(ar[3 * h + j]), t = std::tanh(s[k]);
        gr[j] = gr[h + j] = gr[2 * h + j] = 0.f;
        gr[3 * h + j] = go * t * o * (1.f - o);
        if (gs) gs[k] = go * o * (1.f - t * t);
      } else {  // c' = f c + i g, s = c
        const float i = sigmoid(ar[j]), f = sigmoid(ar[h + j]), g = std::tanh(ar[2 * h + j]);
        gr[j] = go * g * i * (1.f - i);
        gr[h + j] = go * s[k] * f * (1.f - f);
        gr[2 * h + j] = go * i * (1.f - g * g);
        gr[3 * h + j] = 0.f;
        if (gs) gs[k] = go * f;
      }
    }
  }
}

}  // namespace minidl::cpu
