// Scaled dot-product attention and multi-head attention (PyTorch 2's
// F.scaled_dot_product_attention and nn.MultiheadAttention).
//
// Letters: N batch, H heads, L target (query) length, S source (key) length,
// E embedding (query/key) size, Ev value size, hd = E / H per head.
//
// Masks. minidl has no bool dtype: a float32 mask is ADDED to the scores
// (0 keeps a position, -inf removes it, anything else biases it); an int32 or
// int64 mask stands for a boolean one, nonzero = true, with PyTorch's meaning
// for each argument:
//   scaled_dot_product_attention's attn_mask: true TAKES PART (PyTorch 2);
//   MultiheadAttention's key_padding_mask and attn_mask: true is MASKED OUT.
// To mask a float tensor by a condition yourself, use masked_fill(scores, mask,
// -INFINITY). A row whose every position is removed gives NaN, as in PyTorch.
// Everything composes autograd ops (no hand-written backward); the products
// are broadcasting matmuls that read k transposed in place (no copy).
#pragma once
#include <tuple>

#include "nn/cell.h"
#include "nn/dense.h"

namespace minidl {

// q [..., L, E], k [..., S, E], v [..., S, Ev] (leading dims broadcast) ->
// [..., L, Ev] = softmax(q k^T / sqrt(E) + mask) v. attn_mask broadcasts to
// [..., L, S] (see Masks above). is_causal: query i attends to keys j <= i
// (the top-left aligned lower triangle of [L, S], PyTorch's); with attn_mask
// too, both apply (PyTorch refuses the pair). dropout_p: dropout on the attention weights, always
// applied when > 0 (as in PyTorch; pass 0 in evaluation).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = {}, double dropout_p = 0,
                                    bool is_causal = false);

struct MultiheadAttentionForwardOptions {
  bool batch_first = false;          // query [N, L, E] instead of [L, N, E]
  Tensor key_padding_mask = {};      // [N, S]: keys to ignore (see Masks)
  bool need_weights = true;          // also return the attention weights
  Tensor attn_mask = {};             // [L, S] or [N * H, L, S] (see Masks)
  bool average_attn_weights = true;  // weights [N, L, S] (mean over heads), else [N, H, L, S]
  // query i attends to keys j <= i; with attn_mask too, both apply (PyTorch
  // reads is_causal as a hint that attn_mask is causal and needs one)
  bool is_causal = false;
  double dropout_p = 0;  // on the attention weights
};

// torch.nn.functional.multi_head_attention_forward (one in_proj_weight):
// query [L, N, E], key [S, N, E], value [S, N, E] ([N, L, E] ... with
// batch_first; [L, E], [S, E], [S, E] unbatched), in_proj_weight [3E, E]
// (rows: the q, k, v projections), in_proj_bias [3E], out_proj_weight [E, E],
// out_proj_bias [E] (biases may be undefined) -> (output shaped as query,
// attention weights or an undefined tensor without need_weights). Shapes
// that disagree throw minidl::Error naming every input's shape and the
// expected one; so does E not divisible by num_heads.
std::tuple<Tensor, Tensor> multi_head_attention_forward(
    const Tensor& query, const Tensor& key, const Tensor& value, int64_t num_heads,
    const Tensor& in_proj_weight, const Tensor& in_proj_bias, const Tensor& out_proj_weight,
    const Tensor& out_proj_bias, const MultiheadAttentionForwardOptions& options = {});

}  // namespace minidl

namespace minidl::nn {

struct MultiheadAttentionOptions {
  double dropout = 0;        // on the attention weights, in training mode only
  bool bias = true;          // in_proj_bias and out_proj.bias
  bool batch_first = false;  // inputs and output [N, L, E] instead of [L, N, E]
};

// Multi-head attention with PyTorch's parameters and state_dict names:
// in_proj_weight [3E, E] (xavier_uniform), in_proj_bias [3E] (zeros),
// out_proj.weight [E, E] (PyTorch's Linear default), out_proj.bias [E] (zeros).
// forward returns (output [L, N, E] or [N, L, E], weights [N, L, S] averaged
// over heads or [N, H, L, S]; undefined without need_weights). E must be
// divisible by num_heads.
//   nn::MultiheadAttention attn(64, 8, {.batch_first = true});
//   auto [y, w] = attn(x, x, x);                 // self-attention
class MultiheadAttention : public Cell {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, MultiheadAttentionOptions options = {});
  using Cell::forward;
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const Tensor& key_padding_mask = {}, bool need_weights = true,
                                     const Tensor& attn_mask = {}, bool average_attn_weights = true,
                                     bool is_causal = false);
  // Calls forward inside this cell's scope (see Cell::operator()).
  std::tuple<Tensor, Tensor> operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                                        const Tensor& key_padding_mask = {},
                                        bool need_weights = true, const Tensor& attn_mask = {},
                                        bool average_attn_weights = true, bool is_causal = false) {
    if (!scope_tracking())
      return forward(query, key, value, key_padding_mask, need_weights, attn_mask,
                     average_attn_weights, is_causal);
    CallScope scope(*this);
    return forward(query, key, value, key_padding_mask, need_weights, attn_mask,
                   average_attn_weights, is_causal);
  }

  const int64_t embed_dim, num_heads;
  const double dropout;
  const bool batch_first;
  Tensor in_proj_weight, in_proj_bias;  // in_proj_bias undefined without bias
  Dense out_proj;
};

}  // namespace minidl::nn
