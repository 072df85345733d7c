// Label kernels on CUDA: gather and its backward, and the fused softmax
// cross-entropy. Labels are int32 or int64; the front end checks them only on
// the host, so a label outside [0, C) is caught here: it reads nothing and
// makes its output, loss or gradient row NaN.
#include <cmath>

#include "framework/backend/activations.h"
#include "framework/backend/cuda/device.cuh"

namespace minidl::cuda {
namespace {


// x [N, C] -> out [N] = x[i, labels[i]]
__global__ void gather_kernel(int64_t n, int64_t c, const float* x, const void* labels, bool is64,
                              float* out) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    const int64_t l = label_at(labels, is64, i);
    out[i] = l >= 0 && l < c ? x[i * c + l] : NAN;
  }
}

// g [N] -> gx [N, C]: g[i] at labels[i], zero elsewhere
__global__ void gather_backward_kernel(int64_t n, int64_t c, const float* g, const void* labels,
                                       bool is64, float* gx) {
  for (int64_t i = thread_index(); i < n * c; i += thread_count()) {
    const int64_t row = i / c, l = label_at(labels, is64, row);
    gx[i] = l < 0 || l >= c ? NAN : i % c == l ? g[row] : 0.f;
  }
}

// logits [N, C, inner] -> row_loss [N * inner] = logsumexp_p - logits[p at
// labels[p]] (double) for each position p, probs [N, C, inner] = softmax over
// C unless null; one warp per position, its C values inner apart
__global__ void cross_entropy_rows_kernel(int64_t n, int64_t c, int64_t inner, const float* logits,
                                          const void* labels, bool is64, double* row_loss,
                                          float* probs) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t row = thread_index() / 32; row < n * inner; row += warps) {
    const int64_t at = row / inner * c * inner + row % inner;  // class 0 of position row
    const float* x = logits + at;
    float m = -INFINITY;
    for (int64_t k = lane; k < c; k += 32) m = fmaxf(m, x[k * inner]);
    m = warp_max(m);
    float s = 0.f;
    for (int64_t k = lane; k < c; k += 32) s += expf(x[k * inner] - m);
    s = warp_sum(s);
    if (lane == 0) {
      const int64_t l = label_at(labels, is64, row);
      row_loss[row] = l >= 0 && l < c ? m + log(static_cast<double>(s)) - x[l * inner] : NAN;
    }
    if (probs) {
      const float log_s = logf(s);  // exact for large logits too, as on the CPU
      for (int64_t k = lane; k < c; k += 32)
        probs[at + k * inner] = expf((x[k * inner] - m) - log_s);
    }
  }
}

// row_loss [N] -> loss [1] = the mean, summed in double by one block
__global__ void mean_kernel(int64_t n, const double* row_loss, float* loss) {
  __shared__ double partial[kThreads];
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += row_loss[i];
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) loss[0] = static_cast<float>(partial[0] / n);
}

// probs [N, C, inner] -> in place, g[0] / (N * inner) * (probs - onehot(labels))
__global__ void cross_entropy_backward_kernel(int64_t n, int64_t c, int64_t inner,
                                              const void* labels, bool is64, const float* g,
                                              float* probs) {
  const float scale = static_cast<float>(static_cast<double>(g[0]) / (n * inner));
  for (int64_t i = thread_index(); i < n * c * inner; i += thread_count()) {
    const int64_t position = i / (c * inner) * inner + i % inner;
    const int64_t l = label_at(labels, is64, position);
    float v = probs[i] * scale;
    if (i / inner % c == l) v -= scale;
    probs[i] = l < 0 || l >= c ? NAN : v;
  }
}

// p, t [n] -> l [n] (act::bce)
__global__ void bce_kernel(int64_t n, const float* p, const float* t, float* l) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) l[i] = act::bce(p[i], t[i]);
}

// g, p, t [n] -> gp, gt [n], each where not null
__global__ void bce_backward_kernel(int64_t n, const float* g, const float* p, const float* t,
                                    float* gp, float* gt) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    if (gp) gp[i] = act::bce_grad_p(g[i], p[i], t[i]);
    if (gt) gt[i] = act::bce_grad_t(g[i], p[i]);
  }
}

// x, y [n] -> l [n] = scale f(x - y)
template <class F>
__global__ void diff_loss_kernel(int64_t n, const float* x, const float* y, float scale,
                                 float* l, F f) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) l[i] = scale * f(x[i] - y[i]);
}

// gx = scale g f'(x - y), gy = -gx (either null); g [n] (each) or g[0]
template <class F>
__global__ void diff_loss_backward_kernel(int64_t n, const float* x, const float* y,
                                          const float* g, bool each, float scale, float* gx,
                                          float* gy, F fp) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    const float v = scale * g[each ? i : 0] * fp(x[i] - y[i]);
    if (gx) gx[i] = v;
    if (gy) gy[i] = -v;
  }
}

}  // namespace

// (the switches name each device lambda in a plain function, as nvcc asks)
void diff_loss_forward(DiffLoss f, float s, float scale, int64_t n, const float* x, const float* y,
                       float* l) {
  if (n == 0) return;
  auto run = [&](auto fn) {
    diff_loss_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(n, x, y, scale, l, fn);
  };
  switch (f) {
    case DiffLoss::Square: run([] __device__(float d) { return d * d; }); break;
    case DiffLoss::SmoothL1: run([s] __device__(float d) { return act::smooth_l1(d, s); }); break;
  }
  CUDA_CHECK_LAUNCH();
}

void diff_loss_backward(DiffLoss f, float s, float scale, int64_t n, const float* x, const float* y,
                        const float* g, bool each, float* gx, float* gy) {
  if (n == 0 || (!gx && !gy)) return;
  auto run = [&](auto fp) {
    diff_loss_backward_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(n, x, y, g, each, scale,
                                                                        gx, gy, fp);
  };
  switch (f) {
    case DiffLoss::Square: run([] __device__(float d) { return 2.f * d; }); break;
    case DiffLoss::SmoothL1:
      run([s] __device__(float d) { return act::smooth_l1_grad(d, s); });
      break;
  }
  CUDA_CHECK_LAUNCH();
}

void gather(int64_t n, int64_t c, const float* x, const void* labels, DType lt, float* out) {
  if (n == 0) return;
  gather_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(n, c, x, labels, lt == kInt64, out);
  CUDA_CHECK_LAUNCH();
}

void gather_backward(int64_t n, int64_t c, const float* g, const void* labels, DType lt,
                     float* gx) {
  if (n * c == 0) return;
  gather_backward_kernel<<<blocks_for(n * c), kThreads, 0, stream()>>>(n, c, g, labels,
                                                                       lt == kInt64, gx);
  CUDA_CHECK_LAUNCH();
}

void cross_entropy_forward(int64_t n, int64_t c, int64_t inner, const float* logits,
                           const void* labels, DType lt, float* loss, float* probs) {
  Scratch<double> row_loss(n * inner);
  cross_entropy_rows_kernel<<<blocks_for(n * inner * 32), kThreads, 0, stream()>>>(
      n, c, inner, logits, labels, lt == kInt64, row_loss.data(), probs);
  CUDA_CHECK_LAUNCH();
  mean_kernel<<<1, kThreads, 0, stream()>>>(n * inner, row_loss.data(), loss);
  CUDA_CHECK_LAUNCH();
}

void binary_cross_entropy_forward(int64_t n, const float* p, const float* t, float* l) {
  if (n == 0) return;
  bce_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(n, p, t, l);
  CUDA_CHECK_LAUNCH();
}

void binary_cross_entropy_backward(int64_t n, const float* g, const float* p, const float* t,
                                   float* gp, float* gt) {
  if (n == 0 || (!gp && !gt)) return;
  bce_backward_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(n, g, p, t, gp, gt);
  CUDA_CHECK_LAUNCH();
}

void cross_entropy_backward(int64_t n, int64_t c, int64_t inner, const void* labels, DType lt,
                            const float* g, float* probs) {
  if (n * c * inner == 0) return;
  cross_entropy_backward_kernel<<<blocks_for(n * c * inner), kThreads, 0, stream()>>>(
      n, c, inner, labels, lt == kInt64, g, probs);
  CUDA_CHECK_LAUNCH();
}

}  // namespace minidl::cuda
