// The device seam's compute half: one table of raw-pointer kernels per device
// (its memory is backend/allocator.h; the registry, backend/backend.h).
//
// Op front ends (framework/ops/*.cpp) check arguments, compute shapes and
// record the backward; the loops behind them are entries of this table, filled
// by framework/backend/cpu (always) and framework/backend/cuda (when built).
// Every pointer an entry takes lives on that table's device, except where an
// entry says "host". Arrays are contiguous and row-major. Entries never throw
// for a valid call; the front ends have checked shapes, dtypes and devices.
// Letters: N batch, C channels, H W input size, KH KW kernel, OH OW output
// size, OC output channels, L = OH*OW.
#pragma once
#include <cstddef>
#include <cstdint>

#include "framework/dtype.h"

namespace minidl {

// out = f(x, s): Pow x^s; PowGrad s*x^(s-1); Rsqrt 1/sqrt(x); Erf, Expm1
// (exp(x) - 1), Log1p (log(1 + x)) as in <cmath>; LeakyRelu with slope s
// and LeakyReluSlope its derivative (1 or s), Gelu, GeluTanh and Silu; Elu
// with alpha s and EluSlope its derivative; Softplus of z = beta x with
// threshold s and SoftplusSlope its derivative in z; SmoothL1 of a
// difference with beta s and SmoothL1Grad its derivative
// (backend/activations.h).
enum class UnaryOp { Neg, Exp, Log, Sqrt, Relu, Sigmoid, Tanh, Pow, PowGrad,
                     Abs, Erf, Expm1, Log1p, Rsqrt, Sin, Cos,
                     LeakyRelu, LeakyReluSlope, Gelu, GeluTanh, Silu,
                     Elu, EluSlope, Softplus, SoftplusSlope, SmoothL1, SmoothL1Grad };
// out = f(a, b); the *Grad ops take (gradient, forward output):
// ReluGrad g*[y > 0], SigmoidGrad g*y*(1-y), TanhGrad g*(1-y*y); Equal [a == b];
// Maximum, Minimum propagate NaN from either side (torch.maximum); GeluGrad,
// GeluTanhGrad and SiluGrad take (gradient, forward input). BceLogits takes
// (logit x, target t): binary cross entropy on logits, and BceLogitsGrad its
// derivative in x, sigmoid(x) - t (backend/activations.h).
enum class BinaryOp { Add, Sub, Mul, Div, Equal, ReluGrad, SigmoidGrad, TanhGrad,
                      Maximum, Minimum, GeluGrad, GeluTanhGrad, SiluGrad,
                      BceLogits, BceLogitsGrad };
// out = [a op b] as 1 or 0 (NaN compares unequal to everything, as in C++).
enum class CompareOp { Eq, Ne, Lt, Le, Gt, Ge };
enum class ReduceOp { Sum, Max };  // Max propagates NaN
// A loss of a difference d (diff_loss): Square d^2 (f' 2d); SmoothL1
// act::smooth_l1 with beta s (f' act::smooth_l1_grad), backend/activations.h.
enum class DiffLoss { Square, SmoothL1 };
enum class UpdateRule { SGD, Momentum, Adam, RMSprop };

// A broadcast binary op's index map, dims coalesced by the front end: out has
// dims size[0..nd), and a (b) advances stride_a[d] (stride_b[d]) elements per
// step of dim d, 0 where it is broadcast. nd == 0: n elements, same shape.
inline constexpr int kMaxDims = 12;
struct Broadcast {
  int64_t n = 0;  // elements of out
  int nd = 0;
  int64_t size[kMaxDims] = {}, stride_a[kMaxDims] = {}, stride_b[kMaxDims] = {};
};

// A convolution x [N, C, H, W], w [OC, C/groups, KH, KW] -> y [N, OC, OH, OW]:
// output (oh, ow) reads input (oh*sh - ph + ki*dh, ow*sw - pw + kj*dw), zero
// outside; groups split C and OC into equal parts, part i of y seeing only
// part i of x. OH, OW are given (conv_transpose2d's may be below
// (H + 2ph - dh(KH-1) - 1)/sh + 1 by its output_padding); every window
// starts inside the padded input.
struct ConvGeometry {
  int64_t N, C, H, W, OC, KH, KW;
  int64_t sh, sw, ph, pw, dh, dw, groups;
  int64_t OH, OW;
};
struct PoolGeometry {
  int64_t NC, H, W, K, stride, pad, OH, OW;
};

// One parameter's update: p [n] from g [n] with state m, v, w [n] (Momentum's
// buffer is m; Adam's moments m and v; RMSprop's square average v, momentum
// buffer m (momentum > 0) and gradient average w (centered)). step: the
// 1-based count of this parameter's updates including this one (Momentum: 1
// initialises m; Adam: the bias corrections' t).
struct UpdateSlice {
  float* p;
  const float* g;
  float* m;
  float* v;
  int64_t n, step;
  float* w = nullptr;
};
// The rules' hyperparameters (PyTorch's update formulas; see optim/*.h).
struct UpdateArgs {
  double lr = 0, weight_decay = 0;
  double momentum = 0, dampening = 0;  // Momentum
  bool nesterov = false;
  double beta1 = 0, beta2 = 0, eps = 0;  // Adam
  bool decoupled = false;                // AdamW
  double alpha = 0;                      // RMSprop: the square average's smoothing
  bool centered = false;                 // RMSprop: divide by the gradient's variance
  // ---- rnn-optim (issue 22) ----
  bool maximize = false;  // every rule: ascend, the gradient negated first (PyTorch's maximize)
};

// ---- shape ops (issue 22) ----
// A strided copy's index map: element idx (over dims size[0..nd)) goes from
// src + sum(idx[d] * src_stride[d]) to dst + sum(idx[d] * dst_stride[d]),
// strides in elements (0 = broadcast on the source side).
struct StridedCopy {
  int nd = 0;
  int64_t size[kMaxDims] = {}, src_stride[kMaxDims] = {}, dst_stride[kMaxDims] = {};
};
// where's index map: out [size[0..nd)] contiguous; cond, a, b advance
// stride_c, stride_a, stride_b elements per step of dim d (0 = broadcast).
struct Select {
  int64_t n = 0;  // elements of out
  int nd = 0;
  int64_t size[kMaxDims] = {}, stride_c[kMaxDims] = {}, stride_a[kMaxDims] = {},
          stride_b[kMaxDims] = {};
};
// One axis of a linear resize from `in` to `out` (made by the op, this
// device's memory): output o blends inputs i0[o] <= i1[o] <= i0[o] + 1 with
// weights 1 - l1[o] and l1[o]; input i is read by outputs first[i] ..
// last[i] - 1 and no other (all four int32 arrays nondecreasing).
struct LinearAxis {
  const int32_t* i0 = nullptr;     // [out]
  const int32_t* i1 = nullptr;     // [out]
  const int32_t* first = nullptr;  // [in]
  const int32_t* last = nullptr;   // [in]
  const float* l1 = nullptr;       // [out]
};

struct Kernels {
  // ---- data movement, any dtype ----
  // dst [n] = start + i * step, converted to dtype (step 0: a fill; arange's)
  void (*fill)(DType dtype, int64_t n, double start, double step, void* dst);
  void (*cast)(DType from, DType to, int64_t n, const void* src, void* dst);
  // x [n] int64 += 1, exactly (BatchNorm's num_batches_tracked, on its device)
  void (*increment)(int64_t n, int64_t* x);

  // ---- float32 elementwise and reductions ----
  void (*unary)(UnaryOp op, float s, int64_t n, const float* x, float* out);
  // g, x [n] -> out [n] = g f(x), f the op: a gradient by its derivative's op
  // (LeakyReluSlope, EluSlope, SoftplusSlope, PowGrad) in one pass, not two
  void (*unary_grad)(UnaryOp op, float s, int64_t n, const float* g, const float* x, float* out);
  void (*binary)(BinaryOp op, const Broadcast& bc, const float* a, const float* b, float* out);
  // x [n] -> out [n] = x * (1/keep where kept, else 0), each element kept with
  // probability keep by Philox4x32-10 keyed by seed (backend/philox.h):
  // element i from word i % 4 of block offset + i / 4, so a (seed, offset)
  // gives the same mask on every device. out may be x.
  void (*dropout)(uint64_t seed, uint64_t offset, float keep, int64_t n, const float* x,
                  float* out);
  // x [outer, R, inner] -> out [outer, inner]
  void (*reduce)(ReduceOp op, int64_t outer, int64_t r, int64_t inner, const float* x, float* out);
  // x [outer, R, inner], its max m and m's gradient g [outer, inner] -> gx =
  // (x == m) * (g / ties), ties the count of x == m along R: the gradient
  // split between ties (the bits of that mask, sum, division and product)
  void (*max_backward)(int64_t outer, int64_t r, int64_t inner, const float* x, const float* m,
                       const float* g, float* gx);
  // x [rows, cols] -> out [rows] int64, the first largest column
  void (*argmax)(int64_t rows, int64_t cols, const float* x, int64_t* out);
  // x [outer, D, inner] -> y, softmax (or log_softmax) along D, stable
  void (*softmax)(bool log, int64_t outer, int64_t d, int64_t inner, const float* x, float* y);
  // y (the forward's output), gy [outer, D, inner] -> gx: softmax's
  // y * (gy - sum(gy * y) / sum(y)), log_softmax's gy - exp(y) * sum(gy), the
  // sums in double and gy - sum within a few roundings of its float64 value
  // (on a row with a probability near one, gy - sum cancels: float32 sums
  // leave errors of 1e-5 of the largest element)
  void (*softmax_backward)(bool log, int64_t outer, int64_t d, int64_t inner, const float* y,
                           const float* gy, float* gx);
  // Attention's scores in one pass each way. x [rows, S] -> y = softmax(x *
  // scale) of each row, scale a float32 as the composed x * scale takes it;
  // causal > 0: row r is row i = r % causal of an [.., L = causal, S] stack
  // and its columns j > i take no part (y = 0, PyTorch's is_causal).
  // Backward: gx = softmax_backward(y, gy) * scale, 0 where masked.
  void (*scaled_softmax)(float scale, int64_t causal, int64_t rows, int64_t s, const float* x,
                         float* y);
  void (*scaled_softmax_backward)(float scale, int64_t causal, int64_t rows, int64_t s,
                                  const float* y, const float* gy, float* gx);

  // ---- linear algebra ----
  // For each of `batch` problems i: C_i [M, N] = alpha op(A_i) op(B_i) + beta C_i,
  // X_i = x + i * stride_x, row strides lda, ldb, ldc (cuBLAS strided-batched).
  void (*gemm)(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb,
               int64_t stride_b, float beta, float* c, int64_t ldc, int64_t stride_c,
               int64_t batch);
  // x [N, IN], w [OUT, IN], b [OUT] or null -> y [N, OUT] = x w^T + b
  void (*linear)(int64_t n, int64_t in, int64_t out, const float* x, const float* w,
                 const float* b, float* y);
  // src [batch, rows, cols] -> dst [batch, cols, rows]
  void (*transpose)(int64_t batch, int64_t rows, int64_t cols, const float* src, float* dst);

  // ---- convolution and pooling, NCHW ----
  // x [N, C, H, W], w [OC, C/groups, KH, KW], b [OC] or null -> y [N, OC, OH, OW]
  void (*conv2d_forward)(const ConvGeometry& g, const float* x, const float* w, const float* b,
                         float* y);
  // gy [N, OC, OH, OW] -> gx [N, C, H, W], gw [OC, C/groups, KH, KW], gb [OC];
  // each may be null (not wanted; x may be null without gw); the wanted ones
  // are overwritten. gx alone is conv_transpose2d's forward.
  void (*conv2d_backward)(const ConvGeometry& g, const float* x, const float* w, const float* gy,
                          float* gx, float* gw, float* gb);
  // x [NC, H, W] -> y [NC, OH, OW], argmax [NC, OH, OW] (flat index into H*W, first maximum)
  void (*max_pool_forward)(const PoolGeometry& g, const float* x, float* y, int32_t* argmax);
  // gy [NC, OH, OW] -> gx [NC, H, W] (overwritten)
  void (*max_pool_backward)(const PoolGeometry& g, const float* gy, const int32_t* argmax,
                            float* gx);
  // window means, padding counted (count_include_pad)
  void (*avg_pool_forward)(const PoolGeometry& g, const float* x, float* y);
  void (*avg_pool_backward)(const PoolGeometry& g, const float* gy, float* gx);
  // Fused max_pool2d(relu(conv2d(x, w, b)), 2) (2x2 windows, stride 2): the
  // bits of those three ops. PH = OH/2, PW = OW/2. A device without it leaves
  // all three null; the op front end then runs the three ops, as it does when
  // state_bytes(g) is 0 (a geometry the device does not fuse).
  // Bytes of the state the forward leaves for the backward.
  int64_t (*conv2d_relu_pool_state_bytes)(const ConvGeometry& g);
  // x, w, b (or null) -> y [N, OC, PH, PW] and state (a layout of the device's)
  void (*conv2d_relu_pool_forward)(const ConvGeometry& g, const float* x, const float* w,
                                   const float* b, float* y, void* state);
  // gy [N, OC, PH, PW] and the forward's state -> gx, gw, gb as conv2d_backward
  void (*conv2d_relu_pool_backward)(const ConvGeometry& g, const float* x, const float* w,
                                    const float* gy, const void* state, float* gx, float* gw,
                                    float* gb);

  // ---- labels: int32 or int64 (label_dtype), in [0, C) ----
  // The front ends check host labels before the call; a device kernel given
  // a label out of range writes NaN for that row and reads nothing.
  // x [N, C] -> out [N] = x[i, labels[i]]
  void (*gather)(int64_t n, int64_t c, const float* x, const void* labels, DType label_dtype,
                 float* out);
  // g [N] -> gx [N, C] (overwritten): g[i] at labels[i], zero elsewhere
  void (*gather_backward)(int64_t n, int64_t c, const float* g, const void* labels,
                          DType label_dtype, float* gx);
  // logits [N, C, inner], labels [N, inner] (inner 1: [N, C] and [N]) ->
  // loss [1] = the mean over positions p of logsumexp_p - logits[p at
  // labels[p]]; probs [N, C, inner] = softmax over C unless null
  void (*cross_entropy_forward)(int64_t n, int64_t c, int64_t inner, const float* logits,
                                const void* labels, DType label_dtype, float* loss, float* probs);
  // probs [N, C, inner] -> in place, d loss / d logits scaled by g [1]:
  // g / (N * inner) * (probs - onehot(labels))
  void (*cross_entropy_backward)(int64_t n, int64_t c, int64_t inner, const void* labels,
                                 DType label_dtype, const float* g, float* probs);

  // p, t [n] -> l [n] = act::bce(p, t); g [n] -> gp [n], gt [n] (either null:
  // not wanted) by act::bce_grad_p and act::bce_grad_t
  void (*binary_cross_entropy_forward)(int64_t n, const float* p, const float* t, float* l);
  void (*binary_cross_entropy_backward)(int64_t n, const float* g, const float* p, const float* t,
                                        float* gp, float* gt);
  // x, y [n], d = x - y -> l [n] = scale f(d) (mse, smooth L1, huber: one
  // pass where the composed ops took three); back, gx = scale g f'(d) and
  // gy = -gx (either null: not wanted), g [n] (each) or g[0] for every i
  // (a mean's or sum's one gradient, its 1/n in scale)
  void (*diff_loss_forward)(DiffLoss f, float s, float scale, int64_t n, const float* x,
                            const float* y, float* l);
  void (*diff_loss_backward)(DiffLoss f, float s, float scale, int64_t n, const float* x,
                             const float* y, const float* g, bool each, float* gx, float* gy);

  // ---- optimizers: every slice of a step in one call (host array of slices) ----
  void (*update)(UpdateRule rule, const UpdateArgs& args, const UpdateSlice* slices, int count);

  // ---- shape ops (issue 22) ----
  // Any dtype (by elem_size 2, 4 or 8): dst[map] = src[map] (StridedCopy);
  // src and dst do not overlap. Serves permute, narrow, cat, expand, pad.
  void (*strided_copy)(size_t elem_size, const StridedCopy& map, const void* src, void* dst);
  // Indices int32 or int64 (index_dtype); the front ends check host indices,
  // a device kernel given one outside [0, D) writes all-ones bits (NaN for
  // floats, -1 for integers) for that slice (select, gather_dim) or skips it
  // (index_add, scatter_add_dim).
  // x [outer, D, inner], index [I] -> out [outer, I, inner] = x[o, index[i], k];
  // any dtype by elem_size
  void (*index_select)(size_t elem_size, int64_t outer, int64_t d, int64_t inner, const void* x,
                       int64_t count, const void* index, DType index_dtype, void* out);
  // src [outer, I, inner] -> out [outer, D, inner] += at index[i] (float32, accumulates)
  void (*index_add)(int64_t outer, int64_t d, int64_t inner, int64_t count, const void* index,
                    DType index_dtype, const float* src, float* out);
  // x [outer, D, inner], index [outer, I, inner] -> out [outer, I, inner] =
  // x[o, index[o, i, k], k] (torch.gather along the middle dim; float32)
  void (*gather_dim)(int64_t outer, int64_t d, int64_t inner, int64_t count, const float* x,
                     const void* index, DType index_dtype, float* out);
  // src, index [outer, I, inner] -> out [outer, D, inner] += src at
  // [o, index[o, i, k], k] (torch.scatter_add_; float32, accumulates)
  void (*scatter_add_dim)(int64_t outer, int64_t d, int64_t inner, int64_t count,
                          const void* index, DType index_dtype, const float* src, float* out);
  // out [sel.n] = cond != 0 ? a : b under sel; cond float32, int32 or int64;
  // a, b, out float32 (the unchosen side is never read into the result)
  void (*where)(const Select& sel, const void* cond, DType cond_dtype, const float* a,
                const float* b, float* out);
  // ---- math (issue 22) ----
  // a, b of one dtype (any) under bc -> out [bc.n] float32 = [a op b], compared
  // in the dtype itself (int64 exactly, float16 through float)
  void (*compare)(CompareOp op, DType dtype, const Broadcast& bc, const void* a, const void* b,
                  float* out);
  // ---- convolution family and resizing (issue 22) ----
  // Nearest resizing x [NC, H, W] -> y [NC, OH, OW]: y[p, i, j] = x[p, rows[i], cols[j]],
  // rows [OH] in [0, H) and cols [OW] in [0, W) nondecreasing (int32, this device's)
  void (*upsample_nearest_forward)(int64_t nc, int64_t h, int64_t w, int64_t oh, int64_t ow,
                                   const int32_t* rows, const int32_t* cols, const float* x,
                                   float* y);
  // gy [NC, OH, OW] -> gx [NC, H, W] (overwritten): gx[p, h, w] sums gy[p, i, j] over
  // i in [row_first[h], row_first[h + 1]), j in [col_first[w], col_first[w + 1]),
  // in (i, j) order; row_first [H + 1], col_first [W + 1] (int32, this device's)
  void (*upsample_nearest_backward)(int64_t nc, int64_t h, int64_t w, int64_t oh, int64_t ow,
                                    const int32_t* row_first, const int32_t* col_first,
                                    const float* gy, float* gx);
  // Bilinear resizing x [NC, H, W] -> y [NC, OH, OW], PyTorch's order:
  // y[p, i, j] = v(i0h[i], j) (1 - l1h[i]) + v(i1h[i], j) l1h[i], with
  // v(r, j) = x[p, r, i0w[j]] (1 - l1w[j]) + x[p, r, i1w[j]] l1w[j]
  void (*upsample_bilinear_forward)(int64_t nc, int64_t h, int64_t w, int64_t oh, int64_t ow,
                                    LinearAxis rows, LinearAxis cols, const float* x, float* y);
  // gy [NC, OH, OW] -> gx [NC, H, W] (overwritten), the forward's transpose:
  // t_i[c] sums (1 - l1w[j]) gy[p, i, j] over j with i0w[j] == c and
  // l1w[j] gy[p, i, j] over j with i1w[j] == c, in that order for j
  // ascending; gx[p, r, c] sums (1 - l1h[i]) t_i[c] and l1h[i] t_i[c] over i
  // ascending alike (a tap with i0 == i1 adds twice)
  void (*upsample_bilinear_backward)(int64_t nc, int64_t h, int64_t w, int64_t oh, int64_t ow,
                                     LinearAxis rows, LinearAxis cols, const float* gy, float* gx);
  // ---- batch norm (issue 23) ----
  // Per channel c of x [N, C, S] (S: the product of the dims after C, 1 for
  // [N, C]). training: mean, invstd [C] = the batch's mean over N*S values and
  // 1 / sqrt(biased variance + eps), taken in double; running_mean and
  // running_var [C] (both null, or both updated in place: (1 - momentum) r +
  // momentum stat, the variance unbiased, times N*S / (N*S - 1)). Not
  // training: mean = running_mean, invstd = 1 / sqrt(running_var + eps).
  // mean, invstd -> save_mean, save_invstd [C]; y [N, C, S] =
  // (x - mean) * invstd * weight + bias (weight, bias [C] or null: 1 and 0).
  void (*batch_norm_forward)(bool training, int64_t n, int64_t c, int64_t s, const float* x,
                             const float* weight, const float* bias, float* running_mean,
                             float* running_var, double momentum, double eps, float* save_mean,
                             float* save_invstd, float* y);
  // gy, x [N, C, S] with the forward's save_mean, save_invstd [C] and weight
  // [C] (or null: 1) -> gx [N, C, S] = w invstd (gy - [training] (sum(gy) +
  // xhat sum(gy xhat)) / (N*S)), xhat = (x - mean) invstd, and per channel
  // gweight = sum(gy xhat), gbias = sum(gy) [C] (sums over N*S in double).
  // Each output may be null (not wanted); the wanted ones are overwritten.
  void (*batch_norm_backward)(bool training, int64_t n, int64_t c, int64_t s, const float* x,
                              const float* gy, const float* save_mean, const float* save_invstd,
                              const float* weight, float* gx, float* gweight, float* gbias);
  // ---- layer norm ----
  // Per row of x [R, D]: mean and rstd [R] = 1 / sqrt(biased variance + eps),
  // both taken in double (two passes over the row); y [R, D] = (x - mean) rstd
  // weight + bias (weight, bias [D] or null: 1 and 0).
  void (*layer_norm_forward)(int64_t r, int64_t d, double eps, const float* x, const float* weight,
                             const float* bias, float* mean, float* rstd, float* y);
  // gy, x [R, D] with the forward's mean, rstd [R] and weight [D] (or null: 1)
  // -> gx [R, D] = rstd (gw - mean(gw) - xhat mean(gw xhat)) along the row,
  // gw = gy weight, xhat = (x - mean) rstd; gweight = sum(gy xhat), gbias =
  // sum(gy) over the rows [D]. Sums in double; each output may be null.
  void (*layer_norm_backward)(int64_t r, int64_t d, const float* x, const float* gy,
                              const float* mean, const float* rstd, const float* weight, float* gx,
                              float* gweight, float* gbias);
  // ---- group norm ----
  // x [N, C, S] in G groups of C/G channels (a group's C/G * S values lie
  // together): per (sample, group) mean and rstd [N, G] as layer_norm's, then
  // y = (x - mean) rstd weight[c] + bias[c] (weight, bias [C] or null).
  void (*group_norm_forward)(int64_t n, int64_t c, int64_t s, int64_t g, double eps,
                             const float* x, const float* weight, const float* bias, float* mean,
                             float* rstd, float* y);
  // gy, x [N, C, S] -> gx = rstd (gw - mean(gw) - xhat mean(gw xhat)) over each
  // (sample, group), gw = gy weight[c]; gweight[c] = sum(gy xhat), gbias[c] =
  // sum(gy) over N and S. Sums in double, folded in a fixed order; each output
  // may be null.
  void (*group_norm_backward)(int64_t n, int64_t c, int64_t s, int64_t g, const float* x,
                              const float* gy, const float* mean, const float* rstd,
                              const float* weight, float* gx, float* gweight, float* gbias);
  // ---- the LSTM cell's pointwise part (issue 23) ----
  // gates a [B, 4H] (pre-activations of i, f, g, o: PyTorch's order), c [B, H]
  // -> c' = sigmoid(f) c + sigmoid(i) tanh(g) and h = sigmoid(o) tanh(c'), [B, H],
  // and act [B, 5H] = sigmoid(i), sigmoid(f), tanh(g), sigmoid(o), tanh(c') for
  // the backward, which then evaluates no exp or tanh.
  void (*lstm_cell_forward)(int64_t b, int64_t h, const float* a, const float* c, float* act,
                            float* c_out, float* h_out);
  // The backward from the outputs' gradients gh (of h) and gc_next (of c'),
  // [B, H], either null for zero: with dc = gc_next + gh sigmoid(o) (1 - tanh(c')^2),
  //   ga [B, 4H] = dc tanh(g) i (1 - i), dc c f (1 - f), dc i (1 - tanh(g)^2),
  //                gh tanh(c') o (1 - o)   (i, f, o here their sigmoids)
  //   gc [B, H] = dc sigmoid(f), c's gradient (null: not wanted; may be gc_next)
  void (*lstm_cell_backward)(int64_t b, int64_t h, const float* act, const float* c,
                             const float* gh, const float* gc_next, float* ga, float* gc);
  // A whole step of an LSTM layer (issue 26), the hidden path's GEMM with the
  // cell, so that a device may fuse them (CUDA does for small layers, where
  // the GEMM's launches outweighed its work; the CPU runs the two): with
  // w [4H, H] (w_hh),
  //   forward:  a [B, 4H] += hp [B, H] w^T in place, then lstm_cell_forward;
  //   backward: dh [B, H] += g [B, 4H] w in place (g: the next step's ga; null:
  //             none), then lstm_cell_backward with gh = dh. It takes w
  //             and wt [H, 4H], w transposed once a layer, and reads the
  //             one that suits it (the CPU's GEMM w; CUDA's fused kernel wt,
  //             where a unit's weights are a row).
  void (*lstm_step_forward)(int64_t b, int64_t h, const float* w, const float* hp, float* a,
                            const float* c, float* act, float* c_out, float* h_out);
  void (*lstm_step_backward)(int64_t b, int64_t h, const float* w, const float* wt, const float* g,
                             const float* act, const float* c, float* dh, const float* gc_next,
                             float* ga, float* gc);
  // ---- the GRU cell's pointwise part (issue 23) ----
  // gx, gh [B, 3H] (the input and hidden paths' pre-activations of r, z, n,
  // each with its bias: PyTorch's order), hp [B, H] (the previous h) ->
  //   r = sigmoid(gx_r + gh_r), z = sigmoid(gx_z + gh_z),
  //   n = tanh(gx_n + r gh_n), h' [B, H] = n + z (hp - n)
  // and act [B, 4H] = r, z, n, gh_n for the backward (no exp or tanh there).
  void (*gru_cell_forward)(int64_t b, int64_t h, const float* gx, const float* gh,
                           const float* hp, float* act, float* h_out);
  // The backward from h''s gradient gy [B, H]: with dn = gy (1 - z) (1 - n^2),
  // dr = dn gh_n r (1 - r) and dz = gy (hp - n) z (1 - z),
  //   ggx [B, 3H] = dr, dz, dn;  ggh [B, 3H] = dr, dz, dn r;
  //   ghp [B, H] += gy z (hp's own part; null: not wanted)
  void (*gru_cell_backward)(int64_t b, int64_t h, const float* act, const float* hp,
                            const float* gy, float* ggx, float* ggh, float* ghp);
  // A whole step of a GRU layer, as lstm_step_* (w [3H, H]):
  //   forward:  gh [B, 3H] += hp [B, H] w^T in place, then gru_cell_forward;
  //   backward: dh [B, H] += g [B, 3H] w in place (g: the next step's ggh;
  //             null: none), then gru_cell_backward with gy = dh; w and wt.
  void (*gru_step_forward)(int64_t b, int64_t h, const float* w, const float* hp,
                           const float* gx, float* gh, float* act, float* h_out);
  void (*gru_step_backward)(int64_t b, int64_t h, const float* w, const float* wt, const float* g,
                            const float* act, const float* hp, float* dh, float* ggx, float* ggh,
                            float* ghp);
};

}  // namespace minidl
