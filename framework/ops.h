// Functional ops with autograd. Each is defined, forward and backward side by
// side, in framework/ops/*.cpp. Float ops compute in float32; float16 inputs
// are computed in float32 and the result cast back to float16.
// Every shape or dtype error throws minidl::Error naming the op and both sides.
#pragma once
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
// In general torch.matmul's rules: batch dims (all but the last two) broadcast,
// [..., M, K] x [..., K, N] -> [broadcast(...), M, N]; a 1-D left operand [K]
// is a row [1, K] and a 1-D right one a column [K, 1], that dim dropped from
// the result ([K] x [K] -> a 0-d dot). The flags apply to operands of 2+ dims.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
// x [N, IN] . w[OUT, IN]^T + b [OUT] -> [N, OUT] (bias may be undefined).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);

// ---- softmax family, along `dim` (numerically stable) ----
Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);

// ---- convolution and pooling, NCHW ----
struct Conv2dArgs {
  int64_t stride = 1;
  int64_t padding = 0;  // zero padding on every side
};
// x [N, C, H, W], w [OC, C, KH, KW], b [OC] or undefined -> [N, OC, OH, OW]
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
// dims start_dim..end_dim merged into one (a view)
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
// stably; one pass forward, one pass backward (no intermediate graph).
Tensor cross_entropy(const Tensor& logits, const Tensor& labels);

// ---- shape and indexing ops, any dim (issue 22) ----
// Negative dims count from the end. Views share storage (reshape-like ops,
// and narrow/slice where the block is contiguous); the rest copy. Errors name
// the op, the shapes and what was expected.
// x [d0, ..., dn] -> [d_dims[0], ..., d_dims[n]] (a copy)
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
// x [.., D, ..] -> [.., length, ..] from `start` (negative: from the end); a
// view when every dim before `dim` has size 1, else a copy (torch.narrow)
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
// elements [start, end) of dim, negative counted from the end and clamped to
// [0, size] like a Python slice (step 1); view or copy as narrow
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
// x broadcast to shape (-1 keeps a dim; new dims lead); a copy, backward sums
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

}  // namespace minidl
