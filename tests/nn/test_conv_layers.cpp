// The convolution family's and resizing layers (issue 22): Conv2d's new
// options, ConvTranspose2d, Conv1d, AdaptiveAvgPool2d and Upsample: shapes,
// parameter names and PyTorch's init bounds, values by hand, gradients.
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "cell_gradcheck.h"
#include "check_close.h"
#include "gradcheck.h"

using namespace minidl;
using testing::cell_param_gradcheck;
using testing::check_close;
using testing::gradcheck;

namespace {

// every element of t within [-bound, bound], and some beyond bound / 2
void check_uniform_bound(const Tensor& t, double bound) {
  const std::vector<float> v = t.to_float_vector();
  float largest = 0;
  for (float e : v) largest = std::max(largest, std::abs(e));
  CHECK(largest <= bound);
  CHECK(largest > bound / 2);
}

}  // namespace

TEST_CASE("Conv2d with per-dim stride and padding, dilation and groups") {
  manual_seed(31);
  nn::Conv2d conv{4, 6, {3, 2}, {.stride = {2, 1}, .padding = {1, 0}, .dilation = {1, 2}, .groups = 2}};
  CHECK(conv.weight.shape() == Shape{6, 2, 3, 2});
  CHECK(conv.bias.shape() == Shape{6});
  CHECK(conv.named_parameters().contains("weight"));
  check_uniform_bound(conv.weight, 1 / std::sqrt(2.0 * 3 * 2));  // fan_in = C/groups*KH*KW
  Tensor x = Tensor::randn({2, 4, 7, 6});
  Tensor y = conv(x);
  CHECK(y.shape() == Shape{2, 6, 4, 4});  // (7+2-3)/2+1, (6-2-1)/1+1
  const std::vector<float> want =
      conv2d(x, conv.weight, conv.bias,
             {.stride = {2, 1}, .padding = {1, 0}, .dilation = {1, 2}, .groups = 2})
          .to_float_vector();
  check_close(y, std::vector<double>(want.begin(), want.end()));
  CHECK_GRADCHECK_RESULT(cell_param_gradcheck(conv, [&] { return conv(x); }));
  // "same" with a dilated kernel: padding dilation*(k-1)/2
  nn::Conv2d same{1, 2, 3, {.dilation = 2, .pad_mode = "same"}};
  CHECK(same.padding == 2);
  CHECK(same(Tensor::randn({1, 1, 6, 5})).shape() == Shape{1, 2, 6, 5});
  nn::Conv2d same_even{1, 1, {2, 3}, {.dilation = {2, 1}, .pad_mode = "same"}};
  CHECK(same_even.padding == Size2{1, 1});
  CHECK_THROWS_WITH_AS(nn::Conv2d(1, 1, 2, {.pad_mode = "same"}),
                       doctest::Contains("pad_mode \"same\" needs stride 1 and an odd kernel"), Error);
  CHECK_THROWS_WITH_AS(nn::Conv2d(3, 4, 3, {.groups = 2}),
                       doctest::Contains("Conv2d(3, 4, kernel 3): expected dilation >= 1 and groups "
                                         ">= 1 dividing both channel counts, got dilation 1 and groups 2"),
                       Error);
}

TEST_CASE("ConvTranspose2d: shapes, names, PyTorch's init, a hand value and gradients") {
  manual_seed(32);
  nn::ConvTranspose2d up{4, 6, 3, {.stride = 2, .padding = 1, .output_padding = 1, .groups = 2}};
  CHECK(up.weight.shape() == Shape{4, 3, 3, 3});  // [C, OC/groups, KH, KW]
  CHECK(up.bias.shape() == Shape{6});
  auto params = up.named_parameters();
  CHECK(params.contains("weight"));
  CHECK(params.contains("bias"));
  check_uniform_bound(up.weight, 1 / std::sqrt(3.0 * 3 * 3));  // fan_in = OC/groups*KH*KW
  check_uniform_bound(up.bias, 1 / std::sqrt(3.0 * 3 * 3));
  Tensor x = Tensor::randn({2, 4, 3, 5});
  CHECK(up(x).shape() == Shape{2, 6, 6, 10});  // (3-1)*2-2+2+1+1
  CHECK_GRADCHECK_RESULT(cell_param_gradcheck(up, [&] { return up(x); }));
  CHECK_GRADCHECK_RESULT(gradcheck([&](const std::vector<Tensor>& in) { return up(in[0]); }, {x}));
  // ones kernel, stride 2: each input becomes a 2x2 block
  nn::ConvTranspose2d ones{1, 1, 2, {.stride = 2, .has_bias = false, .weight_init = "ones"}};
  CHECK(!ones.named_parameters().contains("bias"));
  check_close(ones(Tensor::of({1, 2}, {1, 1, 1, 2})), {1, 1, 2, 2, 1, 1, 2, 2});
  CHECK_THROWS_WITH_AS(nn::ConvTranspose2d(2, 2, 3, {.stride = 2, .output_padding = 2}),
                       doctest::Contains("0 <= output_padding < stride or dilation"), Error);
  CHECK_THROWS_WITH_AS(up(Tensor::zeros({1, 3, 4, 4})),
                       doctest::Contains("expected input [N, 4, H, W], got [1, 3, 4, 4]"), Error);
}

TEST_CASE("Conv1d: shapes, names, init and gradients") {
  manual_seed(33);
  nn::Conv1d conv{4, 6, 3, {.stride = 2, .padding = 1, .dilation = 2, .groups = 2}};
  CHECK(conv.weight.shape() == Shape{6, 2, 3});
  CHECK(conv.bias.shape() == Shape{6});
  check_uniform_bound(conv.weight, 1 / std::sqrt(2.0 * 3));
  Tensor x = Tensor::randn({2, 4, 9});
  CHECK(conv(x).shape() == Shape{2, 6, 4});  // (9+2-4-1)/2+1
  CHECK_GRADCHECK_RESULT(cell_param_gradcheck(conv, [&] { return conv(x); }));
  nn::Conv1d diff{1, 1, 2, {.has_bias = false, .weight_init = Tensor::of({-1, 1}, {1, 1, 2})}};
  check_close(diff(Tensor::of({1, 4, 9, 16}, {1, 1, 4})), {3, 5, 7});
  CHECK_THROWS_WITH_AS(conv(Tensor::zeros({2, 4, 3, 3})),
                       doctest::Contains("Conv1d(4, 6, kernel 3): expected input [N, 4, L], got"),
                       Error);
}

TEST_CASE("AdaptiveAvgPool2d and Upsample by hand, with gradients") {
  Tensor x = Tensor::arange(16).reshape({1, 1, 4, 4});
  nn::AdaptiveAvgPool2d global{1};
  check_close(global(x), {7.5});
  check_close(nn::AdaptiveAvgPool2d({2, 1})(x), {3.5, 11.5});  // rows 0-1 and 2-3, all columns
  nn::Upsample up2{{.scale_factor = std::array<double, 2>{2, 2}}};
  Tensor small = Tensor::of({1, 2, 3, 4}, {1, 1, 2, 2});
  check_close(up2(small), {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  nn::Upsample to_size{{.size = Size2{3, 2}}};
  check_close(to_size(small), {1, 2, 1, 2, 3, 4});
  CHECK(global.named_parameters().empty());
  manual_seed(34);
  Tensor r = Tensor::randn({2, 2, 5, 3});
  CHECK_GRADCHECK_RESULT(gradcheck([](const std::vector<Tensor>& in) {
    return nn::AdaptiveAvgPool2d({2, 2})(in[0]);
  }, {r}));
  CHECK_GRADCHECK_RESULT(gradcheck([&](const std::vector<Tensor>& in) { return up2(in[0]); }, {r}));
  CHECK_THROWS_WITH_AS(nn::Upsample({}), doctest::Contains("Upsample: expected exactly one of size "
                                                           "and scale_factor"), Error);
  // bilinear, align_corners: 2 -> 3 reads sources 0, 0.5, 1 each way
  nn::Upsample corners{{.size = Size2{3, 3}, .mode = "bilinear", .align_corners = true}};
  check_close(corners(small), {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4});
  CHECK_GRADCHECK_RESULT(
      gradcheck([&](const std::vector<Tensor>& in) { return corners(in[0]); }, {r}));
  CHECK_THROWS_WITH_AS(nn::Upsample({.size = Size2{2}, .mode = "bicubic"}),
                       doctest::Contains("Upsample: mode 'bicubic' is not supported"), Error);
  CHECK_THROWS_WITH_AS(nn::Upsample({.size = Size2{2}, .align_corners = true}),
                       doctest::Contains("Upsample: align_corners can only be set with mode "
                                         "\"bilinear\", got mode 'nearest'"),
                       Error);
  CHECK_THROWS_WITH_AS(nn::AdaptiveAvgPool2d(0), doctest::Contains("AdaptiveAvgPool2d: expected an "
                                                                   "output size >= 1, got 0"), Error);
}
