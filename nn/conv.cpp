#include "nn/conv.h"

#include "framework/ops.h"

namespace minidl::nn {
namespace {

std::string conv_name(const char* cls, int64_t in, int64_t out, Size2 k) {
  return cat(cls, "(", in, ", ", out, ", kernel ", k, ")");
}

// One dim's padding for pad_mode "same": dilation*(k-1)/2 when that is exact
int64_t same_padding(const std::string& name, const Conv2dOptions& o, int64_t k, int64_t stride,
                     int64_t dilation) {
  MINIDL_CHECK(stride == 1 && dilation * (k - 1) % 2 == 0, name,
               ": pad_mode \"same\" needs stride 1 and an odd kernel, got stride ", o.stride,
               " and kernel ", k, o.dilation == Size2(1) ? "" : cat(" dilated by ", o.dilation),
               " (use pad_mode \"pad\")");
  return dilation * (k - 1) / 2;
}

Size2 resolve_padding(int64_t in, int64_t out, Size2 k, const Conv2dOptions& o) {
  const std::string name = conv_name("Conv2d", in, out, k);
  if (o.pad_mode == "pad") {
    MINIDL_CHECK(o.padding.h >= 0 && o.padding.w >= 0, name, ": expected padding >= 0, got ",
                 o.padding);
    return o.padding;
  }
  MINIDL_CHECK(o.pad_mode == "same" || o.pad_mode == "valid", name, ": unknown pad_mode '",
               o.pad_mode, "' (expected \"same\", \"valid\" or \"pad\")");
  MINIDL_CHECK(o.padding == Size2(0), name, ": padding ", o.padding,
               " needs pad_mode \"pad\", got \"", o.pad_mode, "\"");
  if (o.pad_mode == "valid") return 0;
  return {same_padding(name, o, k.h, o.stride.h, o.dilation.h),
          same_padding(name, o, k.w, o.stride.w, o.dilation.w)};
}

// The checks every convolution cell makes of its sizes (name: the cell, for errors)
void check_conv_options(const std::string& name, int64_t in, int64_t out, Size2 k, Size2 stride,
                        Size2 dilation, int64_t groups) {
  MINIDL_CHECK(in > 0 && out > 0 && k.h > 0 && k.w > 0 && stride.h > 0 && stride.w > 0, name,
               ": expected positive channels, kernel and stride, got in ", in, ", out ", out,
               ", kernel ", k, ", stride ", stride);
  MINIDL_CHECK(dilation.h > 0 && dilation.w > 0 && groups > 0 && in % groups == 0 &&
                   out % groups == 0,
               name, ": expected dilation >= 1 and groups >= 1 dividing both channel counts, got "
               "dilation ", dilation, " and groups ", groups);
}

}  // namespace

Conv2d::Conv2d(int64_t in, int64_t out, Size2 k, Conv2dOptions opt)
    : in_channels(in),
      out_channels(out),
      kernel_size(k),
      stride(opt.stride),
      padding(resolve_padding(in, out, k, opt)),
      dilation(opt.dilation),
      groups(opt.groups) {
  check_conv_options(conv_name("Conv2d", in, out, k), in, out, k, stride, dilation, groups);
  add_weight_and_bias(*this, {out, in / groups, k.h, k.w}, opt.weight_init, opt.bias_init,
                      opt.has_bias, weight, bias);
}

Conv2dArgs Conv2d::args() const {
  return {.stride = stride, .padding = padding, .dilation = dilation, .groups = groups};
}

void Conv2d::check_input(const Tensor& x) const {
  MINIDL_CHECK(x.dim() == 4 && x.size(1) == in_channels, "Conv2d(", in_channels, ", ", out_channels,
               ", kernel ", kernel_size, "): expected input [N, ", in_channels, ", H, W], got ",
               x.shape());
}

// x [N, C, H, W] -> [N, OC, OH, OW]
Tensor Conv2d::forward(const Tensor& x) {
  check_input(x);
  return conv2d(x, weight, bias, args());
}

// x [N, C, H, W] -> [N, OC, OH/pool, OW/pool]
Tensor Conv2d::relu_max_pool(const Tensor& x, int64_t pool) {
  check_input(x);
  auto run = [&] { return conv2d_relu_max_pool2d(x, weight, bias, args(), pool); };
  if (!scope_tracking()) return run();
  CallScope scope(*this);
  return run();
}

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, Size2 k, ConvTranspose2dOptions o)
    : in_channels(in),
      out_channels(out),
      kernel_size(k),
      args{.stride = o.stride, .padding = o.padding, .output_padding = o.output_padding,
           .dilation = o.dilation, .groups = o.groups} {
  const std::string name = conv_name("ConvTranspose2d", in, out, k);
  check_conv_options(name, in, out, k, o.stride, o.dilation, o.groups);
  const Size2 s = o.stride, d = o.dilation, q = o.output_padding;
  MINIDL_CHECK(o.padding.h >= 0 && o.padding.w >= 0 && q.h >= 0 && q.w >= 0 &&
                   (q.h < s.h || q.h < d.h) && (q.w < s.w || q.w < d.w),
               name, ": expected padding >= 0 and 0 <= output_padding < stride or dilation, got "
               "padding ", o.padding, ", output_padding ", q, ", stride ", s, " and dilation ", d);
  // weight [C, OC/G, KH, KW]; the bias [OC] takes the weight's fans, as PyTorch's does
  weight = Tensor::empty({in, out / o.groups, k.h, k.w});
  const init::Fans fans = init::fans_of(weight.shape());
  o.weight_init(weight, fans);
  register_parameter("weight", weight);
  if (!o.has_bias) return;
  bias = Tensor::empty({out});
  o.bias_init(bias, fans);
  register_parameter("bias", bias);
}

// x [N, C, H, W] -> [N, OC, OH, OW]
Tensor ConvTranspose2d::forward(const Tensor& x) {
  MINIDL_CHECK(x.dim() == 4 && x.size(1) == in_channels,
               conv_name("ConvTranspose2d", in_channels, out_channels, kernel_size),
               ": expected input [N, ", in_channels, ", H, W], got ", x.shape());
  return conv_transpose2d(x, weight, bias, args);
}

Conv1d::Conv1d(int64_t in, int64_t out, int64_t k, Conv1dOptions o)
    : in_channels(in),
      out_channels(out),
      kernel_size(k),
      args{.stride = o.stride, .padding = o.padding, .dilation = o.dilation, .groups = o.groups} {
  const std::string name = conv_name("Conv1d", in, out, k);
  check_conv_options(name, in, out, Size2(1, k), o.stride, o.dilation, o.groups);
  MINIDL_CHECK(o.padding >= 0, name, ": expected padding >= 0, got ", o.padding);
  add_weight_and_bias(*this, {out, in / o.groups, k}, o.weight_init, o.bias_init, o.has_bias,
                      weight, bias);
}

// x [N, C, L] -> [N, OC, OL]
Tensor Conv1d::forward(const Tensor& x) {
  MINIDL_CHECK(x.dim() == 3 && x.size(1) == in_channels,
               conv_name("Conv1d", in_channels, out_channels, kernel_size),
               ": expected input [N, ", in_channels, ", L], got ", x.shape());
  return conv1d(x, weight, bias, args);
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
