// CUDA kernels for the fused batch norm (kernels.h): one block per channel
// takes its sums (in double, shifted by the channel's first value as on the
// CPU), folded across the block in shared memory in a fixed order
// (deterministic); then one grid-stride pass over every element.
#include "framework/backend/cuda/device.cuh"

namespace minidl::cuda {
namespace {

// Folds a and b [kThreads] of the block into a[0], b[0] (every thread calls it).
__device__ void block_sum2(double* a, double* b) {
  for (int half = kThreads / 2; half > 0; half >>= 1) {
    __syncthreads();
    if (threadIdx.x < half)
      a[threadIdx.x] += a[threadIdx.x + half], b[threadIdx.x] += b[threadIdx.x + half];
  }
  __syncthreads();
}

// x [N, C, S] -> save_mean, save_invstd [C] (and the running estimates), one block per channel
__global__ void batch_norm_stats_kernel(bool training, int64_t n, int64_t c, int64_t s,
                                        const float* x, float* running_mean, float* running_var,
                                        double momentum, double eps, float* save_mean,
                                        float* save_invstd) {
  __shared__ double s1[kThreads], s2[kThreads];
  const int64_t count = n * s;
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    if (!training) {
      if (threadIdx.x == 0) {
        save_mean[ch] = running_mean[ch];
        save_invstd[ch] = static_cast<float>(1 / sqrt(static_cast<double>(running_var[ch]) + eps));
      }
      continue;
    }
    const double shift = x[ch * s];  // the channel's first value
    double a = 0, b = 0;
    for_channel(n, c, s, ch, [&](int64_t k) {
      const double v = static_cast<double>(x[k]) - shift;
      a += v;
      b += v * v;
    });
    s1[threadIdx.x] = a, s2[threadIdx.x] = b;
    block_sum2(s1, s2);
    if (threadIdx.x == 0) {
      const double d = s1[0] / count, mean = shift + d;
      const double var = fmax(s2[0] / count - d * d, 0.0);
      if (running_mean) {
        running_mean[ch] = static_cast<float>((1 - momentum) * running_mean[ch] + momentum * mean);
        running_var[ch] = static_cast<float>((1 - momentum) * running_var[ch] +
                                             momentum * var * count / (count - 1));
      }
      save_mean[ch] = static_cast<float>(mean);
      save_invstd[ch] = static_cast<float>(1 / sqrt(var + eps));
    }
    __syncthreads();  // s1, s2 are reused by the next channel
  }
}

// x [N, C, S] -> y = x * alpha + beta: alpha = invstd * w, beta = b - mean * alpha
// (in double, as on the CPU)
__global__ void batch_norm_apply_kernel(int64_t total, int64_t c, int64_t s, const float* x,
                                        const float* weight, const float* bias, const float* mean,
                                        const float* invstd, float* y) {
  for (int64_t i = thread_index(); i < total; i += thread_count()) {
    const int64_t ch = (i / s) % c;
    const float alpha = invstd[ch] * (weight ? weight[ch] : 1.f);
    const float beta =
        static_cast<float>((bias ? bias[ch] : 0.0) - static_cast<double>(mean[ch]) * alpha);
    y[i] = x[i] * alpha + beta;
  }
}

// gy, x [N, C, S] -> sums [2, C] (double): sum(gy), sum(gy (x - mean)) per channel (and
// gweight, gbias where wanted), one block per channel
__global__ void batch_norm_grad_sums_kernel(int64_t n, int64_t c, int64_t s, const float* x,
                                            const float* gy, const float* mean, const float* invstd,
                                            double* sums, float* gweight, float* gbias) {
  __shared__ double s1[kThreads], s2[kThreads];
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    const double m = mean[ch];
    double a = 0, b = 0;
    for_channel(n, c, s, ch, [&](int64_t k) {
      const double g = gy[k];
      a += g;
      b += g * (static_cast<double>(x[k]) - m);
    });
    s1[threadIdx.x] = a, s2[threadIdx.x] = b;
    block_sum2(s1, s2);
    if (threadIdx.x == 0) {
      sums[ch] = s1[0];
      sums[c + ch] = s2[0];
      if (gweight) gweight[ch] = static_cast<float>(s2[0] * invstd[ch]);
      if (gbias) gbias[ch] = static_cast<float>(s1[0]);
    }
    __syncthreads();
  }
}

// gy, x [N, C, S], sums [2, C] -> gx = (gy - gm - (x - mean) k) * invstd * w
// (gm and k are 0 in evaluation)
__global__ void batch_norm_grad_input_kernel(bool training, int64_t n, int64_t c, int64_t s,
                                             const float* x, const float* gy, const float* mean,
                                             const float* invstd, const float* weight,
                                             const double* sums, float* gx) {
  const int64_t count = n * s, total = count * c;
  for (int64_t i = thread_index(); i < total; i += thread_count()) {
    const int64_t ch = (i / s) % c;
    const float is = invstd[ch], a = is * (weight ? weight[ch] : 1.f);
    const float gm = training ? static_cast<float>(sums[ch] / count) : 0.f;
    const float k = training ? static_cast<float>(sums[c + ch] * is * is / count) : 0.f;
    gx[i] = (gy[i] - gm - (x[i] - mean[ch]) * k) * a;
  }
}

}  // namespace

void batch_norm_forward(bool training, int64_t n, int64_t c, int64_t s, const float* x,
                        const float* weight, const float* bias, float* running_mean,
                        float* running_var, double momentum, double eps, float* save_mean,
                        float* save_invstd, float* y) {
  if (n * c * s == 0) return;
  batch_norm_stats_kernel<<<blocks_for(c * kThreads), kThreads, 0, stream()>>>(
      training, n, c, s, x, running_mean, running_var, momentum, eps, save_mean, save_invstd);
  CUDA_CHECK_LAUNCH();
  batch_norm_apply_kernel<<<blocks_for(n * c * s), kThreads, 0, stream()>>>(
      n * c * s, c, s, x, weight, bias, save_mean, save_invstd, y);
  CUDA_CHECK_LAUNCH();
}

void batch_norm_backward(bool training, int64_t n, int64_t c, int64_t s, const float* x,
                         const float* gy, const float* save_mean, const float* save_invstd,
                         const float* weight, float* gx, float* gweight, float* gbias) {
  if (n * c * s == 0) return;
  Scratch<double> sums(2 * c);
  batch_norm_grad_sums_kernel<<<blocks_for(c * kThreads), kThreads, 0, stream()>>>(
      n, c, s, x, gy, save_mean, save_invstd, sums.data(), gweight, gbias);
  CUDA_CHECK_LAUNCH();
  if (!gx) return;
  batch_norm_grad_input_kernel<<<blocks_for(n * c * s), kThreads, 0, stream()>>>(
      training, n, c, s, x, gy, save_mean, save_invstd, weight, sums.data(), gx);
  CUDA_CHECK_LAUNCH();
}

}  // namespace minidl::cuda
