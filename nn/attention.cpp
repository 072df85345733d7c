#include "nn/attention.h"

#include <algorithm>
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

// scores [.., L, S] (scaled) with the causal mask and every defined mask applied
Tensor masked_scores(const char* op, Tensor scores, std::initializer_list<Mask> masks,
                     bool is_causal) {
  if (is_causal) {
    const int64_t l = scores.size(-2), s = scores.size(-1);
    scores = masked_fill(scores, triu(Tensor::ones({l, s}, kFloat32, scores.device()), 1),
                         -INFINITY);
  }
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
  return scores;
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
  const double scale = 1.0 / std::sqrt(double(q.size(-1)));
  Tensor scores = matmul(q, k, false, /*trans_b=*/true);
  const bool other_masks =
      std::any_of(masks.begin(), masks.end(), [](const Mask& m) { return m.mask.defined(); });
  // without other masks: one kernel each way (the composed path up to rounding)
  Tensor weights = other_masks ? softmax(masked_scores(op, scores * scale, masks, is_causal), -1)
                               : scaled_softmax(scores, scale, is_causal);
  if (dropout_p > 0) weights = dropout(weights, dropout_p);
  return {matmul(weights, v), weights};
}

std::string shape_or_none(const Tensor& t) { return t.defined() ? to_string(t.shape()) : "none"; }

// The shapes multi_head_attention_forward expects of its batched inputs.
void check_mha_inputs(const Tensor& query, const Tensor& key, const Tensor& value, int64_t H,
                      const Tensor& w_in, const Tensor& b_in, const Tensor& w_out,
                      const Tensor& b_out, const MultiheadAttentionForwardOptions& o) {
  const char* op = "multi_head_attention_forward";
  const bool bf = o.batch_first, sep = o.use_separate_proj_weight;
  const int64_t E = query.dim() == 3 ? query.size(2) : -1;
  MINIDL_CHECK(query.dim() == 3 && key.dim() == 3 && value.dim() == 3 &&
                   key.size(0) == value.size(0) && key.size(1) == value.size(1) &&
                   (sep || (key.size(2) == E && value.size(2) == E)) &&
                   key.size(bf ? 0 : 1) == query.size(bf ? 0 : 1),
               op, ": expected query ", bf ? "[N, L, E], " : "[L, N, E], ",
               sep ? (bf ? "key [N, S, kdim] and value [N, S, vdim]"
                         : "key [S, N, kdim] and value [S, N, vdim]")
                   : (bf ? "key and value [N, S, E]" : "key and value [S, N, E]"),
               ", got query ", query.shape(), ", key ", key.shape(), ", value ", value.shape());
  const int64_t N = query.size(bf ? 0 : 1), L = query.size(bf ? 1 : 0), S = key.size(bf ? 1 : 0);
  const int64_t kdim = key.size(2), vdim = value.size(2);
  MINIDL_CHECK(H > 0 && E % H == 0, op, ": embed_dim ", E, " is not divisible by num_heads ", H);
  const bool in_ok =
      sep ? o.q_proj_weight.defined() && o.q_proj_weight.shape() == Shape({E, E}) &&
                o.k_proj_weight.defined() && o.k_proj_weight.shape() == Shape({E, kdim}) &&
                o.v_proj_weight.defined() && o.v_proj_weight.shape() == Shape({E, vdim})
          : w_in.defined() && w_in.shape() == Shape({3 * E, E});
  MINIDL_CHECK(in_ok && (!b_in.defined() || b_in.shape() == Shape{3 * E}) &&
                   w_out.shape() == Shape({E, E}) &&
                   (!b_out.defined() || b_out.shape() == Shape{E}),
               op, ": expected ",
               sep ? cat("q_proj_weight [", E, ", ", E, "], k_proj_weight [", E, ", ", kdim,
                         "], v_proj_weight [", E, ", ", vdim, "]")
                   : cat("in_proj_weight [", 3 * E, ", ", E, "]"),
               ", in_proj_bias [", 3 * E, "], out_proj weight [", E, ", ", E, "], bias [", E,
               "] for E = ", E, sep ? cat(", kdim = ", kdim, ", vdim = ", vdim) : "", ", got ",
               sep ? cat(shape_or_none(o.q_proj_weight), ", ", shape_or_none(o.k_proj_weight), ", ",
                         shape_or_none(o.v_proj_weight))
                   : shape_or_none(w_in),
               ", ", shape_or_none(b_in), ", ", w_out.shape(), ", ", shape_or_none(b_out));
  MINIDL_CHECK(o.bias_k.defined() == o.bias_v.defined() &&
                   (!o.bias_k.defined() ||
                    (o.bias_k.shape() == Shape({1, 1, E}) && o.bias_v.shape() == Shape({1, 1, E}))),
               op, ": expected bias_k and bias_v [1, 1, E] = [1, 1, ", E,
               "] (both or neither), got bias_k ", shape_or_none(o.bias_k), ", bias_v ",
               shape_or_none(o.bias_v));
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
  const std::vector<Tensor> w =
      o.use_separate_proj_weight
          ? std::vector<Tensor>{o.q_proj_weight, o.k_proj_weight, o.v_proj_weight}
          : chunk(w_in, 3, 0);
  const std::vector<Tensor> b = b_in.defined() ? chunk(b_in, 3, 0) : std::vector<Tensor>(3);
  // x [L, N, Ex] (or [N, L, Ex]) -> the projection's heads [N, H, L, hd], with
  // `extra` [1, 1, E] (bias_k, bias_v) appended along the sequence: L + 1
  auto heads = [&](const Tensor& x, int i, const Tensor& extra) {
    Tensor p = matmul(x, w[i], false, /*trans_b=*/true);
    if (b[i].defined()) p = p + b[i];
    if (extra.defined())
      p = cat({p, expand(extra, bf ? Shape{N, 1, E} : Shape{1, N, E})}, bf ? 1 : 0);
    return permute(unflatten(p, 2, {H, E / H}),
                   bf ? std::vector<int64_t>{0, 2, 1, 3} : std::vector<int64_t>{1, 2, 0, 3});
  };
  Tensor k = heads(key, 1, o.bias_k), v = heads(value, 2, o.bias_v);
  if (o.add_zero_attn) {  // [N, H, S, hd] -> [N, H, S + 1, hd], the last row zeros
    k = pad(k, {0, 0, 0, 1});
    v = pad(v, {0, 0, 0, 1});
  }
  // the masks keep the appended keys: a column of zeros (false) each, as PyTorch pads them
  const int64_t extra = k.size(2) - S;
  Tensor kpm = o.key_padding_mask, mask = o.attn_mask;
  if (kpm.defined() && extra > 0) kpm = pad(kpm, {0, extra});
  if (mask.defined() && extra > 0) mask = pad(mask, {0, extra});
  if (mask.defined() && mask.dim() == 3) mask = mask.reshape({N, H, L, S + extra});
  Tensor causal;  // is_causal: the triangle over the S given keys, as attn_mask would be
  if (o.is_causal)
    causal = pad(triu(Tensor::ones({L, S}, kFloat32, query.device()), 1).to(kInt32), {0, extra});
  Attention a = attend(op, heads(query, 0, {}), k, v,
                       {{kpm.defined() ? kpm.reshape({N, 1, 1, S + extra}) : kpm, false},
                        {mask, false},
                        {causal, false}},
                       /*is_causal=*/false, o.dropout_p);
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
int64_t checked_embed_dim(int64_t e, int64_t h, const MultiheadAttentionOptions& o) {
  MINIDL_CHECK(
      e > 0 && h > 0 && e % h == 0 && o.dropout >= 0 && o.dropout < 1 && o.kdim >= 0 && o.vdim >= 0,
      "MultiheadAttention: expected embed_dim divisible by num_heads (both positive), ",
      "0 <= dropout < 1 and kdim, vdim >= 0 (0: embed_dim), got embed_dim ", e, ", num_heads ", h,
      ", dropout ", o.dropout, ", kdim ", o.kdim, ", vdim ", o.vdim);
  return e;
}

// a parameter of this shape registered on `cell` and filled by `init`
Tensor make_parameter(Cell& cell, const char* name, const Shape& shape, const Initializer& init) {
  Tensor t = cell.register_parameter(name, Tensor::empty(shape));
  init(t, init::fans_of(shape));
  return t;
}
}  // namespace

MultiheadAttention::MultiheadAttention(int64_t e, int64_t h, MultiheadAttentionOptions o)
    : embed_dim(checked_embed_dim(e, h, o)),
      num_heads(h),
      kdim(o.kdim > 0 ? o.kdim : e),
      vdim(o.vdim > 0 ? o.vdim : e),
      dropout(o.dropout),
      add_zero_attn(o.add_zero_attn),
      batch_first(o.batch_first),
      out_proj(e, e, {.bias_init = "zeros", .has_bias = o.bias}) {
  // PyTorch's order: projection weights, in_proj_bias, bias_k, bias_v, out_proj
  if (kdim == e && vdim == e) {
    in_proj_weight = make_parameter(*this, "in_proj_weight", {3 * e, e}, "xavier_uniform");
  } else {
    q_proj_weight = make_parameter(*this, "q_proj_weight", {e, e}, "xavier_uniform");
    k_proj_weight = make_parameter(*this, "k_proj_weight", {e, kdim}, "xavier_uniform");
    v_proj_weight = make_parameter(*this, "v_proj_weight", {e, vdim}, "xavier_uniform");
  }
  if (o.bias) in_proj_bias = make_parameter(*this, "in_proj_bias", {3 * e}, "zeros");
  if (o.add_bias_kv) {
    bias_k = make_parameter(*this, "bias_k", {1, 1, e}, "xavier_normal");
    bias_v = make_parameter(*this, "bias_v", {1, 1, e}, "xavier_normal");
  }
  register_cell("out_proj", out_proj);
}

// query [L, N, E], key [S, N, kdim], value [S, N, vdim] (or batch first)
//   -> ([L, N, E], [N, L, S'])
std::tuple<Tensor, Tensor> MultiheadAttention::forward(const Tensor& query, const Tensor& key,
                                                       const Tensor& value, const Tensor& kpm,
                                                       bool need_weights, const Tensor& attn_mask,
                                                       bool average, bool is_causal) {
  MINIDL_CHECK(query.dim() >= 1 && key.dim() >= 1 && value.dim() >= 1 &&
                   query.size(-1) == embed_dim && key.size(-1) == kdim && value.size(-1) == vdim,
               "MultiheadAttention(", embed_dim, ", ", num_heads, "): expected query [..., ",
               embed_dim, "], key [..., kdim = ", kdim, "], value [..., vdim = ", vdim,
               "], got query ", query.shape(), ", key ", key.shape(), ", value ", value.shape());
  return multi_head_attention_forward(query, key, value, num_heads, in_proj_weight, in_proj_bias,
                                      out_proj.weight, out_proj.bias,
                                      {.batch_first = batch_first,
                                       .key_padding_mask = kpm,
                                       .need_weights = need_weights,
                                       .attn_mask = attn_mask,
                                       .average_attn_weights = average,
                                       .is_causal = is_causal,
                                       .dropout_p = is_training() ? dropout : 0.0,
                                       .bias_k = bias_k,
                                       .bias_v = bias_v,
                                       .add_zero_attn = add_zero_attn,
                                       .use_separate_proj_weight = !in_proj_weight.defined(),
                                       .q_proj_weight = q_proj_weight,
                                       .k_proj_weight = k_proj_weight,
                                       .v_proj_weight = v_proj_weight});
}

}  // namespace minidl::nn
