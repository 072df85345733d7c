// The convolution family and resizing (issue 22) on CUDA against the CPU:
// conv2d with rectangular strides, padding, dilation and groups by im2col, by
// the direct kernels and by cuDNN (where it loads), conv_transpose2d (col2im
// forward) and conv1d, and nearest upsampling's kernels.
#include <array>
#include <string>
#include <vector>

#include "cuda/check_cuda.h"
#include "framework/cuda.h"

using namespace minidl;
using namespace minidl::cuda_suite;
using Inputs = std::vector<Tensor>;

namespace {

// conv2d and conv_transpose2d on geometries the plain conv2d cases do not reach
void check_conv_family() {
  manual_seed(22);
  for (Conv2dArgs a : {Conv2dArgs{.stride = {2, 1}, .padding = {1, 0}},
                       Conv2dArgs{.padding = {2, 1}, .dilation = {2, 3}},
                       Conv2dArgs{.stride = 2, .padding = 1, .groups = 2},
                       Conv2dArgs{.padding = 1, .groups = 4}}) {
    CAPTURE(a.groups);
    Tensor w = Tensor::randn({4, 4 / a.groups, 3, 2});
    check_op("conv2d", [a](const Inputs& in) { return conv2d(in[0], in[1], in[2], a); },
             {Tensor::randn({2, 4, 8, 7}), w, Tensor::randn({4})});
  }
  check_op("conv2d 1x1 grouped",  // im2col reads x as its own columns, per group
           [](const Inputs& in) { return conv2d(in[0], in[1], in[2], {.groups = 2}); },
           {Tensor::randn({2, 4, 3, 3}), Tensor::randn({6, 2, 1, 1}), Tensor::randn({6})});
  for (ConvTranspose2dArgs a :
       {ConvTranspose2dArgs{.stride = 2, .padding = 1, .output_padding = 1},
        ConvTranspose2dArgs{.stride = {2, 3}, .padding = {0, 1}, .output_padding = {1, 2}},
        ConvTranspose2dArgs{.padding = 1, .dilation = {2, 1}, .groups = 2},
        ConvTranspose2dArgs{.output_padding = 1, .dilation = 2}}) {  // below cuDNN's size: im2col
    CAPTURE(a.groups);
    Tensor w = Tensor::randn({4, 2, 3, 2});
    check_op("conv_transpose2d",
             [a](const Inputs& in) { return conv_transpose2d(in[0], in[1], in[2], a); },
             {Tensor::randn({2, 4, 3, 4}), w, Tensor::randn({2 * a.groups})});
  }
  check_op("conv1d",
           [](const Inputs& in) {
             return conv1d(in[0], in[1], in[2], {.stride = 2, .padding = 1, .dilation = 2, .groups = 2});
           },
           {Tensor::randn({2, 4, 9}), Tensor::randn({6, 2, 3}), Tensor::randn({6})});
}

}  // namespace

TEST_CASE("cuda: conv2d with dilation and groups, conv_transpose2d and conv1d by im2col") {
  cuda::set_conv_algorithm(cuda::ConvAlgorithm::Im2col);
  check_conv_family();
  cuda::set_conv_algorithm(cuda::ConvAlgorithm::Auto);
}

TEST_CASE("cuda: conv2d with dilation and groups, conv_transpose2d and conv1d by the direct kernels") {
  cuda::set_conv_algorithm(cuda::ConvAlgorithm::Direct);
  check_conv_family();
  cuda::set_conv_algorithm(cuda::ConvAlgorithm::Auto);
}

TEST_CASE("cuda: conv2d with dilation and groups, conv_transpose2d and conv1d by cuDNN") {
  cuda::set_conv_algorithm(cuda::ConvAlgorithm::Cudnn);
  try {
    (void)conv2d(Tensor::ones({1, 2, 3, 3}, kFloat32, kCuda),
                 Tensor::ones({2, 1, 2, 2}, kFloat32, kCuda), Tensor(), {.groups = 2});
  } catch (const Error& e) {  // no libcudnn.so.9 here, or a build without cudnn.h
    cuda::set_conv_algorithm(cuda::ConvAlgorithm::Auto);
    MESSAGE("cuda: cuDNN unavailable, its conv family case skipped: " << std::string(e.what()));
    return;
  }
  check_conv_family();
  cuda::set_conv_algorithm(cuda::ConvAlgorithm::Auto);
}

TEST_CASE("cuda: nearest and bilinear upsampling and adaptive average pooling") {
  manual_seed(23);
  Tensor x = Tensor::randn({2, 3, 4, 5});
  for (Size2 size : {Size2{8, 10}, Size2{7, 3}, Size2{4, 5}, Size2{1, 12}}) {
    CAPTURE(size.h);
    CAPTURE(size.w);
    check_op("upsample_nearest2d", [size](const Inputs& in) { return upsample_nearest2d(in[0], size); },
             {x});
    check_op("adaptive_avg_pool2d", [size](const Inputs& in) { return adaptive_avg_pool2d(in[0], size); },
             {x});
    for (bool corners : {false, true})
      check_op(
          "upsample_bilinear2d",
          [size, corners](const Inputs& in) { return upsample_bilinear2d(in[0], size, corners); },
          {x});
  }
  check_op("interpolate scale_factor",
           [](const Inputs& in) {
             return interpolate(in[0], {.scale_factor = std::array<double, 2>{1.7, 3}});
           },
           {x});
}
