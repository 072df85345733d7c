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
  // query i attends to keys j <= i of the S given (the keys bias_k and
  // add_zero_attn append stay, as they would with a triangular attn_mask);
  // with attn_mask too, both apply (PyTorch reads is_causal as a hint that
  // attn_mask is causal and needs one)
  bool is_causal = false;
  double dropout_p = 0;  // on the attention weights
  // [1, 1, E] each (both or neither): one more key and value row, appended to
  // the projected key and value sequences (S + 1 keys; masks get a column
  // that keeps it)
  Tensor bias_k = {}, bias_v = {};
  // a zero key and value row appended per head after bias_k/bias_v (masks
  // padded alike)
  bool add_zero_attn = false;
  // kdim/vdim != E: q_proj_weight [E, E], k_proj_weight [E, kdim] and
  // v_proj_weight [E, vdim] project the inputs instead of in_proj_weight
  // (which may then be undefined); in_proj_bias stays [3E]
  bool use_separate_proj_weight = false;
  Tensor q_proj_weight = {}, k_proj_weight = {}, v_proj_weight = {};
};

// torch.nn.functional.multi_head_attention_forward:
// query [L, N, E], key [S, N, kdim], value [S, N, vdim] ([N, L, E] ... with
// batch_first; [L, E], [S, kdim], [S, vdim] unbatched), in_proj_weight [3E, E]
// (rows: the q, k, v projections; kdim = vdim = E) or the separate weights
// of the options, in_proj_bias [3E], out_proj_weight [E, E], out_proj_bias
// [E] (biases may be undefined) -> (output shaped as query, attention
// weights [N, L, S'] or [N, H, L, S'], S' = S plus one for bias_k and one
// for add_zero_attn; an undefined tensor without need_weights). Shapes that
// disagree throw minidl::Error naming every input's shape and the expected
// one; so does E not divisible by num_heads.
std::tuple<Tensor, Tensor> multi_head_attention_forward(
    const Tensor& query, const Tensor& key, const Tensor& value, int64_t num_heads,
    const Tensor& in_proj_weight, const Tensor& in_proj_bias, const Tensor& out_proj_weight,
    const Tensor& out_proj_bias, const MultiheadAttentionForwardOptions& options = {});

}  // namespace minidl

namespace minidl::nn {

struct MultiheadAttentionOptions {
  double dropout = 0;          // on the attention weights, in training mode only
  bool bias = true;            // in_proj_bias and out_proj.bias
  bool add_bias_kv = false;    // bias_k, bias_v [1, 1, E]: one more key and value
  bool add_zero_attn = false;  // one more key and value of zeros (after bias_kv)
  int64_t kdim = 0;            // key's last dim (0: embed_dim)
  int64_t vdim = 0;            // value's last dim (0: embed_dim)
  bool batch_first = false;    // inputs and output [N, L, E] instead of [L, N, E]
};

// Multi-head attention with PyTorch's parameters and state_dict names:
// in_proj_weight [3E, E] (xavier_uniform), or where kdim or vdim differs
// from E q_proj_weight [E, E], k_proj_weight [E, kdim], v_proj_weight
// [E, vdim] (each xavier_uniform); in_proj_bias [3E] (zeros); with
// add_bias_kv bias_k, bias_v [1, 1, E] (xavier_normal); out_proj.weight
// [E, E] (PyTorch's Linear default), out_proj.bias [E] (zeros).
// forward takes key [.., kdim] and value [.., vdim] and returns (output
// [L, N, E] or [N, L, E], weights [N, L, S'] averaged over heads or
// [N, H, L, S'], S' = S + add_bias_kv + add_zero_attn; undefined without
// need_weights). E must be divisible by num_heads.
//   nn::MultiheadAttention attn(64, 8, {.batch_first = true});
//   auto [y, w] = attn(x, x, x);                 // self-attention
//   nn::MultiheadAttention cross(64, 8, {.kdim = 32, .vdim = 16});
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

  const int64_t embed_dim, num_heads, kdim, vdim;
  const double dropout;
  const bool add_zero_attn, batch_first;
  // in_proj_weight where kdim = vdim = embed_dim, else q/k/v_proj_weight
  // (the others undefined); in_proj_bias undefined without bias; bias_k and
  // bias_v undefined without add_bias_kv
  Tensor in_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight, in_proj_bias, bias_k, bias_v;
  Dense out_proj;
};

}  // namespace minidl::nn
