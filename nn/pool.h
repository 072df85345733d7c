// Resizing cells (issue 22): AdaptiveAvgPool2d and Upsample, NCHW.
#pragma once
#include <array>
#include <optional>
#include <string>

#include "framework/ops.h"
#include "nn/cell.h"

namespace minidl::nn {

// x [N, C, H, W] -> [N, C, OH, OW] = output_size: the mean over PyTorch's
// adaptive windows (framework/ops.h adaptive_avg_pool2d). No parameters.
class AdaptiveAvgPool2d : public Cell {
 public:
  explicit AdaptiveAvgPool2d(Size2 output_size);
  using Cell::forward;
  Tensor forward(const Tensor& x) override;

  const Size2 output_size;
};

struct UpsampleOptions {
  std::optional<Size2> size = std::nullopt;  // exactly one of size and scale_factor
  std::optional<std::array<double, 2>> scale_factor = std::nullopt;
  std::string mode = "nearest";                      // or "bilinear"
  std::optional<bool> align_corners = std::nullopt;  // "bilinear" only; unset is false
};

// x [N, C, H, W] -> [N, C, OH, OW] by interpolate (framework/ops.h): nearest
// neighbours or bilinear at `size`, or at floor(H * scale_factor) x
// floor(W * scale_factor). Options other than one of size and scale_factor,
// mode "nearest" or "bilinear", and align_corners with "bilinear" only throw
// minidl::Error at construction.
class Upsample : public Cell {
 public:
  explicit Upsample(UpsampleOptions options);
  using Cell::forward;
  Tensor forward(const Tensor& x) override;

  const UpsampleOptions options;
};

}  // namespace minidl::nn
