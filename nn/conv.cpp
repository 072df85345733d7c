#include "nn/conv.h"

#include "framework/ops.h"

namespace minidl::nn {
namespace {

int64_t resolve_padding(int64_t in, int64_t out, int64_t k, const Conv2dOptions& o) {
  const std::string name = cat("Conv2d(", in, ", ", out, ", kernel ", k, ")");
  if (o.pad_mode == "pad") {
    MINIDL_CHECK(o.padding >= 0, name, ": expected padding >= 0, got ", o.padding);
    return o.padding;
  }
  MINIDL_CHECK(o.pad_mode == "same" || o.pad_mode == "valid", name, ": unknown pad_mode '",
               o.pad_mode, "' (expected \"same\", \"valid\" or \"pad\")");
  MINIDL_CHECK(o.padding == 0, name, ": padding ", o.padding, " needs pad_mode \"pad\", got \"",
               o.pad_mode, "\"");
  if (o.pad_mode == "valid") return 0;
  MINIDL_CHECK(o.stride == 1 && k % 2 == 1, name,
               ": pad_mode \"same\" needs stride 1 and an odd "
               "kernel, got stride ",
               o.stride, " and kernel ", k, " (use pad_mode \"pad\")");
  return k / 2;
}

}  // namespace

Conv2d::Conv2d(int64_t in, int64_t out, int64_t k, Conv2dOptions opt)
    : in_channels(in),
      out_channels(out),
      kernel_size(k),
      stride(opt.stride),
      padding(resolve_padding(in, out, k, opt)) {
  MINIDL_CHECK(in > 0 && out > 0 && k > 0 && stride > 0,
               "Conv2d: expected positive channels, "
               "kernel and stride, got in ",
               in, ", out ", out, ", kernel ", k, ", stride ", stride);
  add_weight_and_bias(*this, {out, in, k, k}, opt.weight_init, opt.bias_init, opt.has_bias, weight,
                      bias);
}

void Conv2d::check_input(const Tensor& x) const {
  MINIDL_CHECK(x.dim() == 4 && x.size(1) == in_channels, "Conv2d(", in_channels, ", ", out_channels,
               ", kernel ", kernel_size, "): expected input [N, ", in_channels, ", H, W], got ",
               x.shape());
}

// x [N, C, H, W] -> [N, OC, OH, OW]
Tensor Conv2d::forward(const Tensor& x) {
  check_input(x);
  return conv2d(x, weight, bias, {.stride = stride, .padding = padding});
}

// x [N, C, H, W] -> [N, OC, OH/pool, OW/pool]
Tensor Conv2d::relu_max_pool(const Tensor& x, int64_t pool) {
  check_input(x);
  auto run = [&] {
    return conv2d_relu_max_pool2d(x, weight, bias, {.stride = stride, .padding = padding}, pool);
  };
  if (!scope_tracking()) return run();
  CallScope scope(*this);
  return run();
}

// The pools' arguments: kernel > 0, stride >= 0 (0: the kernel), 0 <= padding <= kernel/2.
static void check_pool(const char* name, int64_t k, int64_t s, int64_t p) {
  MINIDL_CHECK(k > 0 && (s ? s : k) > 0 && p >= 0 && 2 * p <= k, name,
               ": expected kernel > 0, stride >= 0 and 0 <= padding <= kernel/2, got kernel ", k,
               ", stride ", s, ", padding ", p);
}

MaxPool2d::MaxPool2d(int64_t k, int64_t s, int64_t p)
    : kernel_size(k), stride(s ? s : k), padding(p) {
  check_pool("MaxPool2d", k, s, p);
}

// x [N, C, H, W] -> [N, C, OH, OW]
Tensor MaxPool2d::forward(const Tensor& x) { return max_pool2d(x, kernel_size, stride, padding); }

AvgPool2d::AvgPool2d(int64_t k, int64_t s, int64_t p)
    : kernel_size(k), stride(s ? s : k), padding(p) {
  check_pool("AvgPool2d", k, s, p);
}

// x [N, C, H, W] -> [N, C, OH, OW]
Tensor AvgPool2d::forward(const Tensor& x) { return avg_pool2d(x, kernel_size, stride, padding); }

}  // namespace minidl::nn
