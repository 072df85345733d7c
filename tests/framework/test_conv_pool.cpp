// conv2d against a naive direct convolution (stride 1 and 2, padding 0 and 1,
// with and without bias), max_pool2d and avg_pool2d by hand, gradient checks
// for all three, and the fused conv2d_relu_max_pool2d against the three ops.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "framework/backend/cpu/cpu.h"
#include "helpers.h"
#include "torch_reference.h"

using namespace minidl;
using minidl::testing::check_same;
using minidl::testing::check_values;
using minidl::testing::distinct;
using Inputs = std::vector<Tensor>;

namespace {

// conv2d with per-dim stride, padding, dilation and groups, one output at a
// time in double: y[n, o, i, j] = b[o] + sum over c of o's group, ki, kj of
// x[n, c, i*sh - ph + ki*dh, j*sw - pw + kj*dw] w[o, c - group start, ki, kj]
Tensor naive_conv2d_general(const Tensor& x, const Tensor& w, const Tensor& b, Conv2dArgs a) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), G = a.groups;
  const int64_t OC = w.size(0), Cg = C / G, OCg = OC / G, KH = w.size(2), KW = w.size(3);
  const int64_t OH = (H + 2 * a.padding.h - a.dilation.h * (KH - 1) - 1) / a.stride.h + 1;
  const int64_t OW = (W + 2 * a.padding.w - a.dilation.w * (KW - 1) - 1) / a.stride.w + 1;
  Tensor y = Tensor::zeros({N, OC, OH, OW});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < OC; ++o)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          double s = b.defined() ? b.at({o}) : 0.0;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t ki = 0; ki < KH; ++ki)
              for (int64_t kj = 0; kj < KW; ++kj) {
                const int64_t h = i * a.stride.h - a.padding.h + ki * a.dilation.h;
                const int64_t v = j * a.stride.w - a.padding.w + kj * a.dilation.w;
                if (h >= 0 && h < H && v >= 0 && v < W)
                  s += x.at({n, o / OCg * Cg + c, h, v}) * w.at({o, c, ki, kj});
              }
          y.set({n, o, i, j}, s);
        }
  return y;
}

// x [N, C, H, W], w [OC, C, KH, KW], b [OC] or undefined -> y [N, OC, OH, OW]
// with square stride and padding
Tensor naive_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride,
                    int64_t pad) {
  return naive_conv2d_general(x, w, b, {.stride = stride, .padding = pad});
}

}  // namespace

TEST_CASE("conv2d of a 3x3 ramp with small kernels (hand-computed)") {
  Tensor x = Tensor::arange(9).reshape({1, 1, 3, 3});  // [[0,1,2],[3,4,5],[6,7,8]]
  Tensor ones = Tensor::ones({1, 1, 2, 2});
  Tensor y = conv2d(x, ones, Tensor());
  CHECK(y.shape() == Shape{1, 1, 2, 2});
  check_values(y, {8, 12, 20, 24});
  check_values(conv2d(x, ones, Tensor::of({1})), {9, 13, 21, 25});
  // x[i, j] - x[i+1, j+1] = -4 everywhere.
  check_values(conv2d(x, Tensor::of({1, 0, 0, -1}, {1, 1, 2, 2}), Tensor()), {-4, -4, -4, -4});
  // Stride 2 and padding 1: the windows see [0], [1, 2], [3, 6], [4, 5, 7, 8].
  Tensor p = conv2d(x, ones, Tensor(), {.stride = 2, .padding = 1});
  CHECK(p.shape() == Shape{1, 1, 2, 2});
  check_values(p, {0, 3, 9, 24});
  // Padding 1 with stride 1 keeps 3x3 for a 3x3 kernel; the centre sums all of x.
  Tensor same = conv2d(x, Tensor::ones({1, 1, 3, 3}), Tensor(), {.padding = 1});
  CHECK(same.shape() == Shape{1, 1, 3, 3});
  check_values(same, {8, 15, 12, 21, 36, 27, 20, 33, 24});
}

TEST_CASE("conv2d matches a naive direct convolution") {
  manual_seed(61);
  Tensor x = Tensor::randn({2, 3, 6, 5});
  Tensor w = Tensor::randn({4, 3, 3, 2});  // non-square kernel
  Tensor b = Tensor::randn({4});
  for (int64_t stride : {1, 2}) {
    for (int64_t pad : {0, 1}) {
      for (bool bias : {false, true}) {
        CAPTURE(stride);
        CAPTURE(pad);
        CAPTURE(bias);
        Tensor bb = bias ? b : Tensor();
        Tensor got = conv2d(x, w, bb, {.stride = stride, .padding = pad});
        Tensor want = naive_conv2d(x, w, bb, stride, pad);
        check_same(got, want, 1e-5);
      }
    }
  }
  // A 1x1 convolution is a per-pixel matmul over channels.
  Tensor w1 = Tensor::randn({2, 3, 1, 1});
  check_same(conv2d(x, w1, Tensor()), naive_conv2d(x, w1, Tensor(), 1, 0), 1e-5);
}

TEST_CASE("gradients of conv2d: stride 1 and 2, padding 0 and 1, with and without bias") {
  manual_seed(62);
  Tensor x = Tensor::randn({2, 2, 4, 4});
  Tensor w = Tensor::randn({2, 2, 3, 3});
  Tensor b = Tensor::randn({2});
  for (int64_t stride : {1, 2}) {
    for (int64_t pad : {0, 1}) {
      CAPTURE(stride);
      CAPTURE(pad);
      Conv2dArgs args{.stride = stride, .padding = pad};
      CHECK_GRADCHECK([args](const Inputs& in) { return conv2d(in[0], in[1], in[2], args); },
                      {x, w, b});
      CHECK_GRADCHECK([args](const Inputs& in) { return conv2d(in[0], in[1], Tensor(), args); },
                      {x, w});
    }
  }
}

TEST_CASE("max_pool2d and avg_pool2d (hand-computed)") {
  Tensor x = Tensor::arange(16).reshape({1, 1, 4, 4});
  Tensor m = max_pool2d(x, 2);
  CHECK(m.shape() == Shape{1, 1, 2, 2});
  check_values(m, {5, 7, 13, 15});
  check_values(avg_pool2d(x, 2), {2.5, 4.5, 10.5, 12.5});
  check_values(max_pool2d(x, 4), {15});
  check_values(avg_pool2d(x, 4), {7.5});
  // Kernel 3, stride 1: four overlapping windows.
  check_values(max_pool2d(x, 3, 1), {10, 11, 14, 15});
  check_values(avg_pool2d(x, 3, 1), {5, 6, 9, 10});

  Tensor r = Tensor::arange(9).reshape({1, 1, 3, 3});
  check_values(max_pool2d(r, 2, 1), {4, 5, 7, 8});
  check_values(avg_pool2d(r, 2, 1), {2, 3, 5, 6});
  // Stride 2 and padding 1: windows [0], [1, 2], [3, 6], [4, 5, 7, 8]; padding counts in the mean.
  check_values(max_pool2d(r, 2, 2, 1), {0, 2, 6, 8});
  check_values(avg_pool2d(r, 2, 2, 1), {0, 0.75, 2.25, 6});
  // Odd sizes drop the incomplete last window.
  CHECK(max_pool2d(Tensor::zeros({1, 1, 5, 5}), 2).shape() == Shape{1, 1, 2, 2});

  // Negative values: max is not fooled by the zero padding.
  Tensor neg = Tensor::of({-1, -2, -3, -4}, {1, 1, 2, 2});
  check_values(max_pool2d(neg, 2, 2, 1), {-1, -2, -3, -4});

  // Batches and channels pool independently.
  Tensor bc = Tensor::of({1, 2, 3, 4, -1, -2, -3, -4, 10, 0, 0, 0}, {3, 1, 2, 2});
  check_values(max_pool2d(bc, 2), {4, -1, 10});
  check_values(avg_pool2d(bc, 2), {2.5, -2.5, 2.5});
  CHECK(avg_pool2d(bc.reshape({1, 3, 2, 2}), 2).shape() == Shape{1, 3, 1, 1});
}

TEST_CASE("pooling gradients go to the argmax / spread over the window (hand-computed)") {
  Tensor x = Tensor::arange(9).reshape({1, 1, 3, 3}).requires_grad_();
  max_pool2d(x, 2, 1).sum().backward();  // maxima at 4, 5, 7, 8
  check_values(x.grad(), {0, 0, 0, 0, 1, 1, 0, 1, 1});

  Tensor c = Tensor::of({0, 0, 0, 0, 9, 0, 0, 0, 0}, {1, 1, 3, 3}).requires_grad_();
  max_pool2d(c, 2, 1).sum().backward();  // every window picks the centre
  check_values(c.grad(), {0, 0, 0, 0, 4, 0, 0, 0, 0});

  Tensor a = Tensor::zeros({1, 1, 3, 3}).requires_grad_();
  avg_pool2d(a, 2, 1).sum().backward();  // cells covered by 1, 2 or 4 windows, / 4
  check_values(a.grad(), {0.25, 0.5, 0.25, 0.5, 1, 0.5, 0.25, 0.5, 0.25});
}

TEST_CASE("max_pool2d picks the first of tied cells and propagates NaN") {
  // All-equal windows: one cell (the first) gets the gradient, on the 2x2
  // stride-2 path and on the general path.
  Tensor z = Tensor::zeros({1, 1, 2, 2}).requires_grad_();
  max_pool2d(z, 2).sum().backward();
  check_values(z.grad(), {1, 0, 0, 0});
  Tensor z3 = Tensor::full({1, 1, 3, 3}, 1.0).requires_grad_();
  max_pool2d(z3, 3, 1).sum().backward();
  check_values(z3.grad(), {1, 0, 0, 0, 0, 0, 0, 0, 0});
  // Ties for second place do not matter: the maximum is unique.
  Tensor t = Tensor::of({1, 1, 1, 4}, {1, 1, 2, 2}).requires_grad_();
  max_pool2d(t, 2).sum().backward();
  check_values(t.grad(), {0, 0, 0, 1});

  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor n = Tensor::of({1, nan, 2, 3}, {1, 1, 2, 2});
  CHECK(std::isnan(max_pool2d(n, 2).item()));
  CHECK(std::isnan(max_pool2d(n, 2, 1).item()));
  CHECK(std::isnan(max_pool2d(Tensor::of({nan, 1, 2, 3}, {1, 1, 2, 2}), 2, 2, 1).at({0, 0, 0, 0})));
}

TEST_CASE("conv2d gradient when only the weight or only the input requires grad") {
  manual_seed(64);
  Tensor x = Tensor::randn({2, 2, 4, 4}), w = Tensor::randn({3, 2, 3, 3});
  CHECK_GRADCHECK([x](const Inputs& in) { return conv2d(x, in[0], in[1], {.padding = 1}); },
                  {w, Tensor::randn({3})});
  CHECK_GRADCHECK([w](const Inputs& in) { return conv2d(in[0], w, Tensor(), {.stride = 2}); },
                  {x});
  // The hand case: d sum(conv(x, w)) / dw[0, 0, i, j] sums the x cells under tap (i, j).
  Tensor r = Tensor::arange(9).reshape({1, 1, 3, 3});
  Tensor k = Tensor::zeros({1, 1, 2, 2}).requires_grad_();
  conv2d(r, k, Tensor()).sum().backward();
  check_values(k.grad(), {0 + 1 + 3 + 4, 1 + 2 + 4 + 5, 3 + 4 + 6 + 7, 4 + 5 + 7 + 8});
}

TEST_CASE("gradients of max_pool2d and avg_pool2d") {
  manual_seed(63);
  Tensor d = distinct({2, 2, 4, 4}, 1.5);  // distinct values: no ties in reach
  Tensor x = Tensor::randn({1, 2, 5, 5});
  CHECK_GRADCHECK([](const Inputs& in) { return max_pool2d(in[0], 2); }, {d});
  CHECK_GRADCHECK([](const Inputs& in) { return max_pool2d(in[0], 3, 1); }, {d});
  CHECK_GRADCHECK([](const Inputs& in) { return max_pool2d(in[0], 2, 2, 1); }, {d});
  CHECK_GRADCHECK([](const Inputs& in) { return avg_pool2d(in[0], 2); }, {x});
  CHECK_GRADCHECK([](const Inputs& in) { return avg_pool2d(in[0], 3, 2); }, {x});
  CHECK_GRADCHECK([](const Inputs& in) { return avg_pool2d(in[0], 2, 1, 1); }, {x});
}

// The CPU's rows of window terms against one window at a time: the value of
// the first maximal cell in row-major order (std::max over the window), its
// index, and a window with a NaN giving NaN at its first NaN. Values in
// {-1, -0, 0, 1} tie often; pairs of NaNs side by side; rows of 19 leave vector remainders.
TEST_CASE("max_pool2d equals the first maximum of each window, bit for bit") {
  manual_seed(13);
  const int64_t N = 2, C = 3, H = 9, W = 19;
  std::vector<float> v = Tensor::rand({N, C, H, W}).to_float_vector();
  const std::array<float, 4> values = {-1.f, -0.f, 0.f, 1.f};
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = i % 97 == 5 || i % 97 == 6 ? std::nanf("") : values[int(v[i] * 4) % 4];
  const std::array<int64_t, 3> geometries[] = {
      {3, 2, 1}, {3, 1, 1}, {2, 1, 0}, {4, 3, 2}, {3, 3, 0}};
  for (const auto& kernel_stride_pad : geometries) {
    const int64_t K = kernel_stride_pad[0], S = kernel_stride_pad[1], P = kernel_stride_pad[2];
    CAPTURE(K);
    CAPTURE(S);
    CAPTURE(P);
    Tensor x = Tensor::from_vector(v, {N, C, H, W}).requires_grad_();
    Tensor y = max_pool2d(x, K, S, P);
    const int64_t OH = y.size(2), OW = y.size(3);
    y.backward(Tensor::ones({N, C, OH, OW}));  // each window's 1 lands on its cell
    const auto yv = y.to_float_vector(), gx = x.grad().to_float_vector();
    std::vector<float> want_gx(v.size(), 0.f);
    int wrong = 0;
    for (int64_t p = 0; p < N * C; ++p)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t hlo = std::max<int64_t>(oh * S - P, 0), hhi = std::min(oh * S - P + K, H);
          const int64_t wlo = std::max<int64_t>(ow * S - P, 0), whi = std::min(ow * S - P + K, W);
          float best = v[(p * H + hlo) * W + wlo];
          int64_t at = -1, nan_at = -1;
          for (int64_t h = hlo; h < hhi; ++h)
            for (int64_t w = wlo; w < whi; ++w) {
              const int64_t i = (p * H + h) * W + w;
              best = std::max(best, v[i]);
              if (v[i] != v[i] && nan_at < 0) nan_at = i;
            }
          for (int64_t h = hlo; h < hhi && at < 0; ++h)
            for (int64_t w = wlo; w < whi && at < 0; ++w)
              if (v[(p * H + h) * W + w] == best) at = (p * H + h) * W + w;
          if (nan_at >= 0) best = std::numeric_limits<float>::quiet_NaN(), at = nan_at;
          const float got = yv[(p * OH + oh) * OW + ow];
          wrong += std::memcmp(&got, &best, sizeof(float)) != 0;
          want_gx[at] += 1.f;
        }
    CHECK(wrong == 0);
    CHECK(std::memcmp(gx.data(), want_gx.data(), gx.size() * sizeof(float)) == 0);
  }
}

// The CPU's rows of terms against one sum per window in (i, j) order
// (padding skipped, as it adds 0), and the gradient against one sum per
// input in (oh, ow) order, bit for bit; rows of 19 leave vector remainders.
TEST_CASE("avg_pool2d and its gradient equal the window sums in order, bit for bit") {
  manual_seed(9);
  const int64_t N = 2, C = 3, H = 7, W = 19;
  const std::array<int64_t, 3> geometries[] = {{3, 1, 1}, {2, 2, 0}, {3, 2, 1}, {4, 3, 2}, {2, 1, 0}};
  for (const auto& kernel_stride_pad : geometries) {
    const int64_t K = kernel_stride_pad[0], S = kernel_stride_pad[1], P = kernel_stride_pad[2];
    CAPTURE(K);
    CAPTURE(S);
    CAPTURE(P);
    Tensor x = Tensor::randn({N, C, H, W}).requires_grad_();
    Tensor y = avg_pool2d(x, K, S, P);
    const int64_t OH = y.size(2), OW = y.size(3);
    Tensor g = Tensor::randn({N, C, OH, OW});
    y.backward(g);
    const auto xv = x.to_float_vector(), yv = y.to_float_vector(), gv = g.to_float_vector();
    const auto gx = x.grad().to_float_vector();
    std::vector<float> sums(xv.size(), 0.f);
    const float inv = 1.0f / static_cast<float>(K * K);
    int wrong = 0, wrong_grad = 0;
    for (int64_t p = 0; p < N * C; ++p)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          float s = 0.f;
          for (int64_t h = oh * S - P; h < oh * S - P + K; ++h)
            for (int64_t w = ow * S - P; w < ow * S - P + K; ++w)
              if (h >= 0 && h < H && w >= 0 && w < W) {
                s += xv[(p * H + h) * W + w];
                sums[(p * H + h) * W + w] += gv[(p * OH + oh) * OW + ow] * inv;
              }
          wrong += yv[(p * OH + oh) * OW + ow] != s * inv;
        }
    for (size_t i = 0; i < gx.size(); ++i) wrong_grad += gx[i] != sums[i];
    CHECK(wrong == 0);
    CHECK(wrong_grad == 0);
  }
}

namespace {

// Geometry of one conv2d test case: x [N, C, H, W], w [OC, C, KH, KW].
struct ConvShape {
  int64_t N, C, H, W, OC, KH, KW, stride, pad;
};

// The adjoints of naive_conv2d for y's gradient gy, summed in double:
// gx [N, C, H, W], gw [OC, C, KH, KW], gb [OC].
std::vector<Tensor> naive_conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& gy,
                                          int64_t stride, int64_t pad) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OC = w.size(0), KH = w.size(2), KW = w.size(3), OH = gy.size(2), OW = gy.size(3);
  const auto xv = x.to_vector<float>(), wv = w.to_vector<float>(), gv = gy.to_vector<float>();
  std::vector<double> gx(xv.size()), gw(wv.size()), gb(OC);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < OC; ++o)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          const double g = gv[((n * OC + o) * OH + i) * OW + j];
          gb[o] += g;
          for (int64_t c = 0; c < C; ++c)
            for (int64_t ki = 0; ki < KH; ++ki)
              for (int64_t kj = 0; kj < KW; ++kj) {
                const int64_t h = i * stride - pad + ki, v = j * stride - pad + kj;
                if (h < 0 || h >= H || v < 0 || v >= W) continue;
                const int64_t xi = ((n * C + c) * H + h) * W + v;
                const int64_t wi = ((o * C + c) * KH + ki) * KW + kj;
                gx[xi] += g * wv[wi];
                gw[wi] += g * xv[xi];
              }
        }
  auto tensor = [](const std::vector<double>& d, const Shape& s) {
    return Tensor::from_vector(std::vector<float>(d.begin(), d.end()), s);
  };
  return {tensor(gx, x.shape()), tensor(gw, w.shape()), tensor(gb, {OC})};
}

}  // namespace

// Batches of 16 and more (stride 1, padding below the kernel) take the direct
// kernel with 16 samples in the vector lanes (backend/cpu/conv_lanes.cpp).
// These shapes reach its branches: a partly empty last lane block (N 30),
// channel tiles of 1 to 4 with remainders (OC 1, 5, 6, 7, 16), row tiles of
// 1 to 8 with remainders (OW 1 to 28), kernel-column tiles with remainders
// (KW 8 > 7), input rows wider than 16 (W 28, 33), padding 0 to KW-1,
// non-square kernels and the tiles specialised for widths 3 and 5; the stride-2 and padding >= kernel cases take im2col.
TEST_CASE("conv2d forward and all gradients at batch sizes of the lanes kernel") {
  manual_seed(65);
  const std::vector<ConvShape> shapes = {
      {16, 1, 28, 28, 6, 5, 5, 1, 2},   // LeNet conv1
      {64, 6, 14, 14, 16, 5, 5, 1, 0},  // LeNet conv2
      {30, 3, 7, 9, 5, 3, 2, 1, 1},     // last block 14/16 full, non-square kernel
      {17, 2, 5, 33, 7, 2, 8, 1, 3},    // KW 8: two column tiles; W 33: three 16-wide chunks
      {16, 4, 6, 6, 1, 6, 6, 1, 5},     // OC 1, pad KH-1: the gradient padded by 0
      {16, 2, 3, 3, 9, 1, 1, 1, 0},     // 1x1 kernel: one GEMM per sample instead
      {32, 3, 8, 11, 4, 3, 3, 1, 1},    // 3x3: the tiles with the width fixed
      {16, 2, 6, 5, 3, 3, 3, 2, 1},     // stride 2: im2col
      {16, 1, 4, 4, 2, 2, 2, 1, 2},     // padding >= kernel: im2col
  };
  for (const auto& s : shapes) {
    CAPTURE(s.N);
    CAPTURE(s.C);
    CAPTURE(s.W);
    CAPTURE(s.OC);
    CAPTURE(s.KW);
    CAPTURE(s.pad);
    Tensor x = Tensor::randn({s.N, s.C, s.H, s.W}).requires_grad_();
    Tensor w = Tensor::randn({s.OC, s.C, s.KH, s.KW}).requires_grad_();
    Tensor b = Tensor::randn({s.OC}).requires_grad_();
    const Conv2dArgs args{.stride = s.stride, .padding = s.pad};
    Tensor y = conv2d(x, w, b, args);
    check_same(y, naive_conv2d(x.detach(), w.detach(), b.detach(), s.stride, s.pad), 1e-5);
    check_same(conv2d(x.detach(), w.detach(), Tensor(), args),
               naive_conv2d(x.detach(), w.detach(), Tensor(), s.stride, s.pad), 1e-5);
    Tensor gy = Tensor::randn(y.shape());
    y.backward(gy);
    auto want = naive_conv2d_backward(x.detach(), w.detach(), gy, s.stride, s.pad);
    check_same(x.grad(), want[0], 1e-4);
    check_same(w.grad(), want[1], 1e-4);
    check_same(b.grad(), want[2], 1e-4);
    // Only the weight wanted (LeNet's conv1: the input needs no gradient).
    Tensor w2 = w.detach().requires_grad_();
    conv2d(x.detach(), w2, Tensor(), args).backward(gy);
    check_same(w2.grad(), want[1], 1e-4);
    // Only the input wanted.
    Tensor x2 = x.detach().requires_grad_();
    conv2d(x2, w.detach(), b.detach(), args).backward(gy);
    check_same(x2.grad(), want[0], 1e-4);
  }
}

TEST_CASE("gradients of conv2d on the lanes kernel (finite differences)") {
  manual_seed(66);
  Tensor x = Tensor::randn({16, 2, 4, 5}), w = Tensor::randn({3, 2, 3, 2});
  Tensor b = Tensor::randn({3});
  for (int64_t pad : {0, 1}) {
    CAPTURE(pad);
    Conv2dArgs args{.padding = pad};
    CHECK_GRADCHECK([args](const Inputs& in) { return conv2d(in[0], in[1], in[2], args); },
                    {x, w, b});
  }
}

// 48 samples are 3 lane blocks: 1 thread takes whole blocks through all
// stages, 2 threads split each stage (blocks of 64 and 16 samples on 2
// threads, as ctest runs, reach the other two ways in the case above).
// Whether this build and CPU run the lanes kernel: it is compiled for AVX-512
// only (GCC's portable build takes it where the CPU has AVX-512; a clang build
// without -march=native, like the sanitizer build, never does). A LeNet conv1.
static bool lanes_kernel_runs() {
  return cpu::lanes_conv_fits(
      {64, 1, 28, 28, 6, 5, 5, /*stride*/ 1, 1, /*pad*/ 2, 2, /*dilation*/ 1, 1, /*groups*/ 1, 28, 28});
}

TEST_CASE("conv2d on the lanes kernel gives the same bits on 1 and 2 threads") {
  if (!lanes_kernel_runs()) {
    MESSAGE("skipped: no lanes kernel in this build or on this CPU (im2col + GEMM serves conv2d)");
    return;
  }
  manual_seed(67);
  Tensor x = Tensor::randn({48, 3, 9, 9}).requires_grad_();
  Tensor w = Tensor::randn({5, 3, 3, 3}).requires_grad_(), b = Tensor::randn({5}).requires_grad_();
  std::vector<std::vector<float>> runs[2];
  const int before = num_threads();
  for (int t : {1, 2}) {
    set_num_threads(t);
    for (Tensor* p : {&x, &w, &b}) p->zero_grad();
    Tensor y = conv2d(x, w, b, {.padding = 1});
    (y * y).sum().backward();
    runs[t - 1] = {y.to_vector<float>(), x.grad().to_vector<float>(), w.grad().to_vector<float>(),
                   b.grad().to_vector<float>()};
  }
  set_num_threads(before);
  for (int i = 0; i < 4; ++i) CHECK(runs[0][i] == runs[1][i]);
}

// LeNet's 2x2 stride-2 max pool takes 16 windows per vector step, forward and
// backward: rows of 18 and 7 windows reach the full and the masked step, and
// 7 x 37 planes leave a last row and column outside every window (their
// gradient is 0). Values from a small set make ties (the first cell in
// reading order wins), -0 and +0 tie too, and a NaN makes its window's output NaN.
TEST_CASE("max_pool2d 2x2 stride 2 on wide rows: first maximum, ties, signed zeros, NaN") {
  manual_seed(68);
  for (int64_t W : {37, 14}) {
    CAPTURE(W);
    const int64_t H = W == 37 ? 7 : 6, OH = H / 2, OW = W / 2;
    std::vector<float> v = (Tensor::randint(-3, 3, {2, 3, H, W}).to(kFloat32) * 0.5f).to_vector<float>();
    v[5] = -0.f;
    v[4] = 0.f;  // a window holding -0 and +0 (and lower values below it)
    v[W + 4] = v[W + 5] = -1.f;
    v[7 * H * W / 2 + 3] = std::numeric_limits<float>::quiet_NaN();  // in plane 3
    Tensor x = Tensor::from_vector(v, {2, 3, H, W}).requires_grad_();
    Tensor y = max_pool2d(x, 2);
    REQUIRE(y.shape() == Shape{2, 3, OH, OW});
    y.sum().backward();
    const auto yv = y.to_vector<float>(), gv = x.grad().to_vector<float>();
    const int64_t nan_plane = (7 * H * W / 2 + 3) / (H * W);
    for (int64_t i = 0; i < static_cast<int64_t>(gv.size()); ++i)  // outside every window
      if (i % W >= 2 * OW || i % (H * W) >= 2 * OH * W) CHECK(gv[i] == 0.f);
    for (int64_t p = 0; p < 6; ++p)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          CAPTURE(p);
          CAPTURE(i);
          CAPTURE(j);
          const int64_t cells[4] = {p * H * W + 2 * i * W + 2 * j, p * H * W + 2 * i * W + 2 * j + 1,
                                    p * H * W + (2 * i + 1) * W + 2 * j,
                                    p * H * W + (2 * i + 1) * W + 2 * j + 1};
          const float got = yv[(p * OH + i) * OW + j];
          bool nan = false;
          for (int64_t c : cells) nan |= std::isnan(v[c]);
          if (nan) {
            CHECK(std::isnan(got));
            continue;
          }
          int64_t best = cells[0];
          for (int64_t c : cells)
            if (v[c] > v[best]) best = c;
          CHECK(got == v[best]);
          CHECK(std::signbit(got) == std::signbit(v[best]));
          if (p != nan_plane)
            for (int64_t c : cells) CHECK(gv[c] == (c == best ? 1.f : 0.f));
        }
  }
}

namespace {

// The names of the autograd nodes one backward from y runs (the node observer).
std::vector<std::string> backward_nodes(const Tensor& y, const Tensor& gy) {
  std::vector<std::string> names;
  set_node_observer([&](const char* name, bool begin) {
    if (begin) names.push_back(name);
  });
  y.backward(gy);
  set_node_observer(nullptr);
  return names;
}

// Whether a and b hold the same bits (NaNs included).
bool same_bits(const Tensor& a, const Tensor& b) {
  const auto u = a.to_vector<float>(), v = b.to_vector<float>();
  return a.shape() == b.shape() && std::memcmp(u.data(), v.data(), u.size() * sizeof(float)) == 0;
}

}  // namespace

// The fused op against the three ops it replaces, bit for bit: forward, and
// the input, weight and bias gradients. Integer inputs and weights make
// integer convolution outputs, so pooling windows hold ties and relu meets
// zeros and negatives everywhere; a NaN in x makes NaN windows (whose
// gradient goes to the last cell, through relu only where that cell is > 0).
// N 30 leaves a lane block partly empty; 7 x 9 outputs leave a row and a
// column outside every window. The last two shapes are not fused (batch
// below 16, pool 3) and run the three ops.
TEST_CASE("conv2d_relu_max_pool2d gives the bits of max_pool2d(relu(conv2d)) and its gradients") {
  manual_seed(69);
  struct Case {
    ConvShape s;
    int64_t pool;
    bool fused;
  };
  const std::vector<Case> cases = {
      {{64, 1, 28, 28, 6, 5, 5, 1, 2}, 2, true},   // LeNet conv1
      {{64, 6, 14, 14, 16, 5, 5, 1, 0}, 2, true},  // LeNet conv2
      {{30, 3, 7, 9, 5, 3, 3, 1, 1}, 2, true},     // odd output, last block 14/16 full
      {{16, 2, 6, 5, 7, 2, 3, 1, 0}, 2, true},     // 5 x 3 output, OC 7
      {{8, 2, 8, 8, 3, 3, 3, 1, 1}, 2, false},     // batch 8: the lanes kernel does not fit
      {{16, 2, 9, 9, 3, 3, 3, 1, 1}, 3, false},    // pool 3
  };
  for (const auto& c : cases)  // no structured binding: clang 14's CAPTURE cannot take one
    for (bool bias : {true, false})
      for (bool nan : {false, true}) {
        const auto& s = c.s;
        const int64_t pool = c.pool;
        const bool fused = c.fused;
        CAPTURE(s.N);
        CAPTURE(s.OC);
        CAPTURE(pool);
        CAPTURE(bias);
        CAPTURE(nan);
        auto ints = [](const Shape& shape, int lo, int hi) {
          return Tensor::randint(lo, hi, shape).to(kFloat32);
        };
        Tensor xv = ints({s.N, s.C, s.H, s.W}, -2, 3);
        if (nan) xv.data<float>()[s.W + 3] = std::numeric_limits<float>::quiet_NaN();
        Tensor wv = ints({s.OC, s.C, s.KH, s.KW}, -1, 2), bv = ints({s.OC}, -2, 3);
        const Conv2dArgs args{.stride = s.stride, .padding = s.pad};
        const Shape out{s.N, s.OC, (s.H + 2 * s.pad - s.KH + 1) / pool,
                        (s.W + 2 * s.pad - s.KW + 1) / pool};
        // a gradient with negative values, zeros and -0
        Tensor gy = ints(out, -2, 3) * 0.5f;
        gy.data<float>()[1] = -0.f;
        Tensor grads[2][3], outs[2];
        std::vector<std::string> nodes;
        for (int f = 0; f < 2; ++f) {
          Tensor x = xv.clone().requires_grad_(), w = wv.clone().requires_grad_();
          Tensor b = bias ? bv.clone().requires_grad_() : Tensor();
          Tensor y = f ? conv2d_relu_max_pool2d(x, w, b, args, pool)
                       : max_pool2d(relu(conv2d(x, w, b, args)), pool);
          if (f) nodes = backward_nodes(y, gy);
          else y.backward(gy);
          outs[f] = y.detach();
          grads[f][0] = x.grad();
          grads[f][1] = w.grad();
          if (bias) grads[f][2] = b.grad();
        }
        CHECK((std::find(nodes.begin(), nodes.end(), "conv2d_relu_max_pool2d") != nodes.end()) ==
              (fused && lanes_kernel_runs()));
        REQUIRE(outs[1].shape() == out);
        CHECK(same_bits(outs[1], outs[0]));
        for (int i = 0; i < (bias ? 3 : 2); ++i) CHECK(same_bits(grads[1][i], grads[0][i]));
      }
}

// Only the weight wanted (LeNet's conv1), and only the input: the same bits.
TEST_CASE("conv2d_relu_max_pool2d with only the weight or only the input requiring grad") {
  manual_seed(70);
  Tensor x = Tensor::randn({32, 2, 8, 8}), w = Tensor::randn({4, 2, 3, 3}), b = Tensor::randn({4});
  Tensor gy = Tensor::randn({32, 4, 3, 3});
  for (int wanted = 0; wanted < 2; ++wanted) {
    CAPTURE(wanted);
    Tensor leaf[2];
    for (int f = 0; f < 2; ++f) {
      Tensor xi = wanted == 0 ? x.clone().requires_grad_() : x;
      Tensor wi = wanted == 1 ? w.clone().requires_grad_() : w;
      Tensor y = f ? conv2d_relu_max_pool2d(xi, wi, b, {}, 2) : max_pool2d(relu(conv2d(xi, wi, b)), 2);
      y.backward(gy);
      leaf[f] = wanted == 0 ? xi.grad() : wi.grad();
    }
    CHECK(same_bits(leaf[1], leaf[0]));
  }
}

TEST_CASE("gradients of conv2d_relu_max_pool2d (finite differences)") {
  manual_seed(71);
  // A 1x1 kernel of weight 1 keeps the distinct inputs' order in every window
  // (a positive scale keeps it at any step) and them 0.04 at least from relu's
  // kink, past the step.
  Tensor x = distinct({16, 1, 4, 6}, 1.55), w = Tensor::of({1.f}, {1, 1, 1, 1});
  Tensor b = Tensor::of({0.01f});
  CHECK_GRADCHECK([](const Inputs& in) { return conv2d_relu_max_pool2d(in[0], in[1], in[2], {}, 2); },
                  {x, w, b});
}

// ---- convolution family and resizing (issue 22) ----
namespace {

// conv_transpose2d by scattering: each x[n, c, i, j] w[c, o, ki, kj] adds to
// y[n, group(c) OCg + o, i*sh - ph + ki*dh, j*sw - pw + kj*dw] when inside
Tensor naive_conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& b,
                              ConvTranspose2dArgs a) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), G = a.groups;
  const int64_t OCg = w.size(1), OC = OCg * G, Cg = C / G, KH = w.size(2), KW = w.size(3);
  const int64_t OH = (H - 1) * a.stride.h - 2 * a.padding.h + a.dilation.h * (KH - 1) +
                     a.output_padding.h + 1;
  const int64_t OW = (W - 1) * a.stride.w - 2 * a.padding.w + a.dilation.w * (KW - 1) +
                     a.output_padding.w + 1;
  std::vector<double> y(N * OC * OH * OW, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < W; ++j)
          for (int64_t o = 0; o < OCg; ++o)
            for (int64_t ki = 0; ki < KH; ++ki)
              for (int64_t kj = 0; kj < KW; ++kj) {
                const int64_t h = i * a.stride.h - a.padding.h + ki * a.dilation.h;
                const int64_t v = j * a.stride.w - a.padding.w + kj * a.dilation.w;
                if (h < 0 || h >= OH || v < 0 || v >= OW) continue;
                y[((n * OC + c / Cg * OCg + o) * OH + h) * OW + v] +=
                    double(x.at({n, c, i, j})) * w.at({c, o, ki, kj});
              }
  Tensor out = Tensor::zeros({N, OC, OH, OW});
  for (int64_t k = 0; k < out.numel(); ++k)
    out.data<float>()[k] = static_cast<float>(y[k] + (b.defined() ? b.at({k / (OH * OW) % OC}) : 0.0));
  return out;
}

}  // namespace

TEST_CASE("conv2d with dilation and groups (hand-computed)") {
  Tensor x = Tensor::arange(9).reshape({1, 1, 3, 3});  // [[0,1,2],[3,4,5],[6,7,8]]
  // A 2x2 kernel dilated by 2 covers the four corners: 0 + 2 + 6 + 8.
  Tensor d = conv2d(x, Tensor::ones({1, 1, 2, 2}), Tensor(), {.dilation = 2});
  CHECK(d.shape() == Shape{1, 1, 1, 1});
  check_values(d, {16});
  // Dilation (1, 2), padding (0, 1): rows 0-1 and columns j-1, j+1.
  check_values(conv2d(x, Tensor::ones({1, 1, 2, 2}), Tensor(),
                      {.padding = {0, 1}, .dilation = {1, 2}}),
               {1 + 4, 0 + 2 + 3 + 5, 1 + 4, 4 + 7, 3 + 5 + 6 + 8, 4 + 7});
  // Stride (2, 1) on the 3x3 ramp with a 1x1 kernel keeps rows 0 and 2.
  check_values(conv2d(x, Tensor::ones({1, 1, 1, 1}), Tensor(), {.stride = {2, 1}}),
               {0, 1, 2, 6, 7, 8});
  // Two groups of one channel: channel 0 times 2, channel 1 times 3, plus bias.
  Tensor x2 = Tensor::arange(8).reshape({1, 2, 2, 2});
  Tensor g = conv2d(x2, Tensor::of({2, 3}, {2, 1, 1, 1}), Tensor::of({1, -1}), {.groups = 2});
  check_values(g, {1, 3, 5, 7, 11, 14, 17, 20});
}

TEST_CASE("conv2d matches a naive convolution for rectangular strides, padding, dilation, groups") {
  manual_seed(71);
  struct Case {
    int64_t N, C, H, W, OC, KH, KW;
    Conv2dArgs a;
  };
  const Case cases[] = {
      {2, 3, 7, 6, 4, 3, 2, {.stride = {2, 1}, .padding = {1, 0}}},
      {2, 2, 8, 7, 2, 3, 3, {.padding = {2, 1}, .dilation = {2, 3}}},
      {1, 4, 6, 6, 6, 3, 3, {.stride = 2, .padding = 1, .groups = 2}},
      {2, 6, 5, 7, 3, 2, 3, {.stride = {1, 2}, .dilation = {2, 1}, .groups = 3}},
      {1, 4, 5, 5, 4, 3, 3, {.padding = 1, .groups = 4}},  // depthwise
      {16, 4, 6, 6, 4, 3, 3, {.padding = 1, .dilation = 2}},  // lanes batch, dilated: im2col
      {16, 4, 6, 6, 4, 3, 3, {.padding = 1, .groups = 2}},    // lanes batch, grouped: im2col
      {16, 2, 6, 5, 3, 3, 3, {.padding = {1, 0}}},            // lanes batch, rectangular padding
  };
  for (const Case& c : cases) {
    CAPTURE(c.C);
    CAPTURE(c.a.groups);
    Tensor x = Tensor::randn({c.N, c.C, c.H, c.W});
    Tensor w = Tensor::randn({c.OC, c.C / c.a.groups, c.KH, c.KW});
    Tensor b = Tensor::randn({c.OC});
    check_same(conv2d(x, w, b, c.a), naive_conv2d_general(x, w, b, c.a), 1e-4);
    // and the gradients against the same op at batch 1, sample by sample
    Tensor xg = x.detach().requires_grad_(), wg = w.detach().requires_grad_();
    Tensor r = Tensor::randn(conv2d(x, w, b, c.a).shape());
    (conv2d(xg, wg, b, c.a) * r).sum().backward();
    Tensor gw_sum = Tensor::zeros(w.shape());
    for (int64_t n = 0; n < c.N; ++n) {
      Tensor xn = slice(x, n, n + 1).detach().requires_grad_(), wn = w.detach().requires_grad_();
      (conv2d(xn, wn, b, c.a) * slice(r, n, n + 1)).sum().backward();
      check_same(slice(xg.grad(), n, n + 1), xn.grad(), 1e-4);
      gw_sum = gw_sum + wn.grad();
    }
    check_same(wg.grad(), gw_sum, 1e-3);
  }
}

TEST_CASE("gradients of conv2d with rectangular strides, dilation and groups") {
  manual_seed(72);
  Tensor x = Tensor::randn({2, 4, 5, 6}), b = Tensor::randn({4});
  for (Conv2dArgs a : {Conv2dArgs{.stride = {2, 1}, .padding = {0, 1}},
                       Conv2dArgs{.padding = 1, .dilation = {2, 1}},
                       Conv2dArgs{.stride = 2, .padding = {1, 2}, .dilation = 2, .groups = 2},
                       Conv2dArgs{.groups = 4}}) {
    CAPTURE(a.groups);
    Tensor w = Tensor::randn({4, 4 / a.groups, 2, 3});
    CHECK_GRADCHECK([a](const Inputs& in) { return conv2d(in[0], in[1], in[2], a); }, {x, w, b});
  }
}

// With 196 outputs a sample and more, im2col + GEMM reads each sample's output
// gradient where it lies (no [OC, N*L] copy): one input channel at stride 2
// (DCGAN's first layer), and two groups, each with and without the bias.
TEST_CASE("gradients of conv2d by columns with 196 outputs a sample (finite differences)") {
  manual_seed(73);
  cpu::set_dnnl_conv(false);  // columns for every pass, on any CPU
  Tensor x1 = Tensor::randn({2, 1, 28, 28}), w1 = Tensor::randn({3, 1, 4, 4});
  Tensor x2 = Tensor::randn({3, 4, 14, 14}), w2 = Tensor::randn({4, 2, 3, 3});
  const Conv2dArgs a1{.stride = 2, .padding = 1}, a2{.padding = 1, .groups = 2};
  CHECK_GRADCHECK([a1](const Inputs& in) { return conv2d(in[0], in[1], in[2], a1); },
                  {x1, w1, Tensor::randn({3})});
  CHECK_GRADCHECK([a2](const Inputs& in) { return conv2d(in[0], in[1], in[2], a2); },
                  {x2, w2, Tensor::randn({4})});
  CHECK_GRADCHECK([a2](const Inputs& in) { return conv2d(in[0], in[1], Tensor(), a2); },
                  {x2, w2});
  cpu::set_dnnl_conv(true);
}

TEST_CASE("1x1 convolutions (one GEMM per sample): naive values and finite differences") {
  manual_seed(73);
  // ResNet's shortcut shape, and odd sizes where the stride grid misses the
  // last row or column; stride 1 reads x in place.
  for (Conv2dArgs a : {Conv2dArgs{.stride = 2}, Conv2dArgs{.stride = {3, 2}},
                       Conv2dArgs{.stride = {1, 3}}, Conv2dArgs{}}) {
    CAPTURE(a.stride.h);
    CAPTURE(a.stride.w);
    Tensor x = Tensor::randn({3, 5, 7, 8}), w = Tensor::randn({6, 5, 1, 1});
    Tensor b = Tensor::randn({6});
    check_same(conv2d(x, w, b, a), naive_conv2d_general(x, w, b, a), 1e-5);
    check_same(conv2d(x, w, Tensor(), a), naive_conv2d_general(x, w, Tensor(), a), 1e-5);
    Tensor xs = Tensor::randn({2, 3, 5, 4}), ws = Tensor::randn({4, 3, 1, 1});
    CHECK_GRADCHECK([a](const Inputs& in) { return conv2d(in[0], in[1], in[2], a); },
                    {xs, ws, Tensor::randn({4})});
    // each gradient alone has the bits it has when both are computed
    Tensor x1 = xs.detach().requires_grad_(), w1 = ws.detach().requires_grad_();
    Tensor r = Tensor::randn(conv2d(xs, ws, Tensor(), a).shape());
    (conv2d(x1, w1, Tensor(), a) * r).sum().backward();
    Tensor x2 = xs.detach().requires_grad_(), w2 = ws.detach().requires_grad_();
    (conv2d(x2, ws, Tensor(), a) * r).sum().backward();
    (conv2d(xs, w2, Tensor(), a) * r).sum().backward();
    CHECK(x2.grad().to_vector<float>() == x1.grad().to_vector<float>());
    CHECK(w2.grad().to_vector<float>() == w1.grad().to_vector<float>());
  }
}

TEST_CASE("conv2d of an empty batch: empty output, zero weight and bias gradients") {
  // geometries oneDNN takes from one sample on (stride 2), and the 1x1 path; the
  // gradients are zeros, not memory left unwritten
  for (int64_t C : {16, 2})
    for (int64_t K : {3, 1}) {
      CAPTURE(C);
      CAPTURE(K);
      Tensor x = Tensor::randn({0, C, 8, 8}).requires_grad_();
      Tensor w = Tensor::randn({4, C, K, K}).requires_grad_(),
             b = Tensor::randn({4}).requires_grad_();
      Tensor y = conv2d(x, w, b, {.stride = 2, .padding = K / 2});
      CHECK(y.shape() == Shape{0, 4, 4, 4});
      y.sum().backward();
      check_values(w.grad(), std::vector<double>(w.numel(), 0.0));
      check_values(b.grad(), {0, 0, 0, 0});
      CHECK(x.grad().shape() == x.shape());
      Tensor wt = Tensor::randn({C, 4, K, K}).requires_grad_();  // conv2d's data gradient
      Tensor z = conv_transpose2d(x, wt, Tensor(), {.stride = 2, .padding = K / 2});
      CHECK(z.shape() == Shape{0, 4, 14 + K - K / 2 * 2, 14 + K - K / 2 * 2});
      z.sum().backward();
      check_values(wt.grad(), std::vector<double>(wt.numel(), 0.0));
    }
}

TEST_CASE("conv_transpose2d of a 2x2 input (hand-computed)") {
  Tensor x = Tensor::of({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor ones = Tensor::ones({1, 1, 2, 2});
  // stride 1: each input stamps a 2x2 block of itself, overlapping in the middle
  Tensor y = conv_transpose2d(x, ones, Tensor());
  CHECK(y.shape() == Shape{1, 1, 3, 3});
  check_values(y, {1, 3, 2, 4, 10, 6, 3, 7, 4});
  // stride 2: the blocks tile a 4x4 output; plus bias
  check_values(conv_transpose2d(x, ones, Tensor::of({0.5}), {.stride = 2}),
               {1.5, 1.5, 2.5, 2.5, 1.5, 1.5, 2.5, 2.5, 3.5, 3.5, 4.5, 4.5, 3.5, 3.5, 4.5, 4.5});
  // padding 1 crops a row and column on each side; output_padding 1 adds one
  // back at the bottom and right: rows and columns (0, 1, 1) of x
  Tensor p = conv_transpose2d(x, ones, Tensor(), {.stride = 2, .padding = 1, .output_padding = 1});
  CHECK(p.shape() == Shape{1, 1, 3, 3});
  check_values(p, {1, 2, 2, 3, 4, 4, 3, 4, 4});
  // a kernel [[1, 2], [3, 4]] with stride 2: each input times the kernel
  check_values(conv_transpose2d(Tensor::of({1, 10}, {1, 1, 1, 2}), x.reshape({1, 1, 2, 2}),
                                Tensor(), {.stride = 2}),
               {1, 2, 10, 20, 3, 4, 30, 40});
}

TEST_CASE("conv_transpose2d matches a naive scatter and is conv2d's input gradient") {
  manual_seed(73);
  struct Case {
    int64_t N, C, H, W, OCg, KH, KW;
    ConvTranspose2dArgs a;
  };
  const Case cases[] = {
      {2, 3, 4, 3, 2, 3, 3, {.stride = 2, .padding = 1, .output_padding = 1}},
      {1, 4, 3, 4, 3, 2, 3, {.stride = {2, 3}, .padding = {0, 1}, .output_padding = {1, 2}}},
      {2, 4, 3, 3, 1, 3, 2, {.padding = 1, .dilation = {2, 1}, .groups = 2}},
      {1, 2, 3, 3, 2, 2, 2, {.output_padding = 1, .dilation = 2}},  // output_padding < dilation
      {16, 3, 5, 5, 4, 3, 3, {.padding = 1}},  // lanes batch: forward by the lanes backward
  };
  for (const Case& c : cases) {
    CAPTURE(c.C);
    Tensor x = Tensor::randn({c.N, c.C, c.H, c.W});
    Tensor w = Tensor::randn({c.C, c.OCg, c.KH, c.KW}), b = Tensor::randn({c.OCg * c.a.groups});
    Tensor y = conv_transpose2d(x, w, b, c.a);
    check_same(y, naive_conv_transpose2d(x, w, b, c.a), 1e-4);
    // <conv_transpose2d(x, w), r> = <x, conv2d(r, w)>: its adjoint is conv2d
    // (whose output is larger where output_padding >= stride: skipped there)
    if (c.a.output_padding.h >= c.a.stride.h || c.a.output_padding.w >= c.a.stride.w) continue;
    Tensor r = Tensor::randn(y.shape());
    Tensor yt = conv_transpose2d(x, w, Tensor(), c.a);
    Tensor back = conv2d(r, w, Tensor(),
                         {.stride = c.a.stride, .padding = c.a.padding, .dilation = c.a.dilation,
                          .groups = c.a.groups});
    CHECK(sum(yt * r).item() == doctest::Approx(sum(x * back).item()).epsilon(1e-4));
  }
}

TEST_CASE("gradients of conv_transpose2d") {
  manual_seed(74);
  Tensor x = Tensor::randn({2, 4, 3, 3}), b = Tensor::randn({4});
  for (ConvTranspose2dArgs a :
       {ConvTranspose2dArgs{.stride = 2, .padding = 1, .output_padding = 1},
        ConvTranspose2dArgs{.stride = {1, 2}, .padding = {1, 0}, .dilation = {2, 1}},
        ConvTranspose2dArgs{.stride = 2, .groups = 2}}) {
    CAPTURE(a.groups);
    Tensor w = Tensor::randn({4, 4 / a.groups, 3, 2});
    CHECK_GRADCHECK([a](const Inputs& in) { return conv_transpose2d(in[0], in[1], in[2], a); },
                    {x, w, b});
  }
  // only the weight, only the input
  Tensor w = Tensor::randn({4, 2, 2, 2});
  CHECK_GRADCHECK([x](const Inputs& in) { return conv_transpose2d(x, in[0], Tensor(), {.stride = 2}); },
                  {w});
  CHECK_GRADCHECK([w](const Inputs& in) { return conv_transpose2d(in[0], w, Tensor(), {.stride = 2}); },
                  {x});
}

TEST_CASE("conv1d is conv2d on one row (hand-computed and gradients)") {
  Tensor x = Tensor::arange(6).reshape({1, 1, 6});  // 0..5
  check_values(conv1d(x, Tensor::of({1, -1}, {1, 1, 2}), Tensor()), {-1, -1, -1, -1, -1});
  check_values(conv1d(x, Tensor::of({1, 1}, {1, 1, 2}), Tensor::of({1}), {.stride = 2, .padding = 1}),
               {1, 4, 8, 6});  // windows (pad, 0), (1, 2), (3, 4), (5, pad)
  check_values(conv1d(x, Tensor::of({1, 1}, {1, 1, 2}), Tensor(), {.dilation = 3}), {3, 5, 7});
  manual_seed(75);
  Tensor xr = Tensor::randn({2, 4, 7}), w = Tensor::randn({6, 2, 3}), b = Tensor::randn({6});
  Tensor y = conv1d(xr, w, b, {.stride = 2, .padding = 1, .dilation = 2, .groups = 2});
  CHECK(y.shape() == Shape{2, 6, 3});
  check_same(y, reshape(conv2d(reshape(xr, {2, 4, 1, 7}), reshape(w, {6, 2, 1, 3}), b,
                               {.stride = {1, 2}, .padding = {0, 1}, .dilation = {1, 2}, .groups = 2}),
                        {2, 6, 3}));
  CHECK_GRADCHECK([](const Inputs& in) {
    return conv1d(in[0], in[1], in[2], {.stride = 2, .padding = 1, .groups = 2});
  }, {xr, w, b});
}

TEST_CASE("adaptive_avg_pool2d: PyTorch's windows (hand-computed) and gradients") {
  Tensor x = Tensor::arange(12).reshape({1, 1, 3, 4});  // rows [0..3], [4..7], [8..11]
  // 3 -> 2 rows: windows [0, 2) and [1, 3); 4 -> 3 columns: [0, 2), [1, 3), [2, 4)
  check_values(adaptive_avg_pool2d(x, {2, 3}), {2.5, 3.5, 4.5, 6.5, 7.5, 8.5});
  check_values(adaptive_avg_pool2d(x, 1), {5.5});
  check_values(adaptive_avg_pool2d(x, {3, 4}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  // upsampling windows: 3 -> 5 rows repeat rows 0, 0-1, 1, 1-2, 2
  check_values(adaptive_avg_pool2d(Tensor::of({0, 3, 9}, {1, 1, 3, 1}), {5, 1}), {0, 1.5, 3, 6, 9});
  manual_seed(76);
  Tensor xr = Tensor::randn({2, 3, 7, 5});
  CHECK(adaptive_avg_pool2d(xr, {3, 2}).shape() == Shape{2, 3, 3, 2});
  CHECK_GRADCHECK([](const Inputs& in) { return adaptive_avg_pool2d(in[0], {3, 2}); }, {xr});
  CHECK_GRADCHECK([](const Inputs& in) { return adaptive_avg_pool2d(in[0], {9, 4}); }, {xr});
  CHECK_GRADCHECK([](const Inputs& in) { return adaptive_avg_pool2d(in[0], 1); }, {xr});  // the mean
}

TEST_CASE("upsample_nearest2d and interpolate (hand-computed) and gradients") {
  Tensor x = Tensor::of({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor y = interpolate(x, {.scale_factor = std::array<double, 2>{2, 3}});
  CHECK(y.shape() == Shape{1, 1, 4, 6});
  check_values(y, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
  // size 3x1 from 2x2: rows floor(i * 2/3) = 0, 0, 1; column 0
  check_values(upsample_nearest2d(x, {3, 1}), {1, 1, 3});
  check_values(interpolate(x, {.size = Size2{3, 1}}), {1, 1, 3});
  // the gradient sums each input's copies: 6 for each of 1, 2, 3, 4 above
  Tensor xg = x.detach().requires_grad_();
  interpolate(xg, {.scale_factor = std::array<double, 2>{2, 3}}).sum().backward();
  check_values(xg.grad(), {6, 6, 6, 6});
  Tensor xs = x.detach().requires_grad_();
  upsample_nearest2d(xs, {3, 1}).sum().backward();
  check_values(xs.grad(), {2, 0, 1, 0});
  manual_seed(77);
  Tensor xr = Tensor::randn({2, 2, 3, 4});
  CHECK_GRADCHECK([](const Inputs& in) { return upsample_nearest2d(in[0], {5, 7}); }, {xr});
  CHECK_GRADCHECK([](const Inputs& in) { return upsample_nearest2d(in[0], {2, 3}); }, {xr});
}

// The CPU's integer factors (2 as pairs, 3 by fills) against the index
// formula, and their gradients bit for bit against each input's copies
// summed in (i, j) order; 5x7 from 3x4 goes by the tables.
TEST_CASE("upsample_nearest2d by integer factors equals the index formula, bit for bit") {
  manual_seed(5);
  for (auto factors : {std::pair{2, 2}, std::pair{3, 2}, std::pair{2, 3}, std::pair{1, 2}}) {
    // plain ints, not a structured binding: clang's lambdas (CAPTURE) cannot take one
    const int fh = factors.first, fw = factors.second;
    CAPTURE(fh);
    CAPTURE(fw);
    const int64_t N = 2, C = 3, H = 5, W = 9, OH = H * fh, OW = W * fw;
    Tensor x = Tensor::randn({N, C, H, W}).requires_grad_();
    Tensor y = upsample_nearest2d(x, {OH, OW});
    Tensor g = Tensor::randn({N, C, OH, OW});
    y.backward(g);
    const auto xv = x.to_float_vector(), yv = y.to_float_vector(), gv = g.to_float_vector();
    const auto gx = x.grad().to_float_vector();
    int wrong = 0, wrong_grad = 0;
    for (int64_t p = 0; p < N * C; ++p)
      for (int64_t r = 0; r < H; ++r)
        for (int64_t c = 0; c < W; ++c) {
          float sum = 0.f;
          for (int64_t i = r * fh; i < (r + 1) * fh; ++i)
            for (int64_t j = c * fw; j < (c + 1) * fw; ++j) {
              wrong += yv[(p * OH + i) * OW + j] != xv[(p * H + r) * W + c];
              sum += gv[(p * OH + i) * OW + j];
            }
          wrong_grad += gx[(p * H + r) * W + c] != sum;
        }
    CHECK(wrong == 0);
    CHECK(wrong_grad == 0);
  }
}

// 1-D, 2 -> 4 without align_corners: sources max(0, (i + 0.5) / 2 - 0.5) =
// 0, 0.25, 0.75, 1.25 (the last reads input 1 alone): [a, a + (b - a) / 4,
// a + 3 (b - a) / 4, b]; each input's weights sum to 2 (4 in 2-D).
TEST_CASE("upsample_bilinear2d and interpolate (hand-computed) and gradients") {
  Tensor x = Tensor::of({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor y = interpolate(x, {.scale_factor = std::array<double, 2>{2, 2}, .mode = "bilinear"});
  CHECK(y.shape() == Shape{1, 1, 4, 4});
  check_values(y, {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
  // align_corners, 2 -> 3: sources 0, 0.5, 1; size 1: source 0
  check_values(upsample_bilinear2d(x, {3, 1}, /*align_corners=*/true), {1, 2, 3});
  check_values(interpolate(x, {.size = Size2{2, 3}, .mode = "bilinear", .align_corners = true}),
               {1, 1.5, 2, 3, 3.5, 4});
  // 2 -> 1 without align_corners: source max(0, 0.5 * 2 - 0.5) = 0.5
  check_values(upsample_bilinear2d(x, {1, 1}), {2.5});
  Tensor xg = x.detach().requires_grad_();
  upsample_bilinear2d(xg, {4, 4}).sum().backward();
  check_values(xg.grad(), {4, 4, 4, 4});
  Tensor xs = x.detach().requires_grad_();
  upsample_bilinear2d(xs, {3, 1}, /*align_corners=*/true).sum().backward();
  check_values(xs.grad(), {1.5, 0, 1.5, 0});
  manual_seed(79);
  Tensor xr = Tensor::randn({2, 2, 3, 4});
  for (bool corners : {false, true}) {
    CAPTURE(corners);
    CHECK_GRADCHECK(
        [corners](const Inputs& in) {
          return upsample_bilinear2d(in[0], {5, 7}, corners);
        },
        {xr});
    CHECK_GRADCHECK(
        [corners](const Inputs& in) {
          return upsample_bilinear2d(in[0], {2, 3}, corners);
        },
        {xr});
  }
}

// The CPU's tasks (16 output rows forward, 16 input rows backward) against
// the formula in float64, over shapes that cut rows across tasks, up and down.
TEST_CASE("upsample_bilinear2d equals its formula in float64 across the CPU's row blocks") {
  manual_seed(80);
  struct Case {
    int64_t H, W, OH, OW;
    bool corners;
  };
  for (Case k : {Case{7, 5, 37, 11, false}, Case{40, 9, 17, 20, true}, Case{33, 3, 70, 3, false},
                 Case{20, 30, 20, 61, true}}) {
    CAPTURE(k.OH);
    const int64_t NC = 3;
    Tensor x = Tensor::randn({1, NC, k.H, k.W}).requires_grad_();
    Tensor g = Tensor::randn({1, NC, k.OH, k.OW});
    Tensor y = upsample_bilinear2d(x, {k.OH, k.OW}, k.corners);
    y.backward(g);
    // taps in float64: (lower input, weight of the upper one)
    auto taps = [&](int64_t in, int64_t out, int64_t o) {
      if (in == out) return std::pair<int64_t, double>{o, 0.0};
      const double s = k.corners ? (out > 1 ? double(in - 1) / double(out - 1) * o : 0.0)
                                 : std::max(0.0, double(in) / double(out) * (o + 0.5) - 0.5);
      return std::pair<int64_t, double>{std::min<int64_t>(int64_t(s), in - 1), s - std::floor(s)};
    };
    const auto xv = x.to_float_vector(), yv = y.to_float_vector(), gv = g.to_float_vector();
    std::vector<double> want_gx(xv.size(), 0.0);
    double err = 0, err_grad = 0;
    for (int64_t p = 0; p < NC; ++p)
      for (int64_t i = 0; i < k.OH; ++i)
        for (int64_t j = 0; j < k.OW; ++j) {
          const auto [r, a] = taps(k.H, k.OH, i);
          const auto [c, b] = taps(k.W, k.OW, j);
          const int64_t r1 = std::min(r + 1, k.H - 1), c1 = std::min(c + 1, k.W - 1);
          auto at = [&](int64_t rr, int64_t cc) { return (p * k.H + rr) * k.W + cc; };
          const double want = (1 - a) * ((1 - b) * xv[at(r, c)] + b * xv[at(r, c1)]) +
                              a * ((1 - b) * xv[at(r1, c)] + b * xv[at(r1, c1)]);
          err = std::max(err, std::abs(want - yv[(p * k.OH + i) * k.OW + j]));
          const double gij = gv[(p * k.OH + i) * k.OW + j];
          want_gx[at(r, c)] += (1 - a) * (1 - b) * gij, want_gx[at(r, c1)] += (1 - a) * b * gij;
          want_gx[at(r1, c)] += a * (1 - b) * gij, want_gx[at(r1, c1)] += a * b * gij;
        }
    const auto gx = x.grad().to_float_vector();
    for (size_t q = 0; q < gx.size(); ++q)
      err_grad = std::max(err_grad, std::abs(want_gx[q] - gx[q]));
    MESSAGE("bilinear ", k.H, "x", k.W, " -> ", k.OH, "x", k.OW, ": max error ", err, ", gradient ",
            err_grad);
    CHECK(err < 1e-4);  // float ratios and weights against double ones
    CHECK(err_grad < 1e-4);
  }
}

TEST_CASE("conv2d_relu_max_pool2d with dilation or groups equals the three ops") {
  manual_seed(78);
  Tensor x = Tensor::randn({16, 2, 8, 8}), w = Tensor::randn({4, 1, 3, 3}), b = Tensor::randn({4});
  for (Conv2dArgs a : {Conv2dArgs{.padding = 2, .dilation = 2, .groups = 1},
                       Conv2dArgs{.padding = 1, .groups = 2}}) {
    Tensor wa = a.groups == 1 ? Tensor::randn({4, 2, 3, 3}) : w;
    CHECK(conv2d_relu_max_pool2d(x, wa, b, a, 2).to_float_vector() ==
          max_pool2d(relu(conv2d(x, wa, b, a)), 2).to_float_vector());
  }
}

TEST_CASE("convolution family and resizing: bad arguments throw naming the op and shapes") {
  Tensor x = Tensor::zeros({1, 3, 5, 5});
  CHECK_ERROR(conv2d(x, Tensor::zeros({2, 1, 3, 3}), Tensor(), {.groups = 2}),
              "conv2d: input [1, 3, 5, 5] has 3 channels, not divisible by groups 2");
  CHECK_ERROR(conv2d(Tensor::zeros({1, 4, 5, 5}), Tensor::zeros({3, 2, 3, 3}), Tensor(), {.groups = 2}),
              "conv2d: weight [3, 2, 3, 3] has 3 output channels, not divisible by groups 2");
  CHECK_ERROR(conv2d(Tensor::zeros({1, 4, 5, 5}), Tensor::zeros({2, 4, 3, 3}), Tensor(), {.groups = 2}),
              "conv2d: input [1, 4, 5, 5] has 4 channels but weight [2, 4, 3, 3] expects 8 (4 in "
              "each of 2 groups)");
  CHECK_ERROR(conv2d(x, Tensor::zeros({1, 3, 3, 3}), Tensor(), {.dilation = 3}),
              "conv2d: input [1, 3, 5, 5] with padding 0 is smaller than kernel [1, 3, 3, 3] "
              "dilated by 3 (7x7)");
  CHECK_ERROR(conv2d(x, Tensor::zeros({1, 3, 3, 3}), Tensor(), {.dilation = {1, 0}}),
              "conv2d: expected dilation >= 1 and groups >= 1, got dilation (1, 0) and groups 1");
  CHECK_ERROR(conv2d(x, Tensor::zeros({1, 3, 3, 3}), Tensor(), {.stride = {1, 0}}),
              "conv2d: expected stride >= 1 and padding >= 0, got stride (1, 0) and padding 0");
  CHECK_ERROR(conv_transpose2d(x, Tensor::zeros({3, 1, 3, 3}), Tensor(), {.stride = 2, .output_padding = 2}),
              "conv_transpose2d: expected 0 <= output_padding < stride or dilation, got "
              "output_padding 2, stride 2 and dilation 1");
  CHECK_ERROR(conv_transpose2d(x, Tensor::zeros({2, 1, 3, 3}), Tensor()),
              "conv_transpose2d: input [1, 3, 5, 5] has 3 channels but weight [2, 1, 3, 3] expects 2");
  CHECK_ERROR(conv_transpose2d(x, Tensor::zeros({3, 1, 3, 3}), Tensor(), {.groups = 2}),
              "conv_transpose2d: input [1, 3, 5, 5] has 3 channels, not divisible by groups 2");
  CHECK_ERROR(conv_transpose2d(x, Tensor::zeros({3, 2, 3, 3}), Tensor::zeros({3})),
              "conv_transpose2d: weight [3, 2, 3, 3] and bias [3]: expected bias [2]");
  CHECK_ERROR(conv_transpose2d(Tensor::zeros({1, 1, 1, 1}), Tensor::zeros({1, 1, 1, 1}), Tensor(),
                               {.padding = 1}),
              "give an empty output -1x-1");
  CHECK_ERROR(conv1d(x, Tensor::zeros({1, 3, 3}), Tensor()),
              "conv1d: expected a 3-D input, got shape [1, 3, 5, 5]");
  CHECK_ERROR(conv1d(Tensor::zeros({1, 3, 5}), Tensor::zeros({1, 2, 3}), Tensor()),
              "conv1d: input [1, 3, 1, 5] has 3 channels but weight [1, 2, 1, 3] expects 2");
  CHECK_ERROR(adaptive_avg_pool2d(x, {0, 2}),
              "adaptive_avg_pool2d: expected an output size >= 1, got (0, 2) for input [1, 3, 5, 5]");
  CHECK_ERROR(adaptive_avg_pool2d(Tensor::zeros({3, 5, 5}), 2),
              "adaptive_avg_pool2d: expected a 4-D input, got shape [3, 5, 5]");
  CHECK_ERROR(upsample_nearest2d(x, {2, -1}),
              "upsample_nearest2d: expected an output size >= 1, got (2, -1)");
  CHECK_ERROR(interpolate(x, {}), "interpolate: expected exactly one of size and scale_factor");
  CHECK_ERROR(
      interpolate(x, {.size = Size2{2}, .mode = "bicubic"}),
      "interpolate: mode 'bicubic' is not supported (expected \"nearest\" or \"bilinear\")");
  CHECK_ERROR(
      interpolate(x, {.size = Size2{2}, .align_corners = false}),
      "interpolate: align_corners can only be set with mode \"bilinear\", got mode 'nearest'");
  CHECK_ERROR(
      upsample_bilinear2d(x, {0, 2}),
      "upsample_bilinear2d: expected an output size >= 1, got (0, 2) for input [1, 3, 5, 5]");
  CHECK_ERROR(upsample_bilinear2d(Tensor::zeros({3, 5, 5}), 2),
              "upsample_bilinear2d: expected a 4-D input, got shape [3, 5, 5]");
  CHECK_ERROR(interpolate(x, {.scale_factor = std::array<double, 2>{0, 2}}),
              "interpolate: expected a positive scale_factor, got (0, 2)");
}

// The lanes path (batches of 16 on AVX-512 CPUs) planned the input gradient
// even when only the weight's was wanted; with a kernel as large as the input
// (a 1 x 1 output, as a DCGAN generator's first transposed convolution's
// weight gradient has) the plan's sizes went negative: SIGFPE. (Without
// padding such a layer is a dense one now, below; padding 1 keeps it here.)
TEST_CASE("conv2d's weight gradient alone, output 1 x 1, batch 16 (the lanes path)") {
  manual_seed(11);
  for (int64_t h : {2, 4, 5}) {
    CAPTURE(h);
    const int64_t pad = h == 2, oh = h + 2 * pad - 3;
    Tensor x = Tensor::randn({16, 8, h, h}), w = Tensor::randn({6, 8, 4, 4});
    Tensor r = Tensor::randn({16, 6, oh, oh});
    Tensor w_only = w.detach().clone().requires_grad_();
    (conv2d(x, w_only, Tensor(), {.padding = pad}) * r).sum().backward();
    Tensor x_too = x.detach().clone().requires_grad_(), w_both = w.detach().clone().requires_grad_();
    (conv2d(x_too, w_both, Tensor(), {.padding = pad}) * r).sum().backward();
    CHECK(same_bits(w_only.grad(), w_both.grad()));
  }
}

// Strided and wide convolutions run on oneDNN (conv_dnnl.cpp); with it
// switched off the same calls take im2col + GEMM or the lanes kernel. The two
// agree up to rounding: forward and every gradient, for conv2d (bias or not,
// dilation, non-square) and for conv_transpose2d (whose forward is conv2d's
// input gradient). Under 16 input channels only the weight and bias
// gradients come from oneDNN.
TEST_CASE("convolutions on oneDNN equal minidl's own kernels up to rounding") {
  struct Case {
    Shape x, w;
    bool transpose, bias;
    Size2 stride, padding, dilation, output_padding;
    int64_t groups = 1;
  };
  const std::vector<Case> cases = {
      {{5, 6, 14, 14}, {8, 6, 4, 4}, false, true, 2, 1, 1, 0},     // DCGAN's discriminator
      {{17, 32, 6, 6}, {8, 32, 3, 3}, false, true, 1, 1, 1, 0},    // stride 1, 32 channels
      {{16, 16, 9, 9}, {16, 16, 3, 3}, false, false, 1, 1, 1, 0},  // ResNet's first stage
      {{3, 4, 15, 11}, {6, 4, 3, 2}, false, false, {2, 3}, {1, 0}, 1, 0},
      {{2, 3, 13, 13}, {5, 3, 3, 3}, false, true, 2, 2, 2, 0},  // dilated
      {{4, 8, 7, 7}, {8, 5, 4, 4}, true, false, 2, 1, 1, 0},    // DCGAN's generator
      {{3, 6, 4, 5}, {6, 4, 3, 3}, true, true, 2, 1, 1, 1},     // output_padding 1
      // one input channel: the input gradient (the transpose's forward) by columns
      {{6, 1, 28, 28}, {8, 1, 4, 4}, false, true, 2, 1, 1, 0},  // DCGAN's first layer
      {{5, 8, 14, 14}, {8, 1, 4, 4}, true, true, 2, 1, 1, 0},   // and its generator's last
      // grouped: depthwise 3x3 on oneDNN's kernel, 7x7 with the weight gradient
      // here, 32 groups of 4 likewise, 8 groups at stride 2, a multiplier of
      // 2 (oneDNN's GEMM: all here), and transposed depthwise
      {{5, 32, 9, 9}, {32, 1, 3, 3}, false, true, 1, 1, 1, 0, 32},
      {{3, 32, 10, 10}, {32, 1, 7, 7}, false, true, 1, 3, 1, 0, 32},
      {{4, 128, 6, 6}, {128, 4, 3, 3}, false, false, 1, 1, 1, 0, 32},
      {{4, 64, 9, 9}, {64, 8, 3, 3}, false, true, 2, 1, 1, 0, 8},
      {{4, 32, 8, 8}, {64, 1, 3, 3}, false, true, 1, 1, 1, 0, 32},
      {{3, 32, 5, 5}, {32, 1, 4, 4}, true, true, 2, 1, 1, 0, 32},
      // past 16 MiB of copies, in chunks of samples on one thread: 10 of 10; 9 of 13
      // and one of 3 (on two, the same chunks side by side)
      {{100, 16, 28, 28}, {16, 16, 3, 3}, false, true, 1, 1, 1, 0},
      {{120, 16, 28, 28}, {32, 16, 3, 3}, false, true, 2, 1, 1, 0},
      // depthwise: 9 of 5 and one of 3, on two threads too
      {{48, 32, 28, 28}, {32, 1, 3, 3}, false, true, 1, 1, 1, 0, 32},
  };
  manual_seed(71);
  const int before = num_threads();
  double worst = 0;
  for (int threads : {1, 2})
    for (const Case& c : cases) {
      set_num_threads(threads);
      Tensor x = Tensor::randn(c.x).requires_grad_(), w = Tensor::randn(c.w).requires_grad_();
      Tensor b =
          c.bias ? Tensor::randn({c.transpose ? c.w[1] * c.groups : c.w[0]}).requires_grad_()
                 : Tensor();
      std::vector<Tensor> runs[2];
      for (bool on : {true, false}) {
        cpu::set_dnnl_conv(on);
        for (Tensor* p : {&x, &w, &b})
          if (p->defined()) p->zero_grad();
        Tensor y = c.transpose
                       ? conv_transpose2d(x, w, b,
                                          {.stride = c.stride,
                                           .padding = c.padding,
                                           .output_padding = c.output_padding,
                                           .dilation = c.dilation,
                                           .groups = c.groups})
                       : conv2d(x, w, b,
                                {.stride = c.stride,
                                 .padding = c.padding,
                                 .dilation = c.dilation,
                                 .groups = c.groups});
        (y * y).sum().backward();
        runs[on] = {y.detach(), x.grad().clone(), w.grad().clone()};  // grads zeroed next run
        if (c.bias) runs[on].push_back(b.grad().clone());
      }
      cpu::set_dnnl_conv(true);
      for (size_t t = 0; t < runs[0].size(); ++t)
        worst = std::max(worst, testing::reference_error(runs[1][t], runs[0][t]));
    }
  set_num_threads(before);
  MESSAGE("largest difference, relative to each tensor's largest value: " << worst);
  CHECK(worst < 1e-5);
}

// On CPUs without AVX-512 both gradients of a stride-1 convolution from 4 to
// 15 input channels (LeNet's conv2: 6) run on oneDNN (conv_dnnl.cpp). Each
// route sums a weight gradient's 600 products (6,400 at batch 64) in its own
// order (at batch 6 they differed by 1.08e-5 of the largest value), so the
// two are held to sums in float64 instead of to each other: each within 1e-5
// of the largest value, on 1 and 2 threads, at batches of 6 and 64 (the
// lanes kernel's).
TEST_CASE("LeNet's conv2 gradients on oneDNN and on minidl's kernels equal float64 sums") {
  manual_seed(74);
  const int before = num_threads();
  double worst = 0;
  for (int threads : {1, 2})
    for (int64_t n : {6, 64})
      for (bool on : {true, false}) {
        CAPTURE(threads);
        CAPTURE(n);
        CAPTURE(on);
        set_num_threads(threads);
        cpu::set_dnnl_conv(on);
        Tensor x = Tensor::randn({n, 6, 14, 14}).requires_grad_();
        Tensor w = Tensor::randn({16, 6, 5, 5}).requires_grad_();
        Tensor b = Tensor::randn({16}).requires_grad_();
        Tensor y = conv2d(x, w, b);
        Tensor gy = Tensor::randn(y.shape());
        y.backward(gy);
        const auto want = naive_conv2d_backward(x.detach(), w.detach(), gy, 1, 0);
        const Tensor got[] = {x.grad(), w.grad(), b.grad()};
        for (size_t t = 0; t < 3; ++t) {
          const double err = testing::reference_error(got[t], want[t]);
          CHECK(err < 1e-5);
          worst = std::max(worst, err);
        }
      }
  cpu::set_dnnl_conv(true);
  set_num_threads(before);
  MESSAGE("largest difference, relative to each tensor's largest value: " << worst);
}

// oneDNN's backward reorders the output gradient once for both of its
// primitives; where only one gradient is wanted, it alone is computed (the
// second batch in chunks of 8 samples, which it takes on one thread).
TEST_CASE("a oneDNN convolution computes just the gradient that is wanted") {
  manual_seed(72);
  const int before = num_threads();
  set_num_threads(1);
  const Tensor w0 = Tensor::randn({24, 16, 3, 3});
  for (bool x_grad : {true, false})
    for (const Tensor& x0 : {Tensor::randn({16, 16, 8, 8}), Tensor::randn({100, 16, 28, 28})}) {
      Tensor grads[2];
      for (bool on : {true, false}) {
        cpu::set_dnnl_conv(on);
        Tensor x = x0.clone().requires_grad_(x_grad), w = w0.clone().requires_grad_(!x_grad);
        Tensor y = conv2d(x, w, Tensor(), {.stride = 1, .padding = 1});
        (y * y).sum().backward();
        CHECK_FALSE((x_grad ? w : x).grad().defined());
        grads[on] = (x_grad ? x : w).grad();
      }
      cpu::set_dnnl_conv(true);
      CHECK(testing::reference_error(grads[1], grads[0]) < 1e-5);
    }
  set_num_threads(before);
}

// On two threads a batch of 35 samples, 16 channels of 10 x 10 and 3x3
// weights goes side by side (conv_dnnl.cpp): chunks of 5 samples, each
// thread taking the next one left, on primitives of one thread. Its values and
// gradients equal sums in float64, the weight and bias gradients' chunks are
// summed in chunk order whichever thread ran them (the same bits in three
// runs), and the caller's thread count is what it was.
TEST_CASE("oneDNN's convolutions side by side on two threads: float64 sums, the same bits") {
  manual_seed(75);
  const int before = num_threads();
  set_num_threads(2);
  Tensor x = Tensor::randn({35, 16, 10, 10}).requires_grad_();
  Tensor w = Tensor::randn({8, 16, 3, 3}).requires_grad_(), b = Tensor::randn({8}).requires_grad_();
  Tensor gy;
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 3; ++run) {
    for (Tensor* p : {&x, &w, &b}) p->zero_grad();
    Tensor y = conv2d(x, w, b, {.stride = 1, .padding = 1});
    if (!gy.defined()) gy = Tensor::randn(y.shape());
    y.backward(gy);
    CHECK(num_threads() == 2);
    if (run == 0) {
      CHECK(testing::reference_error(y, naive_conv2d(x.detach(), w.detach(), b.detach(), 1, 1)) <
            1e-5);
      const auto want = naive_conv2d_backward(x.detach(), w.detach(), gy, 1, 1);
      const Tensor got[] = {x.grad(), w.grad(), b.grad()};
      for (size_t t = 0; t < 3; ++t) CHECK(testing::reference_error(got[t], want[t]) < 1e-5);
    }
    runs.push_back(testing::all_values({y.detach(), x.grad(), w.grad(), b.grad()}));
  }
  CHECK(runs[1] == runs[0]);
  CHECK(runs[2] == runs[0]);
  set_num_threads(before);
}

// 1x1 convolutions run a GEMM per sample (conv.cpp's pointwise path), the
// samples split between threads. One sample on two threads runs on the
// caller with no parallel region, its GEMM on the pool (inside an inactive
// region the library opened a team of its own and the pool's threads spun).
// Values and gradients against float64 sums, at stride 1 and 2.
TEST_CASE("a 1x1 convolution of one sample on two threads: float64 sums") {
  manual_seed(79);
  const int before = num_threads();
  set_num_threads(2);
  for (int64_t stride : {1, 2}) {
    CAPTURE(stride);
    Tensor x = Tensor::randn({1, 40, 9, 9}).requires_grad_();
    Tensor w = Tensor::randn({24, 40, 1, 1}).requires_grad_();
    Tensor b = Tensor::randn({24}).requires_grad_();
    Tensor y = conv2d(x, w, b, {.stride = stride});
    Tensor gy = Tensor::randn(y.shape());
    y.backward(gy);
    CHECK(testing::reference_error(y, naive_conv2d(x.detach(), w.detach(), b.detach(), stride, 0)) <
          1e-5);
    const auto want = naive_conv2d_backward(x.detach(), w.detach(), gy, stride, 0);
    const Tensor got[] = {x.grad(), w.grad(), b.grad()};
    for (size_t t = 0; t < 3; ++t) CHECK(testing::reference_error(got[t], want[t]) < 1e-5);
  }
  CHECK(num_threads() == 2);
  set_num_threads(before);
}

// A window over the whole unpadded input makes a 1 x 1 output: the layer is a
// dense one, y [N, OC] = x [N, C*H*W] w [OC, C*H*W]^T + b, and runs as one
// GEMM (conv.cpp). So is a transposed convolution from 1 x 1 (DCGAN's first
// generator layer), whose forward is that geometry's input gradient. Both
// against the dense layer built of matmul, forward and every gradient, on 1
// and 2 threads.
TEST_CASE("a convolution whose window covers the whole input equals a dense layer") {
  manual_seed(73);
  const int before = num_threads();
  double worst = 0;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (bool transpose : {false, true}) {
      CAPTURE(transpose);
      const int64_t N = 70, C = transpose ? 40 : 6, OC = transpose ? 24 : 5, K = 3;
      Tensor x = Tensor::randn(transpose ? Shape{N, C, 1, 1} : Shape{N, C, K, K}).requires_grad_();
      Tensor w =
          Tensor::randn(transpose ? Shape{C, OC, K, K} : Shape{OC, C, K, K}).requires_grad_();
      Tensor b = Tensor::randn({OC}).requires_grad_();
      Tensor y =
          transpose ? conv_transpose2d(x, w, b, {.stride = 2}) : conv2d(x, w, b, {.stride = 2});
      Tensor r = Tensor::randn(y.shape());
      (y * r).sum().backward();
      const std::vector<Tensor> got = {y.detach(), x.grad(), w.grad(), b.grad()};
      for (Tensor* p : {&x, &w, &b}) p->zero_grad();
      Tensor want =
          transpose
              ? matmul(x.reshape({N, C}), w.reshape({C, OC * K * K})).reshape({N, OC, K, K}) +
                    b.reshape({1, OC, 1, 1})
              : (matmul(x.reshape({N, C * K * K}), w.reshape({OC, C * K * K}), false, true) + b)
                    .reshape({N, OC, 1, 1});
      (want * r).sum().backward();
      const std::vector<Tensor> ref = {want.detach(), x.grad(), w.grad(), b.grad()};
      for (size_t t = 0; t < got.size(); ++t) {
        CAPTURE(t);
        const double err = testing::reference_error(got[t], ref[t]);
        CHECK(err < 1e-5);
        worst = std::max(worst, err);
      }
    }
  }
  set_num_threads(before);
  MESSAGE("largest difference, relative to each tensor's largest value: " << worst);
}
