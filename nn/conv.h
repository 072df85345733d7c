// Convolution cells (Conv2d, ConvTranspose2d, Conv1d) and 2-D pooling cells, NCHW.
#pragma once
#include <string>

#include "framework/ops.h"
#include "nn/cell.h"
#include "nn/init.h"

namespace minidl::nn {

struct Conv2dOptions {
  Size2 stride = 1;              // an int, or {height, width}
  Size2 padding = 0;             // zero padding on both sides of each dim; pad_mode "pad" only
  Size2 dilation = 1;            // spacing of the kernel's taps
  int64_t groups = 1;            // in and out channels split into groups (PyTorch's `groups`)
  std::string pad_mode = "pad";  // "pad": use `padding` (PyTorch's default, 0);
                                 // "valid": no padding; "same": padding
                                 // dilation*(k-1)/2, so the output is H x W
                                 // (stride 1 and dilation*(k-1) even only)
  bool has_bias = true;          // PyTorch's `bias`
  // Defaults are PyTorch's: U(-1/sqrt(C/groups*KH*KW), 1/sqrt(C/groups*KH*KW)) for both.
  Initializer weight_init = "he_uniform";
  Initializer bias_init = "fan_in_uniform";
};

// x [N, C, H, W] -> [N, OC, OH, OW], OH = (H + 2 padding - dilation (KH - 1) - 1) / stride + 1.
// Parameters: weight [OC, C/groups, KH, KW], bias [OC] (absent without has_bias).
// Bad options (unknown pad_mode, "same" with stride > 1 or an even
// dilation*(k-1), padding with "same"/"valid", channels not divisible by
// groups) throw minidl::Error at construction.
class Conv2d : public Cell {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size,
         Conv2dOptions options = {});
  using Cell::forward;
  Tensor forward(const Tensor& x) override;
  // max_pool2d(relu(forward(x)), pool) -> [N, OC, OH/pool, OW/pool] through
  // the op conv2d_relu_max_pool2d: the same numbers, and for pool 2 on the CPU
  // one fused kernel (framework/ops.h). Recorded as this cell's, like forward.
  Tensor relu_max_pool(const Tensor& x, int64_t pool);

  const int64_t in_channels, out_channels;
  const Size2 kernel_size, stride, padding, dilation;
  const int64_t groups;
  Tensor weight, bias;

 private:
  Conv2dArgs args() const;
  void check_input(const Tensor& x) const;
};

struct ConvTranspose2dOptions {
  Size2 stride = 1;
  Size2 padding = 0;         // removed from both sides of each output dim
  Size2 output_padding = 0;  // added at the bottom and right; below stride or dilation
  Size2 dilation = 1;
  int64_t groups = 1;
  bool has_bias = true;  // PyTorch's `bias`
  // PyTorch's defaults, fans from the weight [C, OC/groups, KH, KW]:
  // U(-1/sqrt(OC/groups*KH*KW), 1/sqrt(OC/groups*KH*KW)) for both.
  Initializer weight_init = "he_uniform";
  Initializer bias_init = "fan_in_uniform";
};

// x [N, C, H, W] -> [N, OC, OH, OW] by conv_transpose2d (framework/ops.h),
// OH = (H - 1) stride - 2 padding + dilation (KH - 1) + output_padding + 1.
// Parameters: weight [C, OC/groups, KH, KW], bias [OC]. Bad options
// (output_padding not below stride or dilation, channels not divisible by
// groups) throw minidl::Error at construction.
class ConvTranspose2d : public Cell {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size,
                  ConvTranspose2dOptions options = {});
  using Cell::forward;
  Tensor forward(const Tensor& x) override;

  const int64_t in_channels, out_channels;
  const Size2 kernel_size;
  const ConvTranspose2dArgs args;
  Tensor weight, bias;
};

struct Conv1dOptions {
  int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
  bool has_bias = true;  // PyTorch's `bias`
  Initializer weight_init = "he_uniform";  // PyTorch's, as Conv2d's
  Initializer bias_init = "fan_in_uniform";
};

// x [N, C, L] -> [N, OC, OL] by conv1d, OL = (L + 2 padding - dilation (K - 1) - 1) / stride + 1.
// Parameters: weight [OC, C/groups, K], bias [OC].
class Conv1d : public Cell {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
         Conv1dOptions options = {});
  using Cell::forward;
  Tensor forward(const Tensor& x) override;

  const int64_t in_channels, out_channels, kernel_size;
  const Conv1dArgs args;
  Tensor weight, bias;
};

// Max over each K x K window: x [N, C, H, W] -> [N, C, OH, OW].
// stride 0 means stride = kernel (PyTorch's default).
class MaxPool2d : public Cell {
 public:
  explicit MaxPool2d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0);
  using Cell::forward;
  Tensor forward(const Tensor& x) override;

  const int64_t kernel_size, stride, padding;
};

// Mean over each K x K window: x [N, C, H, W] -> [N, C, OH, OW].
class AvgPool2d : public Cell {
 public:
  explicit AvgPool2d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0);
  using Cell::forward;
  Tensor forward(const Tensor& x) override;

  const int64_t kernel_size, stride, padding;
};

}  // namespace minidl::nn
