// The LSTM and GRU cells' pointwise parts (kernels.h, issue 23): one pass
// over the gates where the composed step took ten ops, each a pass with its
// backward.
// The forward keeps the activations, so the backward evaluates no exp or tanh;
// the forward's are vec_math.h's, so that its loop vectorizes.
#include "framework/backend/cpu/cpu.h"
#include "framework/backend/cpu/dispatch.h"
#include "framework/backend/cpu/vec_math.h"

namespace minidl::cpu {

// a [B, 4H] (i, f, g, o), c [B, H] -> act [B, 5H], c_out, h_out [B, H]
MINIDL_CLONES void lstm_cell_forward(int64_t b, int64_t h, const float* a, const float* c,
                                     float* act, float* c_out, float* h_out) {
  for (int64_t r = 0; r < b; ++r) {
    const float* ar = a + r * 4 * h;
    float* s = act + r * 5 * h;  // sigmoid(i), sigmoid(f), tanh(g), sigmoid(o), tanh(c')
#pragma omp simd
    for (int64_t j = 0; j < h; ++j) {
      const float i = vec::sigmoid(ar[j]), f = vec::sigmoid(ar[h + j]);
      const float g = vec::tanh(ar[2 * h + j]), o = vec::sigmoid(ar[3 * h + j]);
      const float cn = f * c[r * h + j] + i * g, t = vec::tanh(cn);
      s[j] = i, s[h + j] = f, s[2 * h + j] = g, s[3 * h + j] = o, s[4 * h + j] = t;
      c_out[r * h + j] = cn;
      h_out[r * h + j] = o * t;
    }
  }
}

// act [B, 5H], c, gh, gc_next [B, H] (gh, gc_next null: zero) -> ga [B, 4H],
// gc [B, H] or null (kernels.h; gc may be gc_next)
MINIDL_CLONES void lstm_cell_backward(int64_t b, int64_t h, const float* act, const float* c,
                                      const float* gh, const float* gc_next, float* ga,
                                      float* gc) {
  for (int64_t r = 0; r < b; ++r) {
    const float* s = act + r * 5 * h;
    float* gr = ga + r * 4 * h;
#pragma omp simd
    for (int64_t j = 0; j < h; ++j) {
      const float i = s[j], f = s[h + j], g = s[2 * h + j], o = s[3 * h + j], t = s[4 * h + j];
      const float dh = gh ? gh[r * h + j] : 0.f;
      const float dc = (gc_next ? gc_next[r * h + j] : 0.f) + dh * o * (1.f - t * t);
      gr[j] = dc * g * i * (1.f - i);
      gr[h + j] = dc * c[r * h + j] * f * (1.f - f);
      gr[2 * h + j] = dc * i * (1.f - g * g);
      gr[3 * h + j] = dh * t * o * (1.f - o);
      if (gc) gc[r * h + j] = dc * f;
    }
  }
}

// A whole step (kernels.h): a [B, 4H] += hp [B, H] w^T, then the cell
void lstm_step_forward(int64_t b, int64_t h, const float* w, const float* hp, float* a,
                       const float* c, float* act, float* c_out, float* h_out) {
  gemm(false, true, b, 4 * h, h, 1.f, hp, h, w, h, 1.f, a, 4 * h);
  lstm_cell_forward(b, h, a, c, act, c_out, h_out);
}

// dh [B, H] += g [B, 4H] w (g null: none), then the cell's backward from dh
void lstm_step_backward(int64_t b, int64_t h, const float* w, const float* /*wt*/, const float* g,
                        const float* act, const float* c, float* dh, const float* gc_next,
                        float* ga, float* gc) {
  if (g) gemm(false, false, b, h, 4 * h, 1.f, g, 4 * h, w, h, 1.f, dh, h);  // (nn: faster than wt)
  lstm_cell_backward(b, h, act, c, dh, gc_next, ga, gc);
}

// gx, gh [B, 3H] (r, z, n), hp [B, H] -> act [B, 4H] (r, z, n, gh_n), h_out [B, H]
MINIDL_CLONES void gru_cell_forward(int64_t b, int64_t h, const float* gx, const float* gh,
                                    const float* hp, float* act, float* h_out) {
  for (int64_t r = 0; r < b; ++r) {
    const float *x = gx + r * 3 * h, *g = gh + r * 3 * h;
    float* s = act + r * 4 * h;
#pragma omp simd
    for (int64_t j = 0; j < h; ++j) {
      const float rg = vec::sigmoid(x[j] + g[j]), z = vec::sigmoid(x[h + j] + g[h + j]);
      const float n = vec::tanh(x[2 * h + j] + rg * g[2 * h + j]);
      s[j] = rg, s[h + j] = z, s[2 * h + j] = n, s[3 * h + j] = g[2 * h + j];
      h_out[r * h + j] = n + z * (hp[r * h + j] - n);
    }
  }
}

// act [B, 4H], hp, gy [B, H] -> ggx, ggh [B, 3H]; ghp [B, H] += gy z (null: not wanted)
MINIDL_CLONES void gru_cell_backward(int64_t b, int64_t h, const float* act, const float* hp,
                                     const float* gy, float* ggx, float* ggh, float* ghp) {
  for (int64_t r = 0; r < b; ++r) {
    const float* s = act + r * 4 * h;
    float *gx = ggx + r * 3 * h, *gh = ggh + r * 3 * h;
#pragma omp simd
    for (int64_t j = 0; j < h; ++j) {
      const float rg = s[j], z = s[h + j], n = s[2 * h + j], hn = s[3 * h + j];
      const float dy = gy[r * h + j], dn = dy * (1.f - z) * (1.f - n * n);
      const float dr = dn * hn * rg * (1.f - rg), dz = dy * (hp[r * h + j] - n) * z * (1.f - z);
      gx[j] = gh[j] = dr;
      gx[h + j] = gh[h + j] = dz;
      gx[2 * h + j] = dn;
      gh[2 * h + j] = dn * rg;
      if (ghp) ghp[r * h + j] += dy * z;
    }
  }
}

// A whole step (kernels.h): gh [B, 3H] += hp [B, H] w^T, then the cell
void gru_step_forward(int64_t b, int64_t h, const float* w, const float* hp, const float* gx,
                      float* gh, float* act, float* h_out) {
  gemm(false, true, b, 3 * h, h, 1.f, hp, h, w, h, 1.f, gh, 3 * h);
  gru_cell_forward(b, h, gx, gh, hp, act, h_out);
}

// dh [B, H] += g [B, 3H] w (g null: none), then the cell's backward from dh
void gru_step_backward(int64_t b, int64_t h, const float* w, const float* /*wt*/, const float* g,
                       const float* act, const float* hp, float* dh, float* ggx, float* ggh,
                       float* ghp) {
  if (g) gemm(false, false, b, h, 3 * h, 1.f, g, 3 * h, w, h, 1.f, dh, h);
  gru_cell_backward(b, h, act, hp, dh, ggx, ggh, ghp);
}

}  // namespace minidl::cpu
