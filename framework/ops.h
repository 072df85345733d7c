// Functional ops with autograd. Each is defined, forward and backward side by
// side, in framework/ops/*.cpp. Float ops compute in float32; float16 inputs
// are computed in float32 and the result cast back to float16.
// Every shape or dtype error throws minidl::Error naming the op and both sides.
#pragma once
#include <array>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "framework/autograd.h"
#include "framework/tensor.h"

namespace minidl {

// ---- elementwise (binary ops broadcast like NumPy) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
Tensor sqrt(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
// 1 where a == b, else 0 (float32, broadcasting, no gradient): torch.eq as float
Tensor eq(const Tensor& a, const Tensor& b);
Tensor scalar_like(double value, const Tensor& like);  // 0-d tensor of like's dtype
Shape broadcast_shape(const Shape& a, const Shape& b, const char* op);
// Sums `grad` down to `shape` (the inverse of broadcasting).
Tensor sum_to(const Tensor& grad, const Shape& shape);

// ---- reductions (dims empty = all dims) ----
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor max(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// Index of the largest value along the last dim: [N, C] -> [N] int64 (no grad).
Tensor argmax(const Tensor& x);

// ---- linear algebra (cblas_sgemm) ----
// op(a) x op(b), op(t) = t, or t with its last two dims swapped where the
// flag is set (no copy: the GEMM reads it transposed; flashlight's matmulNT/TN):
// op(a) [M, K] x op(b) [K, N] -> [M, N];
// op(a) [B, M, K] x op(b) [B, K, N] -> [B, M, N]; a [B, M, K] x op(b) [K, N] -> [B, M, N].
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
// x [N, IN] . w[OUT, IN]^T + b [OUT] -> [N, OUT] (bias may be undefined).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);

// ---- softmax family, along `dim` (numerically stable) ----
Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);

// ---- convolution and pooling, NCHW ----
// One size for both spatial dims, or (height, width): {.stride = 2} or
// {.stride = {2, 1}} (PyTorch's ExpandingArray<2>). Prints as 2 or (2, 1).
struct Size2 {
  int64_t h, w;
  // an integer (or what converts to one, e.g. a JSON number) is both dims
  template <class T>
    requires(std::is_convertible_v<const T&, int64_t> && !std::is_floating_point_v<T>)
  Size2(const T& v) : h(static_cast<int64_t>(v)), w(h) {}  // NOLINT: implicit on purpose
  Size2(int64_t h_, int64_t w_) : h(h_), w(w_) {}
  friend bool operator==(const Size2&, const Size2&) = default;
};
std::ostream& operator<<(std::ostream& os, const Size2& s);
struct Conv2dArgs {
  Size2 stride = 1;
  Size2 padding = 0;  // zero padding on both sides of each dim
  Size2 dilation = 1;
  int64_t groups = 1;  // C and OC split into `groups` parts, part i of y seeing part i of x
};
// x [N, C, H, W], w [OC, C/groups, KH, KW], b [OC] or undefined -> [N, OC, OH, OW],
// OH = (H + 2 padding.h - dilation.h (KH - 1) - 1) / stride.h + 1 (OW alike).
// C and OC must be divisible by groups.
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, Conv2dArgs args = {});
// max_pool2d(relu(conv2d(x, w, b, args)), pool) -> [N, OC, OH/pool, OW/pool],
// the same bits and gradients as those three ops (tested). For pool 2 on the
// CPU, with stride 1 and batches of 16 and more, one fused kernel: the
// convolution's output goes through relu and pooling before it leaves the
// registers' layout, and the backward builds the convolution's output
// gradient from the pooled one in one pass. Otherwise the three ops.
Tensor conv2d_relu_max_pool2d(const Tensor& x, const Tensor& w, const Tensor& b, Conv2dArgs args,
                              int64_t pool);
// x [N, C, H, W] -> [N, C, OH, OW]; stride 0 means stride = kernel.
Tensor max_pool2d(const Tensor& x, int64_t kernel, int64_t stride = 0, int64_t padding = 0);
Tensor avg_pool2d(const Tensor& x, int64_t kernel, int64_t stride = 0, int64_t padding = 0);

// ---- shape ops ----
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor flatten(const Tensor& x, int64_t start_dim = 0);
Tensor concat(const std::vector<Tensor>& xs);  // along dim 0
Tensor slice(const Tensor& x, int64_t start, int64_t end);  // rows of dim 0
// x [N, C], labels [N] (int32/int64) -> [N]: out[i] = x[i, labels[i]].
Tensor gather(const Tensor& x, const Tensor& labels);
// x -> x converted to dtype. Float to integer truncates toward zero and
// saturates as CUDA does on every device: NaN -> 0, +-inf and values beyond
// the integer's range -> its max or min (PyTorch leaves these undefined).
Tensor cast(const Tensor& x, DType dtype);
// Where a uniform draw is below p: 0, else x / (1 - p).
Tensor dropout(const Tensor& x, double p);

// ---- losses (framework/ops/loss.cpp) ----
// Fused softmax cross entropy: logits [N, C] float32, labels [N] int32/int64
// in [0, C) -> scalar mean_i(-log_softmax(logits)[i, labels[i]]), computed
// stably; one pass forward, one pass backward (no intermediate graph).
Tensor cross_entropy(const Tensor& logits, const Tensor& labels);

// ---- convolution family and resizing (issue 22), NCHW ----
struct ConvTranspose2dArgs {
  Size2 stride = 1;
  Size2 padding = 0;         // removed from both sides of each output dim
  Size2 output_padding = 0;  // added to the bottom and right; below stride or dilation
  Size2 dilation = 1;
  int64_t groups = 1;
};
// x [N, C, H, W], w [C, OC/groups, KH, KW], b [OC] or undefined -> [N, OC, OH, OW],
// OH = (H - 1) stride.h - 2 padding.h + dilation.h (KH - 1) + output_padding.h + 1
// (OW alike): the gradient of conv2d with respect to its input, by col2im
// (PyTorch's conv_transpose2d). C must be divisible by groups.
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& b,
                        ConvTranspose2dArgs args = {});
struct Conv1dArgs {
  int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
};
// x [N, C, L], w [OC, C/groups, K], b [OC] or undefined -> [N, OC, OL],
// OL = (L + 2 padding - dilation (K - 1) - 1) / stride + 1: conv2d with H = 1.
Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, Conv1dArgs args = {});
// x [N, C, H, W] -> [N, C, OH, OW]: output (i, j) is the mean of input rows
// floor(i H / OH) .. ceil((i + 1) H / OH) - 1 and the columns alike
// (PyTorch's windows), as two products with averaging matrices (an inf or
// NaN anywhere in a row or column of the input reaches every output of it).
Tensor adaptive_avg_pool2d(const Tensor& x, Size2 output_size);
// x [N, C, H, W] -> [N, C, OH, OW] = output_size, nearest: output row i reads
// input row i (OH == H), i / 2 (OH == 2H), else min(floor(i * s), H - 1) in
// float with s = 1 / scales.h when scales.h > 0, else H / OH (PyTorch's
// nearest_idx); columns alike. The gradient sums over the copies.
Tensor upsample_nearest2d(const Tensor& x, Size2 output_size, std::array<double, 2> scales = {});
// PyTorch's interpolate for 4-D input and mode "nearest" (the only mode):
// exactly one of size and scale_factor; the size from scale_factor is
// floor(H * scale_factor.h) (W alike), and the scale is passed on.
struct InterpolateArgs {
  std::optional<Size2> size = std::nullopt;
  std::optional<std::array<double, 2>> scale_factor = std::nullopt;
  std::string mode = "nearest";
};
Tensor interpolate(const Tensor& x, const InterpolateArgs& args);

}  // namespace minidl
