// CPU kernels for the table's label entries: gather and its backward, and the
// fused cross-entropy (see backend/kernels.h). Labels are int32 or int64.
#include <algorithm>
#include <cmath>
#include <vector>

#include "framework/backend/activations.h"
#include "framework/backend/cpu/cpu.h"
#include "framework/backend/cpu/dispatch.h"

namespace minidl::cpu {
namespace {

template <class L>
int64_t label_at(const void* labels, int64_t i) {
  return static_cast<int64_t>(static_cast<const L*>(labels)[i]);
}
int64_t label(const void* labels, DType t, int64_t i) {
  return t == kInt64 ? label_at<int64_t>(labels, i) : label_at<int32_t>(labels, i);
}

}  // namespace

// x [N, C] -> out [N]
void gather(int64_t n, int64_t c, const float* x, const void* labels, DType lt, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i * c + label(labels, lt, i)];
}

// g [N] -> gx [N, C]
void gather_backward(int64_t n, int64_t c, const float* g, const void* labels, DType lt,
                     float* gx) {
  std::fill(gx, gx + n * c, 0.f);
  for (int64_t i = 0; i < n; ++i) gx[i * c + label(labels, lt, i)] = g[i];
}

// logits [N, C, inner] -> loss [1] (the mean over the N * inner positions),
// probs [N, C, inner] or null (then a buffer's). inner 1: row by row; else
// softmax_slab's columns, a vector across the positions.
void cross_entropy_forward(int64_t N, int64_t C, int64_t inner, const float* px, const void* labels,
                           DType lt, float* loss, float* pp) {
  double total = 0;
  if (inner == 1) {
    constexpr int64_t kRows = 64;  // a block's, in one softmax_rows call
#pragma omp parallel reduction(+ : total) if (N * C > 65536)
    {
      std::vector<float> row_probs(pp ? 0 : C);
      double lse[kRows];
#pragma omp for
      for (int64_t i0 = 0; i0 < N; i0 += kRows) {
        const int64_t n = std::min(kRows, N - i0);
        softmax_rows(false, n, C, px + i0 * C, pp ? pp + i0 * C : row_probs.data(), pp ? C : 0,
                     lse);
        for (int64_t i = i0; i < i0 + n; ++i)
          total += lse[i - i0] - px[i * C + label(labels, lt, i)];
      }
    }
  } else {
    Scratch own(pp ? 0 : N * C * inner);
    float* probs = pp ? pp : own.data();
    const int64_t slabs = (inner + kSoftmaxSlab - 1) / kSoftmaxSlab;
#pragma omp parallel for reduction(+ : total) if (N * C * inner > 65536 && N * slabs > 1)
    for (int64_t it = 0; it < N * slabs; ++it) {
      const int64_t n = it / slabs, j0 = it % slabs * kSoftmaxSlab;
      const int64_t w = std::min(kSoftmaxSlab, inner - j0), at = n * C * inner + j0;
      double lse[kSoftmaxSlab];
      softmax_slab(false, C, inner, w, px + at, probs + at, lse);
      for (int64_t j = 0; j < w; ++j)
        total += lse[j] - px[at + label(labels, lt, n * inner + j0 + j) * inner + j];
    }
  }
  loss[0] = static_cast<float>(total / (N * inner));
}

// p, t [n] -> l [n]; g -> gp, gt (each optional): act::bce and its gradients
void binary_cross_entropy_forward(int64_t n, const float* p, const float* t, float* l) {
  for (int64_t i = 0; i < n; ++i) l[i] = act::bce(p[i], t[i]);
}
void binary_cross_entropy_backward(int64_t n, const float* g, const float* p, const float* t,
                                   float* gp, float* gt) {
  for (int64_t i = 0; i < n; ++i) {
    if (gp) gp[i] = act::bce_grad_p(g[i], p[i], t[i]);
    if (gt) gt[i] = act::bce_grad_t(g[i], p[i]);
  }
}

namespace {

// body(f, f') with the DiffLoss's f and its derivative (kernels.h), each a
// lambda of its own so that the loops below vectorize
template <class Body>
void with_diff_loss(DiffLoss f, float s, Body body) {
  switch (f) {
    case DiffLoss::Square:
      return body([](float d) { return d * d; }, [](float d) { return 2.f * d; });
    case DiffLoss::SmoothL1:
      return body([s](float d) { return act::smooth_l1(d, s); },
                  [s](float d) { return act::smooth_l1_grad(d, s); });
  }
}

// l [n] = scale f(x - y) (a function of its own: MINIDL_CLONES, the wide vectors)
template <class F>
MINIDL_CLONES void diff_map(int64_t n, const float* x, const float* y, float scale, float* l, F f) {
#pragma omp parallel for simd if (parallel : n > 65536)
  for (int64_t i = 0; i < n; ++i) l[i] = scale * f(x[i] - y[i]);
}

// out [n] = c(i) f'(x - y), c(i) the gradient's factor at i
template <class C, class F>
MINIDL_CLONES void diff_grad(int64_t n, const float* x, const float* y, float* out, C c, F fp) {
#pragma omp parallel for simd if (parallel : n > 65536)
  for (int64_t i = 0; i < n; ++i) out[i] = c(i) * fp(x[i] - y[i]);
}

}  // namespace

// x, y [n] -> l [n] = scale f(x - y)
void diff_loss_forward(DiffLoss f, float s, float scale, int64_t n, const float* x, const float* y,
                       float* l) {
  with_diff_loss(f, s, [&](auto fn, auto) { diff_map(n, x, y, scale, l, fn); });
}

// g [n] (each) or g[0] -> gx = scale g f'(x - y), gy = -gx (either null)
void diff_loss_backward(DiffLoss f, float s, float scale, int64_t n, const float* x, const float* y,
                        const float* g, bool each, float* gx, float* gy) {
  float* out = gx ? gx : gy;
  if (!out) return;
  const float sign = gx ? scale : -scale, g0 = each ? 0.f : sign * g[0];
  with_diff_loss(f, s, [&](auto, auto fp) {
    if (each) diff_grad(n, x, y, out, [g, sign](int64_t i) { return sign * g[i]; }, fp);
    else diff_grad(n, x, y, out, [g0](int64_t) { return g0; }, fp);
  });
  if (gx && gy) {
#pragma omp parallel for simd if (parallel : n > 65536)
    for (int64_t i = 0; i < n; ++i) gy[i] = -gx[i];
  }
}

namespace {

// probs [N, C, inner] (inner > 1) -> scale * (probs - onehot), in place: a
// vector across each row's positions
template <class L>
MINIDL_CLONES void cross_entropy_backward_at(int64_t N, int64_t C, int64_t inner, const L* labels,
                                             float scale, float* gp) {
#pragma omp parallel for if (N * C * inner > 65536)
  for (int64_t r = 0; r < N * C; ++r) {
    const L k = static_cast<L>(r % C);
    const L* __restrict lab = labels + r / C * inner;
    float* __restrict row = gp + r * inner;
#pragma omp simd
    for (int64_t j = 0; j < inner; ++j) row[j] = row[j] * scale - (lab[j] == k ? scale : 0.f);
  }
}

}  // namespace

// probs [N, C, inner] -> g / (N * inner) * (probs - onehot), in place
void cross_entropy_backward(int64_t N, int64_t C, int64_t inner, const void* labels, DType lt,
                            const float* g, float* gp) {
  const float scale = static_cast<float>(static_cast<double>(g[0]) / (N * inner));
  if (inner > 1) {
    if (lt == kInt64)
      cross_entropy_backward_at(N, C, inner, static_cast<const int64_t*>(labels), scale, gp);
    else
      cross_entropy_backward_at(N, C, inner, static_cast<const int32_t*>(labels), scale, gp);
    return;
  }
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t c = 0; c < C; ++c) gp[i * C + c] *= scale;
    gp[i * C + label(labels, lt, i)] -= scale;
  }
}

}  // namespace minidl::cpu
