#include "nn/pool.h"

namespace minidl::nn {

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Size2 size) : output_size(size) {
  MINIDL_CHECK(size.h >= 1 && size.w >= 1, "AdaptiveAvgPool2d: expected an output size >= 1, got ",
               size);
}

// x [N, C, H, W] -> [N, C, OH, OW]
Tensor AdaptiveAvgPool2d::forward(const Tensor& x) { return adaptive_avg_pool2d(x, output_size); }

Upsample::Upsample(UpsampleOptions o) : options(std::move(o)) {
  MINIDL_CHECK(options.mode == "nearest" || options.mode == "bilinear", "Upsample: mode '",
               options.mode, "' is not supported (expected \"nearest\" or \"bilinear\")");
  MINIDL_CHECK(options.mode == "bilinear" || !options.align_corners.has_value(),
               "Upsample: align_corners can only be set with mode \"bilinear\", got mode '",
               options.mode, "'");
  MINIDL_CHECK(options.size.has_value() != options.scale_factor.has_value(),
               "Upsample: expected exactly one of size and scale_factor");
  if (options.size)
    MINIDL_CHECK(options.size->h >= 1 && options.size->w >= 1,
                 "Upsample: expected a size >= 1, got ", *options.size);
  if (options.scale_factor)
    MINIDL_CHECK((*options.scale_factor)[0] > 0 && (*options.scale_factor)[1] > 0,
                 "Upsample: expected a positive scale_factor, got (", (*options.scale_factor)[0],
                 ", ", (*options.scale_factor)[1], ")");
}

// x [N, C, H, W] -> [N, C, OH, OW]
Tensor Upsample::forward(const Tensor& x) {
  return interpolate(x, {.size = options.size,
                         .scale_factor = options.scale_factor,
                         .mode = options.mode,
                         .align_corners = options.align_corners});
}

}  // namespace minidl::nn
