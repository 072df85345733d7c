// Resizing ops (issue 22): adaptive_avg_pool2d, composed from two products
// with averaging matrices, and nearest and bilinear upsampling
// (upsample_nearest2d, upsample_bilinear2d, interpolate), whose index maps
// are made here and whose loops are the device's upsample kernels
// (backend/cpu/pool.cpp, cuda/pool.cu).
#include <algorithm>
#include <climits>
#include <cmath>
#include <vector>

#include "framework/ops.h"
#include "framework/ops/util.h"

namespace minidl {
namespace {

void check_size(const char* op, const Tensor& x, Size2 size) {
  require_f32(op, x);
  require_dim(op, x, 4);
  MINIDL_CHECK(size.h >= 1 && size.w >= 1, op, ": expected an output size >= 1, got ", size,
               " for input ", x.shape());
  MINIDL_CHECK(x.size(2) >= 1 && x.size(3) >= 1, op, ": expected an input of size >= 1, got ",
               x.shape());
}

// A [out, in] on x's device: row o holds 1/n over PyTorch's adaptive window
// [floor(o in / out), ceil((o + 1) in / out)) of n inputs, zero elsewhere
Tensor averaging_matrix(int64_t in, int64_t out, const Tensor& x) {
  std::vector<float> a(out * in, 0.f);
  for (int64_t o = 0; o < out; ++o) {
    const int64_t first = o * in / out, last = ((o + 1) * in + out - 1) / out;
    for (int64_t i = first; i < last; ++i) a[o * in + i] = 1.f / static_cast<float>(last - first);
  }
  return Tensor::from_vector(a, {out, in}).to(x.device());
}

}  // namespace

// x [N, C, H, W] -> [N, C, OH, OW] = A_h x A_w^T per plane: x as [NCH, W] times
// A_w^T -> [NC, H, OW], transposed to [NC, OW, H] times A_h^T, transposed back.
// To 1 x 1 (a network's global pooling) it is the mean over H and W.
Tensor adaptive_avg_pool2d(const Tensor& x, Size2 size) {
  check_size("adaptive_avg_pool2d", x, size);
  if (size.h == 1 && size.w == 1) return mean(x, {2, 3}, /*keepdim=*/true);
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  Tensor t = matmul(reshape(x, {N * C * H, W}), averaging_matrix(W, size.w, x), false, true);
  t = transpose(reshape(t, {N * C, H, size.w}), 1, 2);  // [NC, OW, H]
  t = transpose(matmul(t, averaging_matrix(H, size.h, x), false, true), 1, 2);
  return reshape(t, {N, C, size.h, size.w});
}

namespace {

// PyTorch's nearest_idx: output index o of `out` -> its input index of `in`
int64_t nearest_source(int64_t o, int64_t in, int64_t out, double scale) {
  if (out == in) return o;
  if (out == 2 * in) return o >> 1;
  const float s = scale > 0 ? static_cast<float>(1.0 / scale)
                            : static_cast<float>(in) / static_cast<float>(out);
  return std::min(static_cast<int64_t>(std::floor(static_cast<float>(o) * s)), in - 1);
}

// src [out] (nondecreasing) and first [in + 1], first[i] the first output
// reading input i or later: outputs first[i] .. first[i + 1] - 1 read input i
void nearest_maps(int64_t in, int64_t out, double scale, std::vector<int32_t>& src,
                  std::vector<int32_t>& first) {
  for (int64_t o = 0; o < out; ++o)
    src.push_back(static_cast<int32_t>(nearest_source(o, in, out, scale)));
  for (int64_t i = 0, o = 0; i <= in; ++i) {
    while (o < out && src[o] < i) ++o;
    first.push_back(static_cast<int32_t>(o));
  }
}

}  // namespace

// x [N, C, H, W] -> [N, C, OH, OW]; the gradient sums each input's copies
Tensor upsample_nearest2d(const Tensor& x, Size2 size, std::array<double, 2> scales) {
  const char* op = "upsample_nearest2d";
  check_size(op, x, size);
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OH = size.h, OW = size.w;
  MINIDL_CHECK(OH < INT32_MAX && OW < INT32_MAX, op, ": output size ", size, " is too large");
  // one int32 table on x's device: rows [OH], cols [OW], row_first [H+1], col_first [W+1]
  std::vector<int32_t> rows, cols, row_first, col_first;
  nearest_maps(H, OH, scales[0], rows, row_first);
  nearest_maps(W, OW, scales[1], cols, col_first);
  std::vector<int32_t> all = rows;
  all.insert(all.end(), cols.begin(), cols.end());
  all.insert(all.end(), row_first.begin(), row_first.end());
  all.insert(all.end(), col_first.begin(), col_first.end());
  Tensor maps = Tensor::from_vector(all).to(x.device());
  const int32_t* m = maps.data_ptr<int32_t>();
  Tensor y = empty_like(x, {N, C, OH, OW});
  kernels(x.device()).upsample_nearest_forward(N * C, H, W, OH, OW, m, m + OH, dense(x).data_ptr<float>(),
                                               y.data_ptr<float>());
  const Shape xs = x.shape();
  return record(y, op, {x}, [xs, maps, OH, OW](const Tensor& g) {
    Tensor gx = empty_like(g, xs);
    const int32_t* m = maps.data_ptr<int32_t>();
    kernels(g.device()).upsample_nearest_backward(xs[0] * xs[1], xs[2], xs[3], OH, OW,
                                                  m + OH + OW, m + OH + OW + xs[2] + 1,
                                                  g.data_ptr<float>(), gx.data_ptr<float>());
    return std::vector<Tensor>{gx};
  });
}

namespace {

// One axis of PyTorch's linear resize in -> out (compute_source_index_and_lambda):
// ints [i0 (out), i1 (out), first (in), last (in)], fractions l1 (out)
void linear_axis(int64_t in, int64_t out, bool align_corners, double scale,
                 std::vector<int32_t>& ints, std::vector<float>& fractions) {
  const float ratio =
      align_corners ? (out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.f)
      : scale > 0   ? static_cast<float>(1.0 / scale)
                    : static_cast<float>(in) / static_cast<float>(out);
  std::vector<int32_t> i0(out), i1(out);
  for (int64_t o = 0; o < out; ++o) {
    double s = static_cast<double>(o);
    if (in == out) {
      fractions.push_back(0.f);
    } else {
      s = align_corners ? ratio * s : std::max(0.0, ratio * (s + 0.5) - 0.5);
      fractions.push_back(static_cast<float>(s - std::floor(s)));
    }
    i0[o] = static_cast<int32_t>(std::min(static_cast<int64_t>(s), in - 1));
    i1[o] = static_cast<int32_t>(i0[o] + (i0[o] < in - 1 && in != out ? 1 : 0));
  }
  ints.insert(ints.end(), i0.begin(), i0.end());
  ints.insert(ints.end(), i1.begin(), i1.end());
  // first[r]: the first output with i1 >= r; last[r]: the first with i0 > r
  for (int64_t r = 0, o = 0; r < in; ++r) {
    while (o < out && i1[o] < r) ++o;
    ints.push_back(static_cast<int32_t>(o));
  }
  for (int64_t r = 0, o = 0; r < in; ++r) {
    while (o < out && i0[o] <= r) ++o;
    ints.push_back(static_cast<int32_t>(o));
  }
}

LinearAxis axis_at(const int32_t* ints, const float* fractions, int64_t in, int64_t out) {
  return {ints, ints + out, ints + 2 * out, ints + 2 * out + in, fractions};
}

}  // namespace

// x [N, C, H, W] -> [N, C, OH, OW]; the gradient is the transpose
Tensor upsample_bilinear2d(const Tensor& x, Size2 size, bool align_corners,
                           std::array<double, 2> scales) {
  const char* op = "upsample_bilinear2d";
  check_size(op, x, size);
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OH = size.h, OW = size.w;
  MINIDL_CHECK(OH < INT32_MAX && OW < INT32_MAX, op, ": output size ", size, " is too large");
  // on x's device: ints [rows' 2 OH + 2 H, cols' 2 OW + 2 W], fractions [OH + OW]
  std::vector<int32_t> ints;
  std::vector<float> fractions;
  linear_axis(H, OH, align_corners, scales[0], ints, fractions);
  linear_axis(W, OW, align_corners, scales[1], ints, fractions);
  const Tensor maps = Tensor::from_vector(ints).to(x.device());
  const Tensor weights = Tensor::from_vector(fractions).to(x.device());
  auto axes = [=] {  // (rows, cols) pointing into maps and weights
    const int32_t* m = maps.data_ptr<int32_t>();
    const float* f = weights.data_ptr<float>();
    return std::pair{axis_at(m, f, H, OH), axis_at(m + 2 * (OH + H), f + OH, W, OW)};
  };
  Tensor y = empty_like(x, {N, C, OH, OW});
  const auto [rows, cols] = axes();
  kernels(x.device())
      .upsample_bilinear_forward(N * C, H, W, OH, OW, rows, cols, dense(x).data_ptr<float>(),
                                 y.data_ptr<float>());
  const Shape xs = x.shape();
  return record(y, op, {x}, [xs, axes, OH, OW](const Tensor& g) {
    Tensor gx = empty_like(g, xs);
    const auto [rows, cols] = axes();
    kernels(g.device())
        .upsample_bilinear_backward(xs[0] * xs[1], xs[2], xs[3], OH, OW, rows, cols,
                                    g.data_ptr<float>(), gx.data_ptr<float>());
    return std::vector<Tensor>{gx};
  });
}

// x [N, C, H, W] -> [N, C, OH, OW] by size or scale_factor, nearest or bilinear
Tensor interpolate(const Tensor& x, const InterpolateArgs& a) {
  const char* op = "interpolate";
  const bool bilinear = a.mode == "bilinear";
  MINIDL_CHECK(a.mode == "nearest" || bilinear, op, ": mode '", a.mode,
               "' is not supported (expected \"nearest\" or \"bilinear\")");
  MINIDL_CHECK(bilinear || !a.align_corners.has_value(), op,
               ": align_corners can only be set with mode \"bilinear\", got mode '", a.mode, "'");
  MINIDL_CHECK(a.size.has_value() != a.scale_factor.has_value(), op,
               ": expected exactly one of size and scale_factor");
  require_dim(op, x, 4);
  const bool corners = a.align_corners.value_or(false);
  if (a.size)
    return bilinear ? upsample_bilinear2d(x, *a.size, corners) : upsample_nearest2d(x, *a.size);
  const auto [sh, sw] = *a.scale_factor;
  MINIDL_CHECK(sh > 0 && sw > 0 && std::isfinite(sh) && std::isfinite(sw), op,
               ": expected a positive scale_factor, got (", sh, ", ", sw, ")");
  const Size2 size{static_cast<int64_t>(std::floor(static_cast<double>(x.size(2)) * sh)),
                   static_cast<int64_t>(std::floor(static_cast<double>(x.size(3)) * sw))};
  return bilinear ? upsample_bilinear2d(x, size, corners, {sh, sw})
                  : upsample_nearest2d(x, size, {sh, sw});
}

}  // namespace minidl
