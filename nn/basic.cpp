#include "nn/basic.h"

#include "framework/ops.h"

namespace minidl::nn {

// x [N, ...] -> [N, prod(...)]
Tensor Flatten::forward(const Tensor& x) { return flatten(x, start_dim_); }

Dropout::Dropout(double p) : p_(p) {
  MINIDL_CHECK(p >= 0 && p < 1, "Dropout: expected drop probability 0 <= p < 1, got ", p);
}

Tensor Dropout::forward(const Tensor& x) { return is_training() && p_ > 0 ? dropout(x, p_) : x; }

}  // namespace minidl::nn
