// CUDA kernels for the fused batch norm, layer norm and group norm
// (kernels.h). Batch norm: blocks take each channel's sums by parts (in
// double, shifted by the channel's first value as on the CPU), folded across
// the block in shared memory and then across the parts in a fixed order
// (deterministic); then one grid-stride pass over every element. Layer norm:
// a warp per row; group norm: a warp per (sample, group) row.
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

// The per-channel sums are cut into parts of about kPart elements, whole
// samples each: block (channel, part) sums its part, then one thread per
// channel folds the parts in order. One block per channel took [128, 16, 28,
// 28] 100 us on an H200, its 16 blocks leaving the GPU idle.
constexpr int64_t kPart = 4096;
int64_t samples_per_part(int64_t s) { return s >= kPart ? 1 : kPart / s; }

// x [N, C, S] -> part [2, C, P]: sums of (x - shift) and its square over the
// part's samples, shift the channel's first value (as on the CPU)
__global__ void batch_norm_stats_parts_kernel(int64_t n, int64_t c, int64_t s, int64_t per,
                                              int64_t parts, const float* x, double* part) {
  __shared__ double s1[kThreads], s2[kThreads];
  for (int64_t bp = blockIdx.x; bp < c * parts; bp += gridDim.x) {
    const int64_t ch = bp / parts, i0 = bp % parts * per, m = per < n - i0 ? per : n - i0;
    const double shift = x[ch * s];
    const float* xp = x + i0 * c * s;
    double a = 0, b = 0;
    for_channel(m, c, s, ch, [&](int64_t k) {
      const double v = static_cast<double>(xp[k]) - shift;
      a += v;
      b += v * v;
    });
    s1[threadIdx.x] = a, s2[threadIdx.x] = b;
    block_sum2(s1, s2);
    if (threadIdx.x == 0) part[bp] = s1[0], part[c * parts + bp] = s2[0];
    __syncthreads();  // s1, s2 are reused by the next part
  }
}

// part [2, C, P] -> save_mean, save_invstd [C] (and the running estimates), a
// thread per channel; in evaluation the running estimates alone
__global__ void batch_norm_stats_kernel(bool training, int64_t n, int64_t c, int64_t s,
                                        int64_t parts, const float* x, const double* part,
                                        float* running_mean, float* running_var, double momentum,
                                        double eps, float* save_mean, float* save_invstd) {
  const int64_t count = n * s;
  for (int64_t ch = thread_index(); ch < c; ch += thread_count()) {
    if (!training) {
      save_mean[ch] = running_mean[ch];
      save_invstd[ch] = static_cast<float>(1 / sqrt(static_cast<double>(running_var[ch]) + eps));
      continue;
    }
    double a = 0, b = 0;
    for (int64_t p = 0; p < parts; ++p) a += part[ch * parts + p], b += part[(c + ch) * parts + p];
    const double d = a / count, mean = x[ch * s] + d;
    const double var = fmax(b / count - d * d, 0.0);
    if (running_mean) {
      running_mean[ch] = static_cast<float>((1 - momentum) * running_mean[ch] + momentum * mean);
      running_var[ch] = static_cast<float>((1 - momentum) * running_var[ch] +
                                           momentum * var * count / (count - 1));
    }
    save_mean[ch] = static_cast<float>(mean);
    save_invstd[ch] = static_cast<float>(1 / sqrt(var + eps));
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

// gy, x [N, C, S] -> part [2, C, P] (double): sum(gy), sum(gy (x - mean)) over
// each part's samples, block (channel, part)
__global__ void batch_norm_grad_parts_kernel(int64_t n, int64_t c, int64_t s, int64_t per,
                                             int64_t parts, const float* x, const float* gy,
                                             const float* mean, double* part) {
  __shared__ double s1[kThreads], s2[kThreads];
  for (int64_t bp = blockIdx.x; bp < c * parts; bp += gridDim.x) {
    const int64_t ch = bp / parts, i0 = bp % parts * per, m = per < n - i0 ? per : n - i0;
    const double mu = mean[ch];
    const float *xp = x + i0 * c * s, *gp = gy + i0 * c * s;
    double a = 0, b = 0;
    for_channel(m, c, s, ch, [&](int64_t k) {
      const double g = gp[k];
      a += g;
      b += g * (static_cast<double>(xp[k]) - mu);
    });
    s1[threadIdx.x] = a, s2[threadIdx.x] = b;
    block_sum2(s1, s2);
    if (threadIdx.x == 0) part[bp] = s1[0], part[c * parts + bp] = s2[0];
    __syncthreads();
  }
}

// part [2, C, P] -> sums [2, C] (and gweight, gbias where wanted), a thread per channel
__global__ void batch_norm_grad_sums_kernel(int64_t c, int64_t parts, const double* part,
                                            const float* invstd, double* sums, float* gweight,
                                            float* gbias) {
  for (int64_t ch = thread_index(); ch < c; ch += thread_count()) {
    double a = 0, b = 0;
    for (int64_t p = 0; p < parts; ++p) a += part[ch * parts + p], b += part[(c + ch) * parts + p];
    sums[ch] = a;
    sums[c + ch] = b;
    if (gweight) gweight[ch] = static_cast<float>(b * invstd[ch]);
    if (gbias) gbias[ch] = static_cast<float>(a);
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

// ---- layer norm: one warp per row; the weight and bias gradients by parts of
// kRowsPerPart rows, folded in a fixed order ----

constexpr int64_t kRowsPerPart = 64;

// A row of x [D], the warp's lanes over it -> its mean, and rstd = 1 /
// sqrt(biased variance + eps): the mean, then the variance, in double
__device__ double warp_row_stats(int64_t d, double eps, const float* xr, float* rstd) {
  const int lane = threadIdx.x % 32;
  double s1 = 0, s2 = 0;
  for (int64_t k = lane; k < d; k += 32) s1 += xr[k];
  const double m = warp_sum(s1) / d;
  for (int64_t k = lane; k < d; k += 32) s2 += (xr[k] - m) * (xr[k] - m);
  *rstd = static_cast<float>(1 / sqrt(warp_sum(s2) / d + eps));
  return m;
}

// x [R, D] -> mean, rstd [R], y [R, D]; the row's mean, then its variance, in double
__global__ void layer_norm_forward_kernel(int64_t r, int64_t d, double eps, const float* x,
                                          const float* weight, const float* bias, float* mean,
                                          float* rstd, float* y) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t row = thread_index() / 32; row < r; row += warps) {
    const float* xr = x + row * d;
    float rs;
    const auto mf = static_cast<float>(warp_row_stats(d, eps, xr, &rs));
    if (lane == 0) mean[row] = mf, rstd[row] = rs;
    for (int64_t k = lane; k < d; k += 32)
      y[row * d + k] = (xr[k] - mf) * rs * (weight ? weight[k] : 1.f) + (bias ? bias[k] : 0.f);
  }
}

// gy, x [R, D] -> gx [R, D] = rstd (gw - mean(gw) - xhat mean(gw xhat)), gw = gy weight
__global__ void layer_norm_grad_input_kernel(int64_t r, int64_t d, const float* x, const float* gy,
                                             const float* mean, const float* rstd,
                                             const float* weight, float* gx) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t row = thread_index() / 32; row < r; row += warps) {
    const float *xr = x + row * d, *gr = gy + row * d, m = mean[row], rs = rstd[row];
    double s1 = 0, s2 = 0;
    for (int64_t k = lane; k < d; k += 32) {
      const float gw = gr[k] * (weight ? weight[k] : 1.f);
      s1 += gw;
      s2 += gw * ((xr[k] - m) * rs);
    }
    const auto a = static_cast<float>(warp_sum(s1) / d);
    const auto c = static_cast<float>(warp_sum(s2) / d);
    for (int64_t k = lane; k < d; k += 32)
      gx[row * d + k] = (gr[k] * (weight ? weight[k] : 1.f) - a - (xr[k] - m) * rs * c) * rs;
  }
}

// gy, x [R, D] -> part [2, P, D]: sums of gy xhat and of gy over part p's
// rows; block (p, 32 columns): warp w takes rows w, w + kWarpsPerBlock, ..,
// lanes neighbouring columns, then warp 0 folds the warps in order
__global__ void layer_norm_grad_parts_kernel(int64_t r, int64_t d, int64_t parts, const float* x,
                                             const float* gy, const float* mean,
                                             const float* rstd, double* part) {
  __shared__ double sw[kThreads], sb[kThreads];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t tiles = (d + 31) / 32;
  for (int64_t bp = blockIdx.x; bp < parts * tiles; bp += gridDim.x) {
    const int64_t p = bp / tiles, c = bp % tiles * 32 + lane, first = p * kRowsPerPart;
    const int64_t end = first + kRowsPerPart < r ? first + kRowsPerPart : r;
    double a = 0, b = 0;
    if (c < d)
      for (int64_t i = first + warp; i < end; i += kWarpsPerBlock) {
        const float g = gy[i * d + c];
        a += g * ((x[i * d + c] - mean[i]) * rstd[i]);
        b += g;
      }
    sw[threadIdx.x] = a, sb[threadIdx.x] = b;
    __syncthreads();
    if (warp == 0 && c < d) {
      for (int w = 1; w < kWarpsPerBlock; ++w) a += sw[w * 32 + lane], b += sb[w * 32 + lane];
      part[p * d + c] = a, part[(parts + p) * d + c] = b;
    }
    __syncthreads();  // sw, sb are reused by the next block's part
  }
}

// part [2, P, D] -> gweight, gbias [D] (either may be null), the parts in order
__global__ void layer_norm_grad_fold_kernel(int64_t d, int64_t parts, const double* part,
                                            float* gweight, float* gbias) {
  for (int64_t c = thread_index(); c < d; c += thread_count()) {
    double a = 0, b = 0;
    for (int64_t p = 0; p < parts; ++p) a += part[p * d + c], b += part[(parts + p) * d + c];
    if (gweight) gweight[c] = static_cast<float>(a);
    if (gbias) gbias[c] = static_cast<float>(b);
  }
}

// ---- group norm: a warp per (sample, group) row of D = C/G * S values; the
// weight and bias gradients from per (sample, channel) sums, folded over the
// samples in order ----

// x [N, C, S] -> mean, rstd [N, G], y; the row's mean, then its variance, in double
__global__ void group_norm_forward_kernel(int64_t rows, int64_t g, int64_t cg, int64_t s,
                                          double eps, const float* x, const float* weight,
                                          const float* bias, float* mean, float* rstd, float* y) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock, d = cg * s;
  for (int64_t row = thread_index() / 32; row < rows; row += warps) {
    const float* xr = x + row * d;
    float rs;
    const double m = warp_row_stats(d, eps, xr, &rs);
    if (lane == 0) mean[row] = static_cast<float>(m), rstd[row] = rs;
    for (int64_t k = lane; k < d; k += 32) {
      const int64_t ch = row % g * cg + k / s;
      const float alpha = rs * (weight ? weight[ch] : 1.f);
      const float beta = static_cast<float>((bias ? bias[ch] : 0.0) - m * alpha);
      y[row * d + k] = xr[k] * alpha + beta;
    }
  }
}

// gy, x [N, C, S] -> part [N * C] pairs: sum(gy), sum(gy (x - mean)) over
// each (sample, channel)'s S values; a warp per pair
__global__ void group_norm_grad_sums_kernel(int64_t nc, int64_t g, int64_t cg, int64_t s,
                                            const float* x, const float* gy, const float* mean,
                                            double* part) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock, c = g * cg;
  for (int64_t p = thread_index() / 32; p < nc; p += warps) {
    const float m = mean[p / c * g + p % c / cg];
    double a = 0, b = 0;
    for (int64_t k = lane; k < s; k += 32) {
      const float v = gy[p * s + k];
      a += v, b += v * (x[p * s + k] - m);
    }
    a = warp_sum(a), b = warp_sum(b);
    if (lane == 0) part[2 * p] = a, part[2 * p + 1] = b;
  }
}

// -> gx = gy w rstd - c0 - (x - mean) c1 per row, c0, c1 from its channels' sums
__global__ void group_norm_grad_input_kernel(int64_t rows, int64_t g, int64_t cg, int64_t s,
                                             const float* x, const float* gy, const float* mean,
                                             const float* rstd, const float* weight,
                                             const double* part, float* gx) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock, d = cg * s;
  for (int64_t row = thread_index() / 32; row < rows; row += warps) {
    const float m = mean[row], rs = rstd[row];
    double a = 0, b = 0;
    for (int64_t j = lane; j < cg; j += 32) {
      const int64_t ch = row % g * cg + j, p = row / g * g * cg + ch;
      const double w = weight ? weight[ch] : 1.0;
      a += w * part[2 * p], b += w * part[2 * p + 1] * rs;
    }
    const auto c0 = static_cast<float>(rs * warp_sum(a) / d);
    const auto c1 = static_cast<float>(rs * rs * warp_sum(b) / d);
    for (int64_t k = lane; k < d; k += 32) {
      const int64_t ch = row % g * cg + k / s, i = row * d + k;
      gx[i] = gy[i] * (rs * (weight ? weight[ch] : 1.f)) - c0 - (x[i] - m) * c1;
    }
  }
}

// part -> gweight[c] = sum over samples of rstd sum(gy (x - mean)), gbias[c]
// = of sum(gy), in sample order (either may be null)
__global__ void group_norm_grad_fold_kernel(int64_t n, int64_t g, int64_t cg,
                                            const double* part, const float* rstd,
                                            float* gweight, float* gbias) {
  const int64_t c = g * cg;
  for (int64_t ch = thread_index(); ch < c; ch += thread_count()) {
    double w = 0, b = 0;
    for (int64_t i = 0; i < n; ++i)
      w += part[2 * (i * c + ch) + 1] * rstd[i * g + ch / cg], b += part[2 * (i * c + ch)];
    if (gweight) gweight[ch] = static_cast<float>(w);
    if (gbias) gbias[ch] = static_cast<float>(b);
  }
}

}  // namespace

void batch_norm_forward(bool training, int64_t n, int64_t c, int64_t s, const float* x,
                        const float* weight, const float* bias, float* running_mean,
                        float* running_var, double momentum, double eps, float* save_mean,
                        float* save_invstd, float* y) {
  if (n * c * s == 0) return;
  const int64_t per = samples_per_part(s), parts = (n + per - 1) / per;
  Scratch<double> part(training ? 2 * c * parts : 1);
  if (training) {
    batch_norm_stats_parts_kernel<<<blocks_for(c * parts, 1), kThreads, 0, stream()>>>(
        n, c, s, per, parts, x, part.data());
    CUDA_CHECK_LAUNCH();
  }
  batch_norm_stats_kernel<<<blocks_for(c), kThreads, 0, stream()>>>(
      training, n, c, s, parts, x, part.data(), running_mean, running_var, momentum, eps,
      save_mean, save_invstd);
  CUDA_CHECK_LAUNCH();
  batch_norm_apply_kernel<<<blocks_for(n * c * s), kThreads, 0, stream()>>>(
      n * c * s, c, s, x, weight, bias, save_mean, save_invstd, y);
  CUDA_CHECK_LAUNCH();
}

void batch_norm_backward(bool training, int64_t n, int64_t c, int64_t s, const float* x,
                         const float* gy, const float* save_mean, const float* save_invstd,
                         const float* weight, float* gx, float* gweight, float* gbias) {
  if (n * c * s == 0) return;
  const int64_t per = samples_per_part(s), parts = (n + per - 1) / per;
  Scratch<double> sums(2 * c), part(2 * c * parts);
  batch_norm_grad_parts_kernel<<<blocks_for(c * parts, 1), kThreads, 0, stream()>>>(
      n, c, s, per, parts, x, gy, save_mean, part.data());
  CUDA_CHECK_LAUNCH();
  batch_norm_grad_sums_kernel<<<blocks_for(c), kThreads, 0, stream()>>>(
      c, parts, part.data(), save_invstd, sums.data(), gweight, gbias);
  CUDA_CHECK_LAUNCH();
  if (!gx) return;
  batch_norm_grad_input_kernel<<<blocks_for(n * c * s), kThreads, 0, stream()>>>(
      training, n, c, s, x, gy, save_mean, save_invstd, weight, sums.data(), gx);
  CUDA_CHECK_LAUNCH();
}

void layer_norm_forward(int64_t r, int64_t d, double eps, const float* x, const float* weight,
                        const float* bias, float* mean, float* rstd, float* y) {
  if (r * d == 0) return;
  layer_norm_forward_kernel<<<blocks_for(r * 32), kThreads, 0, stream()>>>(r, d, eps, x, weight,
                                                                           bias, mean, rstd, y);
  CUDA_CHECK_LAUNCH();
}

void layer_norm_backward(int64_t r, int64_t d, const float* x, const float* gy, const float* mean,
                         const float* rstd, const float* weight, float* gx, float* gweight,
                         float* gbias) {
  if (r * d == 0) return;
  if (gx) {
    layer_norm_grad_input_kernel<<<blocks_for(r * 32), kThreads, 0, stream()>>>(
        r, d, x, gy, mean, rstd, weight, gx);
    CUDA_CHECK_LAUNCH();
  }
  if (!gweight && !gbias) return;
  const int64_t parts = (r + kRowsPerPart - 1) / kRowsPerPart, tiles = (d + 31) / 32;
  Scratch<double> part(2 * parts * d);
  layer_norm_grad_parts_kernel<<<blocks_for(parts * tiles, 1), kThreads, 0, stream()>>>(
      r, d, parts, x, gy, mean, rstd, part.data());
  CUDA_CHECK_LAUNCH();
  layer_norm_grad_fold_kernel<<<blocks_for(d), kThreads, 0, stream()>>>(d, parts, part.data(),
                                                                        gweight, gbias);
  CUDA_CHECK_LAUNCH();
}

void group_norm_forward(int64_t n, int64_t c, int64_t s, int64_t g, double eps, const float* x,
                        const float* weight, const float* bias, float* mean, float* rstd,
                        float* y) {
  if (n * c * s == 0) return;
  group_norm_forward_kernel<<<blocks_for(n * g * 32), kThreads, 0, stream()>>>(
      n * g, g, c / g, s, eps, x, weight, bias, mean, rstd, y);
  CUDA_CHECK_LAUNCH();
}

void group_norm_backward(int64_t n, int64_t c, int64_t s, int64_t g, const float* x,
                         const float* gy, const float* mean, const float* rstd,
                         const float* weight, float* gx, float* gweight, float* gbias) {
  if (n * c * s == 0) return;
  Scratch<double> part(2 * n * c);
  group_norm_grad_sums_kernel<<<blocks_for(n * c * 32), kThreads, 0, stream()>>>(
      n * c, g, c / g, s, x, gy, mean, part.data());
  CUDA_CHECK_LAUNCH();
  if (gx) {
    group_norm_grad_input_kernel<<<blocks_for(n * g * 32), kThreads, 0, stream()>>>(
        n * g, g, c / g, s, x, gy, mean, rstd, weight, part.data(), gx);
    CUDA_CHECK_LAUNCH();
  }
  if (!gweight && !gbias) return;
  group_norm_grad_fold_kernel<<<blocks_for(c), kThreads, 0, stream()>>>(n, g, c / g, part.data(),
                                                                        rstd, gweight, gbias);
  CUDA_CHECK_LAUNCH();
}

}  // namespace minidl::cuda
