// CPU kernels for the fused batch norm, layer norm and group norm
// (kernels.h). Batch norm: one thread per channel, which reads its N strips
// of S values for the statistics and again for the output while they are
// still in its cache (a [128, 16, 28, 28] channel is 400 KB); on [N, C]
// (S = 1), whose channels lie C apart, tiles of rows that stream through
// memory, and the output in a second pass. Sums are taken in double,
// shifted by the channel's first value (the shifted-data variance: no
// cancellation when |mean| >> std). Layer and group norm: a thread per row.
#include <algorithm>
#include <cmath>
#include <vector>

#include "framework/backend/cpu/cpu.h"
#include "framework/backend/cpu/dispatch.h"

namespace minidl::cpu {
namespace {

// Parallel over channels once a call has this many elements.
constexpr int64_t kParallelElements = 32768;

struct Sums {
  double s1 = 0, s2 = 0;  // sum(v), sum(v * v)
};

// x [N, C, S], channel c -> sums of v = x - shift over its N*S values
MINIDL_CLONES Sums channel_sums(int64_t n, int64_t c, int64_t s, const float* x, int64_t ch,
                                double shift) {
  double s1 = 0, s2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* xs = x + (i * c + ch) * s;
#pragma omp simd reduction(+ : s1, s2)
    for (int64_t j = 0; j < s; ++j) {
      const double v = static_cast<double>(xs[j]) - shift;
      s1 += v;
      s2 += v * v;
    }
  }
  return {s1, s2};
}

// x, y [N, C, S], channel c: y = x * scale + shift
MINIDL_CLONES void channel_affine(int64_t n, int64_t c, int64_t s, const float* x, int64_t ch,
                                  float scale, float shift, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const float* xs = x + (i * c + ch) * s;
    float* ys = y + (i * c + ch) * s;
#pragma omp simd
    for (int64_t j = 0; j < s; ++j) ys[j] = xs[j] * scale + shift;
  }
}

// gy, x [N, C, S], channel c -> sum(gy), sum(gy * (x - mean))
MINIDL_CLONES Sums channel_grad_sums(int64_t n, int64_t c, int64_t s, const float* x,
                                     const float* gy, int64_t ch, double mean) {
  double s1 = 0, s2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t off = (i * c + ch) * s;
#pragma omp simd reduction(+ : s1, s2)
    for (int64_t j = 0; j < s; ++j) {
      const double g = gy[off + j];
      s1 += g;
      s2 += g * (static_cast<double>(x[off + j]) - mean);
    }
  }
  return {s1, s2};
}

// gx [N, C, S], channel c = (gy - gm - (x - mean) k) * a
MINIDL_CLONES void channel_grad_input(int64_t n, int64_t c, int64_t s, const float* x,
                                      const float* gy, int64_t ch, float mean, float gm, float k,
                                      float a, float* gx) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t off = (i * c + ch) * s;
#pragma omp simd
    for (int64_t j = 0; j < s; ++j) gx[off + j] = (gy[off + j] - gm - (x[off + j] - mean) * k) * a;
  }
}

// Calls f(ch) for each channel (its N strips of S values), in parallel
template <class F>
void for_channels(int64_t n, int64_t c, int64_t s, F f) {
#pragma omp parallel for schedule(static) if (n * c * s > kParallelElements && c > 1)
  for (int64_t ch = 0; ch < c; ++ch) f(ch);
}

// [N, C] (S = 1), where a channel's values lie C apart: tasks of kRows rows
// by up to kCols channels stream their rows' contiguous pieces and keep the
// channels' sums in their cache; the tasks' sums then add in row order, so
// the result does not depend on the thread count.
constexpr int64_t kRows = 256, kCols = 1024;

struct Tiles {
  int64_t row_tiles, col_tiles;
  Tiles(int64_t n, int64_t c)
      : row_tiles((n + kRows - 1) / kRows), col_tiles((c + kCols - 1) / kCols) {}
  int64_t count() const { return row_tiles * col_tiles; }
};

// Calls f(r0, r1, c0, c1) for each tile of [N, C], in parallel
template <class F>
void for_tiles(int64_t n, int64_t c, F f) {
  const Tiles t(n, c);
#pragma omp parallel for schedule(static) if (n * c > kParallelElements && t.count() > 1)
  for (int64_t k = 0; k < t.count(); ++k) {
    const int64_t r0 = k / t.col_tiles * kRows, c0 = k % t.col_tiles * kCols;
    f(r0, std::min(r0 + kRows, n), c0, std::min(c0 + kCols, c));
  }
}

// x [N, C], rows [r0, r1), channels [c0, c1) -> s1, s2 [C] at [c0, c1) += sums
// of v = x - shift, v * v
MINIDL_CLONES void tile_sums(int64_t c, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                             const float* x, const double* shift, double* s1, double* s2) {
  for (int64_t i = r0; i < r1; ++i) {
    const float* row = x + i * c;
#pragma omp simd
    for (int64_t j = c0; j < c1; ++j) {
      const double v = static_cast<double>(row[j]) - shift[j];
      s1[j] += v;
      s2[j] += v * v;
    }
  }
}

// gy, x [N, C], rows [r0, r1), channels [c0, c1) -> s1, s2 [C] at [c0, c1) +=
// sums of gy, gy * (x - mean)
MINIDL_CLONES void tile_grad_sums(int64_t c, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                                  const float* x, const float* gy, const float* mean, double* s1,
                                  double* s2) {
  for (int64_t i = r0; i < r1; ++i) {
    const int64_t off = i * c;
#pragma omp simd
    for (int64_t j = c0; j < c1; ++j) {
      const double g = gy[off + j];
      s1[j] += g;
      s2[j] += g * (static_cast<double>(x[off + j]) - mean[j]);
    }
  }
}

// x, y [N, C], rows [r0, r1), channels [c0, c1): y = x * scale + shift
MINIDL_CLONES void tile_affine(int64_t c, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                               const float* x, const float* scale, const float* shift, float* y) {
  for (int64_t i = r0; i < r1; ++i) {
    const float* xr = x + i * c;
    float* yr = y + i * c;
#pragma omp simd
    for (int64_t j = c0; j < c1; ++j) yr[j] = xr[j] * scale[j] + shift[j];
  }
}

// gx [N, C], rows [r0, r1), channels [c0, c1) = (gy - gm - (x - mean) k) * a
MINIDL_CLONES void tile_grad_input(int64_t c, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                                   const float* x, const float* gy, const float* mean,
                                   const float* gm, const float* k, const float* a, float* gx) {
  for (int64_t i = r0; i < r1; ++i) {
    const int64_t off = i * c;
#pragma omp simd
    for (int64_t j = c0; j < c1; ++j)
      gx[off + j] = (gy[off + j] - gm[j] - (x[off + j] - mean[j]) * k[j]) * a[j];
  }
}

// Per-tile sums of [N, C] (fill(r0, r1, c0, c1, s1, s2) adds a tile's into
// its row tile's [C] rows, zero to start), added over the row tiles in order
template <class Fill>
std::vector<Sums> column_sums(int64_t n, int64_t c, Fill fill) {
  const Tiles t(n, c);
  std::vector<double> s1(t.row_tiles * c), s2(t.row_tiles * c);
  for_tiles(n, c, [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    fill(r0, r1, c0, c1, s1.data() + r0 / kRows * c, s2.data() + r0 / kRows * c);
  });
  std::vector<Sums> out(c);
  for (int64_t r = 0; r < t.row_tiles; ++r)
    for (int64_t j = 0; j < c; ++j) out[j].s1 += s1[r * c + j], out[j].s2 += s2[r * c + j];
  return out;
}

// What batch_norm_forward keeps of channel ch: the mean and variance (from
// the shifted sums in training, else the running estimates; running ones
// updated in training), save_mean and save_invstd; returns y's scale and
// shift (PyTorch's order: alpha = invstd * w, beta = b - mean * alpha, here
// in double from the double mean).
struct Affine {
  float alpha, beta;
};
Affine channel_stats(bool training, const Sums& sums, double shift, int64_t count, int64_t ch,
                     const float* weight, const float* bias, float* running_mean,
                     float* running_var, double momentum, double eps, float* save_mean,
                     float* save_invstd) {
  double mean, var;
  if (training) {
    const double d = sums.s1 / count;
    mean = shift + d;
    var = std::max(sums.s2 / count - d * d, 0.0);
    if (running_mean) {
      running_mean[ch] = static_cast<float>((1 - momentum) * running_mean[ch] + momentum * mean);
      running_var[ch] = static_cast<float>((1 - momentum) * running_var[ch] +
                                           momentum * var * count / (count - 1));
    }
  } else {
    mean = running_mean[ch], var = running_var[ch];
  }
  const float invstd = static_cast<float>(1 / std::sqrt(var + eps));
  save_mean[ch] = static_cast<float>(mean), save_invstd[ch] = invstd;
  const float alpha = invstd * (weight ? weight[ch] : 1.f);
  return {alpha, static_cast<float>((bias ? bias[ch] : 0.0) - mean * alpha)};
}

// What batch_norm_backward takes of channel ch's sums: gweight, gbias, and
// gx's terms gx = (gy - gm - (x - mean) k) * a
struct GradTerms {
  float a, gm, k;
};
GradTerms channel_grads(bool training, const Sums& sums, int64_t count, int64_t ch,
                        const float* save_invstd, const float* weight, float* gweight,
                        float* gbias) {
  const float invstd = save_invstd[ch];
  if (gweight) gweight[ch] = static_cast<float>(sums.s2 * invstd);
  if (gbias) gbias[ch] = static_cast<float>(sums.s1);
  const float a = invstd * (weight ? weight[ch] : 1.f);
  const float gm = training ? static_cast<float>(sums.s1 / count) : 0.f;
  const float k =
      training ? static_cast<float>(sums.s2 * double(invstd) * double(invstd) / count) : 0.f;
  return {a, gm, k};
}

}  // namespace

// x [N, C, S] -> y [N, C, S], save_mean, save_invstd [C]; running stats updated in training
void batch_norm_forward(bool training, int64_t n, int64_t c, int64_t s, const float* x,
                        const float* weight, const float* bias, float* running_mean,
                        float* running_var, double momentum, double eps, float* save_mean,
                        float* save_invstd, float* y) {
  const int64_t count = n * s;
  const auto stats = [&](const Sums& sums, double shift, int64_t ch) {
    return channel_stats(training, sums, shift, count, ch, weight, bias, running_mean,
                         running_var, momentum, eps, save_mean, save_invstd);
  };
  if (s > 1) {
    for_channels(n, c, s, [&](int64_t ch) {
      const double shift = x[ch * s];  // the channel's first value
      const Affine f = stats(training ? channel_sums(n, c, s, x, ch, shift) : Sums{}, shift, ch);
      channel_affine(n, c, s, x, ch, f.alpha, f.beta, y);
    });
    return;
  }
  std::vector<double> shift(c);  // each channel's first value
  std::vector<Sums> sums(c);
  if (training) {
    shift.assign(x, x + c);
    sums = column_sums(n, c, [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, double* s1,
                                 double* s2) {
      tile_sums(c, r0, r1, c0, c1, x, shift.data(), s1, s2);
    });
  }
  std::vector<float> alpha(c), beta(c);
  for (int64_t j = 0; j < c; ++j) {
    const Affine f = stats(sums[j], shift[j], j);
    alpha[j] = f.alpha, beta[j] = f.beta;
  }
  for_tiles(n, c, [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    tile_affine(c, r0, r1, c0, c1, x, alpha.data(), beta.data(), y);
  });
}

// gy, x [N, C, S] -> gx [N, C, S], gweight, gbias [C] (each may be null)
void batch_norm_backward(bool training, int64_t n, int64_t c, int64_t s, const float* x,
                         const float* gy, const float* save_mean, const float* save_invstd,
                         const float* weight, float* gx, float* gweight, float* gbias) {
  const int64_t count = n * s;
  const auto terms = [&](const Sums& sums, int64_t ch) {
    return channel_grads(training, sums, count, ch, save_invstd, weight, gweight, gbias);
  };
  if (s > 1) {
    for_channels(n, c, s, [&](int64_t ch) {
      const GradTerms t = terms(channel_grad_sums(n, c, s, x, gy, ch, save_mean[ch]), ch);
      if (gx) channel_grad_input(n, c, s, x, gy, ch, save_mean[ch], t.gm, t.k, t.a, gx);
    });
    return;
  }
  const std::vector<Sums> sums = column_sums(
      n, c, [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, double* s1, double* s2) {
        tile_grad_sums(c, r0, r1, c0, c1, x, gy, save_mean, s1, s2);
      });
  std::vector<float> a(c), gm(c), k(c);
  for (int64_t j = 0; j < c; ++j) {
    const GradTerms t = terms(sums[j], j);
    a[j] = t.a, gm[j] = t.gm, k[j] = t.k;
  }
  if (!gx) return;
  for_tiles(n, c, [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    tile_grad_input(c, r0, r1, c0, c1, x, gy, save_mean, gm.data(), k.data(), a.data(), gx);
  });
}

namespace {

// A row of x [D] -> its mean and 1 / sqrt(biased variance + eps): the mean,
// then the variance, in double (layer norm's and group norm's rows)
MINIDL_CLONES double row_stats(int64_t d, double eps, const float* xr, float* rstd) {
  double s1 = 0, s2 = 0;
#pragma omp simd reduction(+ : s1)
  for (int64_t k = 0; k < d; ++k) s1 += xr[k];
  const double m = s1 / d;
#pragma omp simd reduction(+ : s2)
  for (int64_t k = 0; k < d; ++k) s2 += (xr[k] - m) * (xr[k] - m);
  *rstd = static_cast<float>(1 / std::sqrt(s2 / d + eps));
  return m;
}

}  // namespace

// x [R, D] -> mean, rstd [R], y [R, D]
MINIDL_CLONES void layer_norm_forward(int64_t r, int64_t d, double eps, const float* x,
                                      const float* weight, const float* bias, float* mean,
                                      float* rstd, float* y) {
#pragma omp parallel for schedule(static) if (r * d > kParallelElements && r > 1)
  for (int64_t i = 0; i < r; ++i) {
    const float* xr = x + i * d;
    float* yr = y + i * d;
    const auto mf = static_cast<float>(row_stats(d, eps, xr, &rstd[i])), rs = rstd[i];
    mean[i] = mf;
#pragma omp simd
    for (int64_t k = 0; k < d; ++k)
      yr[k] = (xr[k] - mf) * rs * (weight ? weight[k] : 1.f) + (bias ? bias[k] : 0.f);
  }
}

// gy, x [R, D] -> gx [R, D], gweight, gbias [D] (each may be null). One pass
// over the rows: chunks of kChunkRows rows in parallel, each with its own column
// sums, which are then folded in chunk order (the same for any thread count).
MINIDL_CLONES void layer_norm_backward(int64_t r, int64_t d, const float* x, const float* gy,
                                       const float* mean, const float* rstd, const float* weight,
                                       float* gx, float* gweight, float* gbias) {
  constexpr int64_t kChunkRows = 64;
  const int64_t chunks = (r + kChunkRows - 1) / kChunkRows;
  const bool sums = gweight || gbias;
  std::vector<double> part(sums ? 2 * chunks * d : 0, 0.0);  // [chunk][sum(gy xhat), sum(gy)][D]
#pragma omp parallel for schedule(static) if (r * d > kParallelElements && chunks > 1)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    double *pw = sums ? part.data() + 2 * ch * d : nullptr, *pb = sums ? pw + d : nullptr;
    for (int64_t i = ch * kChunkRows; i < std::min(r, (ch + 1) * kChunkRows); ++i) {
      const float *xr = x + i * d, *gr = gy + i * d, m = mean[i], rs = rstd[i];
      if (sums) {
#pragma omp simd
        for (int64_t k = 0; k < d; ++k) {
          pw[k] += gr[k] * ((xr[k] - m) * rs);
          pb[k] += gr[k];
        }
      }
      if (!gx) continue;
      double s1 = 0, s2 = 0;  // sum(gw), sum(gw xhat)
#pragma omp simd reduction(+ : s1, s2)
      for (int64_t k = 0; k < d; ++k) {
        const float gw = gr[k] * (weight ? weight[k] : 1.f);
        s1 += gw;
        s2 += gw * ((xr[k] - m) * rs);
      }
      const auto a = static_cast<float>(s1 / d), c = static_cast<float>(s2 / d);
      float* out = gx + i * d;
#pragma omp simd
      for (int64_t k = 0; k < d; ++k)
        out[k] = (gr[k] * (weight ? weight[k] : 1.f) - a - (xr[k] - m) * rs * c) * rs;
    }
  }
  if (!sums) return;
  for (int64_t k = 0; k < d; ++k) {
    double w = 0, b = 0;
    for (int64_t ch = 0; ch < chunks; ++ch)
      w += part[2 * ch * d + k], b += part[(2 * ch + 1) * d + k];
    if (gweight) gweight[k] = static_cast<float>(w);
    if (gbias) gbias[k] = static_cast<float>(b);
  }
}

// x [N, C, S] -> mean, rstd [N, G], y: per (sample, group) row of D = C/G * S
// contiguous values, the mean, then the variance, in double; then each
// channel's S values at once with its scale and shift.
MINIDL_CLONES void group_norm_forward(int64_t n, int64_t c, int64_t s, int64_t g, double eps,
                                      const float* x, const float* weight, const float* bias,
                                      float* mean, float* rstd, float* y) {
  const int64_t cg = c / g, d = cg * s;
#pragma omp parallel for schedule(static) if (n * c * s > kParallelElements && n * g > 1)
  for (int64_t row = 0; row < n * g; ++row) {
    const float* xr = x + row * d;
    const double m = row_stats(d, eps, xr, &rstd[row]);
    const float rs = rstd[row];
    mean[row] = static_cast<float>(m);
    for (int64_t j = 0; j < cg; ++j) {
      const int64_t ch = row % g * cg + j;
      const float alpha = rs * (weight ? weight[ch] : 1.f);
      const auto beta = static_cast<float>((bias ? bias[ch] : 0.0) - m * alpha);
      channel_affine(1, 1, s, xr + j * s, 0, alpha, beta, y + row * d + j * s);
    }
  }
}

// gy, x [N, C, S] -> gx, gweight, gbias [C]: per (sample, channel) the sums
// of gy and gy (x - mean) in double, kept [N, C]; per row the gx terms from
// its channels' sums; the weight and bias gradients folded over N in order.
MINIDL_CLONES void group_norm_backward(int64_t n, int64_t c, int64_t s, int64_t g, const float* x,
                                       const float* gy, const float* mean, const float* rstd,
                                       const float* weight, float* gx, float* gweight,
                                       float* gbias) {
  const int64_t cg = c / g, d = cg * s;
  std::vector<Sums> sums(n * c);  // sum(gy), sum(gy (x - mean)) per (sample, channel)
#pragma omp parallel for schedule(static) if (n * c * s > kParallelElements && n * g > 1)
  for (int64_t row = 0; row < n * g; ++row) {
    const float m = mean[row], rs = rstd[row];
    double a = 0, b = 0;  // sum(gw), sum(gw xhat) over the row, gw = gy weight
    for (int64_t j = 0; j < cg; ++j) {
      const int64_t ch = row % g * cg + j, at = row * d + j * s;
      Sums& t = sums[row / g * c + ch];
      t = channel_grad_sums(1, 1, s, x + at, gy + at, 0, m);
      const double w = weight ? weight[ch] : 1.0;
      a += w * t.s1, b += w * t.s2 * rs;
    }
    if (!gx) continue;
    // gx = rstd (gy w - mean(gw) - xhat mean(gw xhat)) = gy w rstd - c0 - (x - m) c1
    const auto c0 = static_cast<float>(rs * a / d), c1 = static_cast<float>(rs * rs * b / d);
    for (int64_t j = 0; j < cg; ++j) {
      const int64_t ch = row % g * cg + j, at = row * d + j * s;
      const float wr = rs * (weight ? weight[ch] : 1.f);
#pragma omp simd
      for (int64_t k = at; k < at + s; ++k) gx[k] = gy[k] * wr - c0 - (x[k] - m) * c1;
    }
  }
  for (int64_t ch = 0; ch < c && (gweight || gbias); ++ch) {
    double w = 0, b = 0;
    for (int64_t i = 0; i < n; ++i) {
      const Sums& t = sums[i * c + ch];
      w += t.s2 * rstd[i * g + ch / cg], b += t.s1;
    }
    if (gweight) gweight[ch] = static_cast<float>(w);
    if (gbias) gbias[ch] = static_cast<float>(b);
  }
}

}  // namespace minidl::cpu
