// conv2d on CUDA: im2col into a column buffer, then cuBLAS GEMMs over groups
// of samples; backward scatters the column gradient back with col2im. Each
// pass may go to cuDNN instead, per shape (conv_cudnn.cpp).
// Letters as in kernels.h; L = OH*OW, G = groups, CKK = C/G*KH*KW (one
// channel group's column rows: each channel group cg is its own im2col and
// GEMMs with its weight rows w_cg [OC/G, CKK]). A sample group is the samples
// whose columns fit kColumnBytes. A column buffer holds sample s's element
// (row, l) at s * sample_stride + row * ld + l: per sample ([G, CKK, L],
// sample_stride CKK*L, ld L) for batched GEMMs with the weight, or side by
// side ([CKK, G*L], sample_stride L, ld G*L) for the weight gradient, one GEMM
// whose inner dimension runs over the group's samples.
#include <algorithm>

#include "framework/backend/cuda/device.cuh"

namespace minidl::cuda {
namespace {

constexpr int64_t kColumnBytes = int64_t{128} << 20;

int64_t group_size(const ConvGeometry& g) {
  const int64_t per_sample = g.C / g.groups * g.KH * g.KW * g.OH * g.OW * int64_t{sizeof(float)};
  return std::clamp<int64_t>(kColumnBytes / std::max<int64_t>(per_sample, 1), 1,
                             std::max<int64_t>(g.N, 1));
}

// x [S, C, H, W], channel group cg -> col (S samples, layout above), zero
// where the window hits padding
__global__ void im2col_kernel(ConvGeometry g, int64_t cg, int64_t samples, const float* x,
                              float* col, int64_t sample_stride, int64_t ld) {
  const int64_t L = g.OH * g.OW, Cg = g.C / g.groups, CKK = Cg * g.KH * g.KW;
  for (int64_t i = thread_index(); i < samples * CKK * L; i += thread_count()) {
    const int64_t l = i % L, row = i / L % CKK, s = i / (L * CKK);
    const int64_t c = cg * Cg + row / (g.KH * g.KW), ki = row / g.KW % g.KH, kj = row % g.KW;
    const int64_t h = l / g.OW * g.sh - g.ph + ki * g.dh, w = l % g.OW * g.sw - g.pw + kj * g.dw;
    const bool inside = h >= 0 && h < g.H && w >= 0 && w < g.W;
    col[s * sample_stride + row * ld + l] = inside ? x[((s * g.C + c) * g.H + h) * g.W + w] : 0.f;
  }
}

// col (S samples, layout above) -> channel group cg of x [S, C, H, W]
// (overwritten): each pixel sums the column entries of the windows that
// cover it, in (ki, kj) order as the CPU's col2im adds them; no atomics,
// deterministic.
__global__ void col2im_kernel(ConvGeometry g, int64_t cg, int64_t samples, const float* col,
                              int64_t sample_stride, int64_t ld, float* x) {
  const int64_t Cg = g.C / g.groups;
  for (int64_t i = thread_index(); i < samples * Cg * g.H * g.W; i += thread_count()) {
    const int64_t w = i % g.W, h = i / g.W % g.H, c = i / (g.W * g.H) % Cg;
    const int64_t s = i / (g.W * g.H * Cg);
    const float* cs = col + s * sample_stride;
    float sum = 0.f;
    for (int64_t ki = 0; ki < g.KH; ++ki) {
      const int64_t hp = h + g.ph - ki * g.dh;  // = oh * sh for the window row that covers h
      if (hp < 0 || hp % g.sh != 0 || hp / g.sh >= g.OH) continue;
      for (int64_t kj = 0; kj < g.KW; ++kj) {
        const int64_t wp = w + g.pw - kj * g.dw;
        if (wp < 0 || wp % g.sw != 0 || wp / g.sw >= g.OW) continue;
        sum += cs[((c * g.KH + ki) * g.KW + kj) * ld + hp / g.sh * g.OW + wp / g.sw];
      }
    }
    x[((s * g.C + cg * Cg + c) * g.H + h) * g.W + w] = sum;
  }
}

// y [N, OC, L] += b [OC]
__global__ void add_bias_kernel(int64_t n, int64_t oc, int64_t l, const float* b, float* y) {
  for (int64_t i = thread_index(); i < n * oc * l; i += thread_count()) y[i] += b[i / l % oc];
}

// gy [N, OC, L] -> gb [OC], one block per output channel (for_channel)
__global__ void bias_grad_kernel(int64_t n, int64_t oc, int64_t l, const float* gy, float* gb) {
  __shared__ float partial[kThreads / 32];
  for (int64_t o = blockIdx.x; o < oc; o += gridDim.x) {
    float s = 0.f;
    for_channel(n, oc, l, o, [&](int64_t k) { s += gy[k]; });
    s = warp_sum(s);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
      s = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.f;
      s = warp_sum(s);
      if (threadIdx.x == 0) gb[o] = s;
    }
    __syncthreads();  // partial is reused by the next channel
  }
}

// src [A, B, L] -> dst [B, A, L]
__global__ void swap01_kernel(int64_t a, int64_t b, int64_t l, const float* src, float* dst) {
  for (int64_t i = thread_index(); i < a * b * l; i += thread_count()) {
    const int64_t li = i % l, ai = i / l % a, bi = i / (l * a);
    dst[i] = src[(ai * b + bi) * l + li];
  }
}

void im2col(const ConvGeometry& g, int64_t cg, int64_t samples, const float* x, float* col,
            int64_t sample_stride, int64_t ld) {
  const int64_t n = samples * g.C / g.groups * g.KH * g.KW * g.OH * g.OW;
  im2col_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(g, cg, samples, x, col, sample_stride,
                                                          ld);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

// x [N, C, H, W], w [OC, C/G, KH, KW], b [OC] or null -> y [N, OC, OH, OW]:
// cuDNN where the plan says, else per sample group and channel group cg
// y_s[cg rows] [OC/G, L] = w_cg [OC/G, CKK] col_s [CKK, L] as one batched
// GEMM (weight stride 0); then the bias. A 1x1 kernel with stride 1, no
// padding and OH, OW = H, W reads x itself as the columns.
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
  if (!cudnn_conv(ConvPass::Forward, g, {x, w, nullptr, y}, by_im2col)) by_im2col();
  if (b) {
    add_bias_kernel<<<blocks_for(g.N * g.OC * L), kThreads, 0, stream()>>>(g.N, g.OC, L, b, y);
    CUDA_CHECK_LAUNCH();
  }
}

// gy [N, OC, L] -> gx [N, C, H, W], gw [OC, CKK], gb [OC] (each optional):
// gb sums gy over N and L. gw and gx by cuDNN where their plans say, else,
// per channel group cg: gw_cg = sum over sample groups of g2[cg rows, group]
// col^T with g2 = gy as [OC, N*L]; gcol_s [CKK, L] = w_cg^T gy_s[cg rows]
// per sample group (batched), then col2im.
void conv2d_backward(const ConvGeometry& g, const float* x, const float* w, const float* gy,
                     float* gx, float* gw, float* gb) {
  const int64_t L = g.OH * g.OW, chw = g.C * g.H * g.W;
  const int64_t Cg = g.C / g.groups, OCg = g.OC / g.groups, CKK = Cg * g.KH * g.KW;
  const int64_t NL = g.N * L, G = group_size(g);
  if (gb) {
    bias_grad_kernel<<<blocks_for(g.OC, 1), kThreads, 0, stream()>>>(g.N, g.OC, L, gy, gb);
    CUDA_CHECK_LAUNCH();
  }
  if (gw) {
    auto by_im2col = [&] {
      Scratch<float> g2(g.OC * NL), col(G * CKK * L);
      swap01_kernel<<<blocks_for(g.OC * NL), kThreads, 0, stream()>>>(g.N, g.OC, L, gy, g2.data());
      CUDA_CHECK_LAUNCH();
      for (int64_t s0 = 0; s0 < g.N; s0 += G) {
        const int64_t gs = std::min(G, g.N - s0);
        for (int64_t cg = 0; cg < g.groups; ++cg) {
          im2col(g, cg, gs, x + s0 * chw, col.data(), L, gs * L);
          gemm(false, true, OCg, CKK, gs * L, 1.f, g2.data() + cg * OCg * NL + s0 * L, NL, 0,
               col.data(), gs * L, 0, s0 == 0 ? 0.f : 1.f, gw + cg * OCg * CKK, CKK, 0, 1);
        }
      }
      if (g.N == 0) fill(kFloat32, g.OC * CKK, 0.0, gw);  // no group wrote it
    };
    if (!cudnn_conv(ConvPass::WeightGrad, g, {x, nullptr, gy, gw}, by_im2col)) by_im2col();
  }
  if (gx && g.N * chw > 0) {
    auto by_im2col = [&] {
      Scratch<float> col(G * CKK * L);
      for (int64_t s0 = 0; s0 < g.N; s0 += G) {
        const int64_t gs = std::min(G, g.N - s0);
        for (int64_t cg = 0; cg < g.groups; ++cg) {
          gemm(true, false, CKK, L, OCg, 1.f, w + cg * OCg * CKK, CKK, 0,
               gy + (s0 * g.OC + cg * OCg) * L, L, g.OC * L, 0.f, col.data(), L, CKK * L, gs);
          col2im_kernel<<<blocks_for(gs * chw / g.groups), kThreads, 0, stream()>>>(
              g, cg, gs, col.data(), CKK * L, L, gx + s0 * chw);
          CUDA_CHECK_LAUNCH();
        }
      }
    };
    if (!cudnn_conv(ConvPass::InputGrad, g, {nullptr, w, gy, gx}, by_im2col)) by_im2col();
  }
}

}  // namespace minidl::cuda
