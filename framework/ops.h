// Functional ops with autograd. Each is defined, forward and backward side by
// side, in framework/ops/*.cpp. Float ops compute in float32; float16 inputs
// are computed in float32 and the result cast back to float16.
// Every shape or dtype error throws minidl::Error naming the op and both sides.
#pragma once
#include <array>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
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
// e^x and log x: on the CPU within 1e-7 and 3e-7 relative of the exact
// values, infinities, zeros and subnormals included (cpu/vec_math.h, which
// vectorizes; tests/framework/test_activation.cpp), not glibc's expf and logf
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
Tensor sqrt(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
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

// ---- linear algebra (the device's GEMM: OpenBLAS or oneDNN, cuBLAS) ----
// op(a) x op(b), op(t) = t, or t with its last two dims swapped where the
// flag is set (no copy: the GEMM reads it transposed; flashlight's matmulNT/TN):
// op(a) [M, K] x op(b) [K, N] -> [M, N];
// op(a) [B, M, K] x op(b) [B, K, N] -> [B, M, N]; a [B, M, K] x op(b) [K, N] -> [B, M, N].
// In general torch.matmul's rules: batch dims (all but the last two) broadcast,
// [..., M, K] x [..., K, N] -> [broadcast(...), M, N]; a 1-D left operand [K]
// is a row [1, K] and a 1-D right one a column [K, 1], that dim dropped from
// the result ([K] x [K] -> a 0-d dot). The flags apply to operands of 2+ dims.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
// x [N, IN] . w[OUT, IN]^T + b [OUT] -> [N, OUT] (bias may be undefined).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b);
// x with dims d0 and d1 swapped (a view)
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);

// ---- softmax family, along `dim` (numerically stable) ----
Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);
// Attention's scores x [..., L, S] -> softmax(x * scale) along the last dim,
// with scale rounded to float32 as x * scale takes it; causal: column j of
// row i (of the last two dims) takes no part where j > i (weight 0, PyTorch's
// is_causal). softmax(masked_fill(x * scale, triu(ones({L, S}), 1), -inf))
// up to rounding (tests/framework/test_softmax.cpp), in one kernel each way.
Tensor scaled_softmax(const Tensor& x, double scale, bool causal);

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
// x's elements in row-major order with `shape` (one dim may be -1): a view
// when x's strides allow it (always for a contiguous x), else a copy
Tensor reshape(const Tensor& x, const Shape& shape);
// dims start_dim..end_dim merged into one (as reshape)
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
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
// stably; one pass forward, one pass backward (no intermediate graph). Also
// logits [N, C, d1, ...] with labels [N, d1, ...] (a class for each position,
// as in segmentation): the softmax over C, the mean over all positions.
Tensor cross_entropy(const Tensor& logits, const Tensor& labels);

// ---- shape and indexing ops, any dim (issue 22) ----
// Negative dims count from the end. Views share storage, as in PyTorch:
// permute, transpose, narrow/slice, split/chunk, expand, squeeze/unsqueeze,
// and reshape/flatten/unflatten where the strides allow (else a copy); cat,
// stack and pad copy. Errors name the op, the shapes and what was expected.
// x -> x itself when contiguous, else a row-major copy (gradient: identity)
Tensor contiguous(const Tensor& x);
// x [d0, ..., dn] -> [d_dims[0], ..., d_dims[n]] (a view)
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
// x [.., D, ..] -> [.., length, ..] from `start` (negative: from the end), a
// view (torch.narrow)
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
// elements [start, end) of dim, negative counted from the end and clamped to
// [0, size] like a Python slice (step 1); a view
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end);
// pieces of split_size along dim, the last one smaller if need be
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
// pieces of the given sizes (they must sum to x.size(dim))
std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes,
                                     int64_t dim = 0);
// at most `chunks` pieces of ceil(size / chunks) (torch.chunk)
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
// xs[i] [.., Di, ..] -> [.., sum Di, ..]; shapes agree outside dim
Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
// so that cat(xs, 1) picks this over error.h's string cat(args...)
inline Tensor cat(const std::vector<Tensor>& xs, int dim) { return cat(xs, int64_t{dim}); }
// xs[i] [S] (all alike) -> [.., len(xs), ..] with the new dim at `dim`
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);
// views: a new dim of size 1 at dim in [-(n+1), n]; dim (or every dim) of
// size 1 removed (a dim of another size stays)
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor squeeze(const Tensor& x);
// x [.., D, ..] -> [.., sizes.., ..] with prod(sizes) = D (one may be -1); a view
Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes);
// x broadcast to shape (-1 keeps a dim; new dims lead); a view with stride 0
// on the broadcast dims (not writable), backward sums
Tensor expand(const Tensor& x, const Shape& shape);
// x [.., D, ..], index [I] int32/int64 in [0, D) -> [.., I, ..]; backward adds
// the gradient rows back at their indices (index_add)
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// x where mask (broadcast to x; float32 nonzero, int32 or int64) is false,
// else value; float32 x
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// cond ? a : b elementwise, all three broadcast (cond float32 nonzero, int32
// or int64; a, b float32). The unchosen side never reaches the result or the
// gradient, NaN and inf included.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// ---- math (issue 22): elementwise, reductions, activations, losses ----
// Comparisons, broadcasting, on every dtype: 1 where `a op b` holds, else 0,
// as float32 (there is no bool dtype), no gradient. Two dtypes meet in the
// wider one (float beats int, float32 beats float16, int64 beats int32);
// integers compare exactly (int64 ids above 2^24 included); NaN compares
// unequal to everything. The double forms compare with a scalar.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
// Unary maps with gradients: |x| (gradient sign(x), 0 at 0), erf, exp(x) - 1,
// log(1 + x), 1 / sqrt(x), sin, cos.
Tensor abs(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
// x limited to [min, max]; either bound may be absent (not both). Gradient 1
// where min <= x <= max, else 0 (torch.clamp); NaN stays NaN.
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
// Elementwise larger / smaller of a and b, broadcasting; NaN wins. The
// gradient goes to the side that won, half to each side on ties (torch.maximum).
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

// Reductions (dims empty = all dims). min: gradient split evenly between tied
// minima (torch.amin).
Tensor min(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// Index of the smallest value along the last dim: [N, C] -> [N] int64 (no grad).
Tensor argmin(const Tensor& x);
// Index of the first largest (smallest) value along dim -> x's shape without
// dim (kept as 1 with keepdim), int64, no gradient.
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
// Variance and standard deviation over dims: sum((x - mean)^2) / (n - 1) with
// unbiased (Bessel's correction), / n without (torch.var / torch.std).
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, bool unbiased = true,
           bool keepdim = false);
Tensor std(const Tensor& x, const std::vector<int64_t>& dims = {}, bool unbiased = true,
           bool keepdim = false);
// log(sum(exp(x))) over dims, stable: max + log(sum(exp(x - max))); rows of
// -inf give -inf, a +inf gives +inf. Gradient softmax(x).
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
// Vector p-norm over dims (all when empty): p = 2 (the default), 1, inf
// (max |x|, gradient split between ties) or any p > 0: sum(|x|^p)^(1/p).
// The gradient at an all-zero x is 0 (torch.linalg.vector_norm).
Tensor norm(const Tensor& x, double p = 2, const std::vector<int64_t>& dims = {},
            bool keepdim = false);

// Activations (framework/ops/activation.cpp), x [...] -> [...], PyTorch's
// definitions and gradients:
// x where x > 0, else negative_slope * x
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
// x * Phi(x): approximate "none" uses erf, "tanh" the tanh approximation
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
// x * sigmoid(x)
Tensor silu(const Tensor& x);
// x where x > 0, else alpha * (exp(x) - 1)
Tensor elu(const Tensor& x, double alpha = 1);
// log(1 + exp(beta * x)) / beta, x itself where beta * x > threshold
Tensor softplus(const Tensor& x, double beta = 1, double threshold = 20);
// clamp(x, min_val, max_val); gradient 1 strictly inside, 0 at and beyond the bounds
Tensor hardtanh(const Tensor& x, double min_val = -1, double max_val = 1);
// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), finite for any x
Tensor log_sigmoid(const Tensor& x);

// Losses (framework/ops/loss.cpp). reduction: "none" (per element), "mean"
// (the default) or "sum"; anything else throws. weight: undefined (Tensor())
// for none. Weights get no gradient, targets none except where noted.
// p, target [...] in [0, 1], weight broadcast to p:
// -weight * (target * log(p) + (1 - target) * log(1 - p)), each log clamped
// at -100 (finite at p = 0 and 1); its gradient's denominator p (1 - p) is
// clamped at 1e-12 as in PyTorch. Also differentiable in target.
Tensor binary_cross_entropy(const Tensor& p, const Tensor& target, const Tensor& weight = {},
                            const std::string& reduction = "mean");
// The same on logits x, stable for any x: with lw = 1 + (pos_weight - 1) * target,
// weight * ((1 - target) * x + lw * log(1 + exp(-x))); pos_weight [C]
// broadcasts over the last dim. Also differentiable in target.
Tensor binary_cross_entropy_with_logits(const Tensor& x, const Tensor& target,
                                        const Tensor& weight = {}, const Tensor& pos_weight = {},
                                        const std::string& reduction = "mean");
// logp [N, C] or [N, C, d1, ...] (or [C] with a 0-d target), target [N] or
// [N, d1, ...] int32/int64 in [0, C) or == ignore_index, weight [C]:
// l = -weight[t] * logp[n, t, ...], 0 for ignored targets; mean divides by the
// sum of weight[t] over non-ignored targets.
Tensor nll_loss(const Tensor& logp, const Tensor& target, const Tensor& weight = {},
                int64_t ignore_index = -100, const std::string& reduction = "mean");
// Cross entropy on logits [N, C] or [N, C, d1, ...] against class indices
// (PyTorch 1.13's F.cross_entropy): nll_loss(log_softmax(logits, 1), ...),
// with label_smoothing eps mixing in the uniform distribution:
// (1 - eps) * nll + eps / C * smooth, smooth = -sum_c weight[c] * logp[n, c]
// (0 for ignored targets; mean divides by the same weight sum as nll).
// Without options (no weight, mean, no smoothing), with no target ignored
// and the targets on the CPU, this is the fused cross_entropy above.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight,
                     int64_t ignore_index = -100, const std::string& reduction = "mean",
                     double label_smoothing = 0);
// |x - y|
Tensor l1_loss(const Tensor& x, const Tensor& y, const std::string& reduction = "mean");
// (x - y)^2
Tensor mse_loss(const Tensor& x, const Tensor& y, const std::string& reduction = "mean");
// d = x - y: 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta 0: l1)
Tensor smooth_l1_loss(const Tensor& x, const Tensor& y, const std::string& reduction = "mean",
                      double beta = 1);
// 0.5 d^2 where |d| < delta, else delta * (|d| - 0.5 delta)
Tensor huber_loss(const Tensor& x, const Tensor& y, const std::string& reduction = "mean",
                  double delta = 1);
// input holds log-probabilities: target * (log(target) - input) (0 where
// target is 0), or exp(target) * (target - input) with log_target.
// reduction also "batchmean": the sum over input.size(0).
Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
              bool log_target = false);
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
// x [N, C, H, W] -> [N, C, OH, OW] = output_size, bilinear (PyTorch's
// upsample_bilinear2d): output row i reads input rows i0 = floor(s) and
// i0 + 1 (i0 alone at the last row) with weights 1 - (s - i0) and s - i0,
// s = i (H - 1) / (OH - 1) with align_corners (0 when OH == 1), else
// max(0, (i + 0.5) r - 0.5) with r = 1 / scales.h when scales.h > 0, else
// H / OH; OH == H reads row i with weight 1. Columns alike; r and the
// weights are float, s double, as PyTorch 1.13 computes them on the CPU.
// As there, both taps are always multiplied: an inf input makes NaN where a
// weight 0 meets it. The gradient is the transpose (kernels.h).
Tensor upsample_bilinear2d(const Tensor& x, Size2 output_size, bool align_corners = false,
                           std::array<double, 2> scales = {});
// PyTorch's interpolate for 4-D input, mode "nearest" or "bilinear":
// exactly one of size and scale_factor; the size from scale_factor is
// floor(H * scale_factor.h) (W alike), and the scale is passed on.
// align_corners (false when unset) only with "bilinear".
struct InterpolateArgs {
  std::optional<Size2> size = std::nullopt;
  std::optional<std::array<double, 2>> scale_factor = std::nullopt;
  std::string mode = "nearest";
  std::optional<bool> align_corners = std::nullopt;
};
Tensor interpolate(const Tensor& x, const InterpolateArgs& args);

// x [.., D, ..], index (x's rank, int32/int64 in [0, D), no larger than x
// outside dim) -> [index's shape]: out[.., i, ..] = x[.., index[.., i, ..], ..]
// along dim (torch.gather; float32). Backward: scatter_add.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// x with src added at index along dim (torch.scatter_add; index no larger
// than src, nor than x outside dim; float32). Gradients: x's is g, src's gather(g).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// F.pad, constant mode: pads = (left, right) pairs from the last dim back;
// negative amounts crop. Padding is a copy; the backward cuts it off.
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, double value = 0);
// x [.., R, C] with the elements above (tril) or below (triu) the diagonal
// zeroed; diagonal > 0 moves it right (float32)
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
// ids [S] int32/int64 -> [S, C] int64 one-hot on ids' device; C =
// num_classes, or max(ids) + 1 for -1 (ids are read on the host)
Tensor one_hot(const Tensor& ids, int64_t num_classes = -1);

// ---- batch norm (issue 23) ----
// x [N, C] or [N, C, *] float32 (or float16) -> the same shape; per channel c (dim 1):
//   y = (x - mean_c) / sqrt(var_c + eps) * weight_c + bias_c
// (at::batch_norm's argument order; PyTorch's F.batch_norm semantics).
// training: mean and biased var of the batch over every dim but 1 (more than
// one value per channel needed); running_mean and running_var [C], when given
// (both or neither), are updated in place: (1 - momentum) r + momentum stat,
// the variance unbiased (times n / (n - 1), n = N * prod(*)). Not training:
// the running estimates (required). weight, bias [C] or undefined (1 and 0).
// Fused: one pass over x for the statistics (sums in double) and one for y;
// backward one for the per-channel sums of gy and gy xhat and one for gx
// (gradients of x, weight and bias; not differentiable twice).
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var, bool training,
                  double momentum = 0.1, double eps = 1e-5);

// ---- layer norm ----
// x [R, D] float32 (or float16) -> the same shape; each row normalized by its
// own mean and biased variance (taken in double), then times weight and plus
// bias ([D] or undefined: 1 and 0): y = (x - mean) / sqrt(var + eps) * weight
// + bias. One kernel forward; backward one for gx and two for the weight and
// bias gradients (not differentiable twice). nn's layer_norm and group_norm.
Tensor layer_norm_rows(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
// x [N, C, *] float32 (or float16), C divisible by groups -> the same shape:
// each sample's groups of C / groups channels normalized as layer_norm_rows'
// rows, then times weight[c] and plus bias[c] ([C] or undefined). One kernel
// forward, one backward (not differentiable twice). nn's group_norm.
Tensor group_norm_rows(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias,
                       double eps);

// ---- the LSTM cell's pointwise part (issue 23) ----
// gates [B, 4H] float32 (the pre-activations of i, f, g, o: PyTorch's order),
// c [B, H] -> {h, c'} [B, H]:
//   c' = sigmoid(f) c + sigmoid(i) tanh(g),  h = sigmoid(o) tanh(c')
// One kernel computes both and keeps the activations [B, 5H]; each
// output's backward is one kernel, reading them (not differentiable twice).
// nn::LSTMCell steps with it, as does nn::LSTM with a projection.
std::pair<Tensor, Tensor> lstm_cell_pointwise(const Tensor& gates, const Tensor& c);

// A whole LSTM layer over T steps (nn::LSTM's, without a projection): gx
// [T, B, 4H] float32, the input path's gates of every step with both biases;
// w_hh [4H, H]; h0, c0 [B, H]. Step by step (t = T-1 .. 0 with reverse):
// gates = gx[t] + h w_hh^T, then lstm_cell_pointwise. Returns y [T, B, H] (h
// of every step, in time order), h_n (the last step's h) and c_n [B, H].
// Two kernels a step forward and two backward, where the composed steps took
// a dozen; w_hh's gradient is one GEMM over all steps. Equal to the composed
// steps up to rounding (tests/framework/test_lstm_cell.cpp).
struct LstmLayer {
  Tensor y, h_n, c_n;
};
LstmLayer lstm_layer(const Tensor& gx, const Tensor& w_hh, const Tensor& h0, const Tensor& c0,
                     bool reverse = false);

// A whole GRU layer over T steps (nn::GRU's; nn::GRUCell's with T = 1): gx
// [T, B, 3H] float32, the input path's gates r, z, n of every step with
// b_ih; w_hh [3H, H]; b_hh [3H] or undefined; h0 [B, H]. Step by step
// (t = T-1 .. 0 with reverse): gh = h w_hh^T + b_hh, r = sigmoid(gx_r +
// gh_r), z = sigmoid(gx_z + gh_z), n = tanh(gx_n + r gh_n), h' = (1 - z) n
// + z h, PyTorch's GRU. Returns y [T, B, H] (h of every step, in time
// order) and h_n [B, H]. A GEMM and one kernel a step forward and back;
// w_hh's gradient is one GEMM over all steps. Equal to the steps composed
// of ops up to rounding (tests/framework/test_gru_layer.cpp).
struct GruLayer {
  Tensor y, h_n;
};
GruLayer gru_layer(const Tensor& gx, const Tensor& w_hh, const Tensor& b_hh, const Tensor& h0,
                   bool reverse = false);

}  // namespace minidl
