// Conv2d and 2-D pooling cells, NCHW.
#pragma once
#include <string>

#include "nn/cell.h"
#include "nn/init.h"

namespace minidl::nn {

struct Conv2dOptions {
  int64_t stride = 1;
  int64_t padding = 0;           // zero padding on every side; pad_mode "pad" only
  std::string pad_mode = "pad";  // "pad": use `padding` (PyTorch's default, 0);
                                 // "valid": no padding; "same": padding k/2, so the
                                 // output is H x W (stride 1, odd kernel only)
  bool has_bias = true;
  // Defaults are PyTorch's: U(-1/sqrt(C*K*K), 1/sqrt(C*K*K)) for both.
  Initializer weight_init = "he_uniform";
  Initializer bias_init = "fan_in_uniform";
};

// x [N, C, H, W] -> [N, OC, OH, OW], OH = (H + 2 padding - K) / stride + 1.
// Parameters: weight [OC, C, K, K], bias [OC] (absent without has_bias).
// Bad options (unknown pad_mode, "same" with stride > 1 or an even kernel,
// padding with "same"/"valid") throw minidl::Error at construction.
class Conv2d : public Cell {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
         Conv2dOptions options = {});
  using Cell::forward;
  Tensor forward(const Tensor& x) override;
  // max_pool2d(relu(forward(x)), pool) -> [N, OC, OH/pool, OW/pool] through
  // the op conv2d_relu_max_pool2d: the same numbers, and for pool 2 on the CPU
  // one fused kernel (framework/ops.h). Recorded as this cell's, like forward.
  Tensor relu_max_pool(const Tensor& x, int64_t pool);

  const int64_t in_channels, out_channels, kernel_size, stride, padding;
  Tensor weight, bias;

 private:
  void check_input(const Tensor& x) const;
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
