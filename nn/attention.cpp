#include "nn/attention.h"

#include <cmath>

#include "framework/ops.h"

namespace minidl {
namespace {

// A mask and what its boolean (integer) form means.
struct Mask {
  Tensor mask;
  bool true_takes_part;
};

// scores [.., L, S] with a float mask added or a boolean one's removed
// positions set to -inf (mask broadcasts to scores)
Tensor apply_mask(const Tensor& scores, const Mask& m) {
  if (!m.mask.defined()) return scores;
  if (is_floating(m.mask.dtype())) return scores + m.mask;
  Tensor removed = m.mask;  // nonzero where a position is removed
  if (m.true_takes_part) {
    const Tensor f = m.mask.to(kFloat32);
    removed = eq(f, scalar_like(0, f));
  }
  return masked_fill(scores, removed, -INFINITY);
}

struct Attention {
  Tensor out, weights;
};

// q [.., L, E], k [.., S, E], v [.., S, Ev] -> out [.., L, Ev], weights [.., L, S]
Attention attend(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                 std::initializer_list<Mask> masks, bool is_causal, double dropout_p) {
  MINIDL_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2 && q.size(-1) == k.size(-1) &&
                   k.size(-2) == v.size(-2),
               op, ": expected q [..., L, E], k [..., S, E], v [..., S, Ev], got q ", q.shape(),
               ", k ", k.shape(), ", v ", v.shape());
  MINIDL_CHECK(dropout_p >= 0 && dropout_p < 1, op, ": expected 0 <= dropout_p < 1, got ",
               dropout_p);
  Tensor scores = matmul(q, k, false, /*trans_b=*/true) * (1.0 / std::sqrt(double(q.size(-1))));
  if (is_causal)
    scores = masked_fill(
        scores, triu(Tensor::ones({q.size(-2), k.size(-2)}, kFloat32, q.device()), 1), -INFINITY);
  for (const Mask& m : masks) {
    if (!m.mask.defined()) continue;
    MINIDL_CHECK(
        is_floating(m.mask.dtype()) || m.mask.dtype() == kInt32 || m.mask.dtype() == kInt64, op,
        ": expected a float32, int32 or int64 mask, got ", dtype_name(m.mask.dtype()));
    MINIDL_CHECK(m.mask.dim() <= scores.dim(), op, ": mask ", m.mask.shape(),
                 " does not broadcast to the attention scores ", scores.shape());
    broadcast_shape(scores.shape(), m.mask.shape(), op);
    scores = apply_mask(scores, m);
  }
  Tensor weights = softmax(scores, -1);
  if (dropout_p > 0) weights = dropout(weights, dropout_p);
  return {matmul(weights, v), weights};
}

// The shapes multi_head_attention_forward expects of its batched inputs.
void check_mha_inputs(const Tensor& query, const Tensor& key, const Tensor& value, int64_t H,
                      const Tensor& w_in, const Tensor& b_in, const Tensor& w_out,
                      const Tensor& b_out, const MultiheadAttentionForwardOptions& o) {
  const char* op = "multi_head_attention_forward";
  const bool bf = o.batch_first;
  const int64_t E = query.dim() == 3 ? query.size(2) : -1;
  MINIDL_CHECK(query.dim() == 3 && key.dim() == 3 && key.shape() == value.shape() &&
                   key.size(2) == E && key.size(bf ? 0 : 1) == query.size(bf ? 0 : 1),
               op, ": expected query ",
               bf ? "[N, L, E], key and value [N, S, E]" : "[L, N, E], key and value [S, N, E]",
               ", got query ", query.shape(), ", key ", key.shape(), ", value ", value.shape());
  const int64_t N = query.size(bf ? 0 : 1), L = query.size(bf ? 1 : 0), S = key.size(bf ? 1 : 0);
  MINIDL_CHECK(H > 0 && E % H == 0, op, ": embed_dim ", E, " is not divisible by num_heads ", H);
  MINIDL_CHECK(
      w_in.shape() == Shape({3 * E, E}) && (!b_in.defined() || b_in.shape() == Shape{3 * E}) &&
          w_out.shape() == Shape({E, E}) && (!b_out.defined() || b_out.shape() == Shape{E}),
      op, ": expected in_proj_weight [", 3 * E, ", ", E, "], in_proj_bias [", 3 * E,
      "], out_proj weight [", E, ", ", E, "], bias [", E, "] for E = ", E, ", got ", w_in.shape(),
      ", ", b_in.defined() ? to_string(b_in.shape()) : "none", ", ", w_out.shape(), ", ",
      b_out.defined() ? to_string(b_out.shape()) : "none");
  const Tensor &kpm = o.key_padding_mask, &mask = o.attn_mask;
  MINIDL_CHECK(!kpm.defined() || kpm.shape() == Shape({N, S}), op,
               ": expected key_padding_mask [N, S] = [", N, ", ", S, "], got ", kpm.shape());
  MINIDL_CHECK(
      !mask.defined() || mask.shape() == Shape({L, S}) || mask.shape() == Shape({N * H, L, S}), op,
      ": expected attn_mask [L, S] = [", L, ", ", S, "] or [N * H, L, S] = [", N * H, ", ", L, ", ",
      S, "], got ", mask.shape());
}

}  // namespace

// q [.., L, E], k [.., S, E], v [.., S, Ev] -> [.., L, Ev]
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal) {
  return attend("scaled_dot_product_attention", q, k, v, {{attn_mask, true}}, is_causal, dropout_p)
      .out;
}

// query [L, N, E] (batch_first [N, L, E]), key and value [S, N, E] -> ([L, N, E], [N, L, S])
std::tuple<Tensor, Tensor> multi_head_attention_forward(const Tensor& query, const Tensor& key,
                                                        const Tensor& value, int64_t H,
                                                        const Tensor& w_in, const Tensor& b_in,
                                                        const Tensor& w_out, const Tensor& b_out,
                                                        const MultiheadAttentionForwardOptions& o) {
  const char* op = "multi_head_attention_forward";
  const bool bf = o.batch_first;
  if (query.dim() == 2 && key.dim() == 2 && value.dim() == 2) {  // unbatched: N = 1
    const int64_t n = bf ? 0 : 1;
    MultiheadAttentionForwardOptions o1 = o;
    if (o.key_padding_mask.defined()) o1.key_padding_mask = unsqueeze(o.key_padding_mask, 0);
    auto [out, w] =
        multi_head_attention_forward(unsqueeze(query, n), unsqueeze(key, n), unsqueeze(value, n), H,
                                     w_in, b_in, w_out, b_out, o1);
    return {squeeze(out, n), w.defined() ? squeeze(w, 0) : w};
  }
  check_mha_inputs(query, key, value, H, w_in, b_in, w_out, b_out, o);
  const int64_t E = query.size(2), N = query.size(bf ? 0 : 1), L = query.size(bf ? 1 : 0),
                S = key.size(bf ? 1 : 0);
  const std::vector<Tensor> w = chunk(w_in, 3, 0);
  const std::vector<Tensor> b = b_in.defined() ? chunk(b_in, 3, 0) : std::vector<Tensor>(3);
  // x [L, N, E] (or [N, L, E]) -> the projection's heads [N, H, L, hd]
  auto heads = [&](const Tensor& x, int i) {
    Tensor p = matmul(x, w[i], false, /*trans_b=*/true);
    if (b[i].defined()) p = p + b[i];
    return permute(unflatten(p, 2, {H, E / H}),
                   bf ? std::vector<int64_t>{0, 2, 1, 3} : std::vector<int64_t>{1, 2, 0, 3});
  };
  const Tensor& kpm = o.key_padding_mask;
  Tensor mask = o.attn_mask;
  if (mask.defined() && mask.dim() == 3) mask = mask.reshape({N, H, L, S});
  Attention a = attend(op, heads(query, 0), heads(key, 1), heads(value, 2),
                       {{kpm.defined() ? kpm.reshape({N, 1, 1, S}) : kpm, false}, {mask, false}},
                       o.is_causal, o.dropout_p);
  // out [N, H, L, hd] -> [L, N, E] (or [N, L, E])
  Tensor out =
      permute(a.out, bf ? std::vector<int64_t>{0, 2, 1, 3} : std::vector<int64_t>{2, 0, 1, 3});
  out = matmul(flatten(out, 2), w_out, false, /*trans_b=*/true);
  if (b_out.defined()) out = out + b_out;
  Tensor weights;
  if (o.need_weights) weights = o.average_attn_weights ? a.weights.mean({1}) : a.weights;
  return {out, weights};
}

}  // namespace minidl

namespace minidl::nn {

namespace {
// e, once the arguments are checked (before out_proj is built)
int64_t checked_embed_dim(int64_t e, int64_t h, double dropout) {
  MINIDL_CHECK(e > 0 && h > 0 && e % h == 0 && dropout >= 0 && dropout < 1,
               "MultiheadAttention: expected embed_dim divisible by num_heads (both positive) and ",
               "0 <= dropout < 1, got embed_dim ", e, ", num_heads ", h, ", dropout ", dropout);
  return e;
}
}  // namespace

MultiheadAttention::MultiheadAttention(int64_t e, int64_t h, MultiheadAttentionOptions o)
    : embed_dim(checked_embed_dim(e, h, o.dropout)),
      num_heads(h),
      dropout(o.dropout),
      batch_first(o.batch_first),
      out_proj(e, e, {.bias_init = "zeros", .has_bias = o.bias}) {
  in_proj_weight = register_parameter("in_proj_weight", Tensor::empty({3 * e, e}));
  Initializer("xavier_uniform")(in_proj_weight, init::fans_of({3 * e, e}));
  if (o.bias) in_proj_bias = register_parameter("in_proj_bias", Tensor::zeros({3 * e}));
  register_cell("out_proj", out_proj);
}

// query [L, N, E] (or [N, L, E]) -> ([L, N, E], [N, L, S])
std::tuple<Tensor, Tensor> MultiheadAttention::forward(const Tensor& query, const Tensor& key,
                                                       const Tensor& value, const Tensor& kpm,
                                                       bool need_weights, const Tensor& attn_mask,
                                                       bool average, bool is_causal) {
  MINIDL_CHECK(query.dim() >= 1 && query.size(-1) == embed_dim, "MultiheadAttention(", embed_dim,
               ", ", num_heads, "): expected query [..., ", embed_dim, "], got ", query.shape());
  return multi_head_attention_forward(query, key, value, num_heads, in_proj_weight, in_proj_bias,
                                      out_proj.weight, out_proj.bias,
                                      {.batch_first = batch_first,
                                       .key_padding_mask = kpm,
                                       .need_weights = need_weights,
                                       .attn_mask = attn_mask,
                                       .average_attn_weights = average,
                                       .is_causal = is_causal,
                                       .dropout_p = is_training() ? dropout : 0.0});
}

}  // namespace minidl::nn
