// layer_norm, group_norm, scaled_dot_product_attention and multi-head
// attention against PyTorch 1.13: values and gradients from
// tests/reference/attn.json (make_attn.py), within 1e-5 relative; then
// nn::MultiheadAttention loaded with the same weights through
// load_state_dict (PyTorch's names) gives the same values and its
// parameters the same gradients.
#include "torch_reference.h"

using namespace minidl;
using namespace minidl::testing;

namespace {

// inputs q, k, v, in_proj_weight, in_proj_bias, out_proj weight and bias[, masks]
MultiheadAttentionForwardOptions mha_options(const Inputs& x, const Attrs& a) {
  MultiheadAttentionForwardOptions o{.batch_first = a["batch_first"],
                                     .need_weights = a["need_weights"],
                                     .average_attn_weights = a["average_attn_weights"]};
  if (a.contains("key_padding_mask")) o.key_padding_mask = x[a["key_padding_mask"].get<size_t>()];
  if (a.contains("attn_mask")) o.attn_mask = x[a["attn_mask"].get<size_t>()];
  return o;
}

Outputs both(const std::tuple<Tensor, Tensor>& t) {
  auto [out, w] = t;
  return w.defined() ? Outputs{out, w} : Outputs{out};
}

}  // namespace

TEST_CASE(
    "PyTorch reference: layer_norm, group_norm, scaled_dot_product_attention, multi-head "
    "attention") {
  check_torch_reference(
      "attn",
      {
          {"layer_norm",
           [](const Inputs& x, const Attrs& a) {
             Tensor w = x.size() > 1 ? x[1] : Tensor(), b = x.size() > 2 ? x[2] : Tensor();
             return Outputs{layer_norm(x[0], a["normalized_shape"].get<Shape>(), w, b, a["eps"])};
           }},
          {"group_norm",
           [](const Inputs& x, const Attrs& a) {
             Tensor w = x.size() > 1 ? x[1] : Tensor(), b = x.size() > 2 ? x[2] : Tensor();
             return Outputs{group_norm(x[0], a["num_groups"], w, b, a["eps"])};
           }},
          {"sdpa",
           [](const Inputs& x, const Attrs& a) {
             return Outputs{scaled_dot_product_attention(
                 x[0], x[1], x[2], x.size() > 3 ? x[3] : Tensor(), 0, a.value("is_causal", false))};
           }},
          {"mha",
           [](const Inputs& x, const Attrs& a) {
             return both(multi_head_attention_forward(x[0], x[1], x[2], a["num_heads"], x[3], x[4],
                                                      x[5], x[6], mha_options(x, a)));
           }},
      });
}

TEST_CASE(
    "nn::MultiheadAttention loaded with PyTorch's weights by name matches it, gradients included") {
  const std::string path = std::string(MINIDL_TEST_REFERENCE_DIR) + "/attn.json";
  std::ifstream in(path);
  const nlohmann::json file = nlohmann::json::parse(in);
  int checked = 0;
  for (const nlohmann::json& c : file.at("cases")) {
    if (c.at("op") != "mha") continue;
    const std::string name = c.at("name");
    CAPTURE(name);
    Inputs x;
    for (const nlohmann::json& j : c.at("inputs")) x.push_back(tensor_from_json(j));
    for (int i = 0; i < 3; ++i) x[i].requires_grad_();
    const Attrs& a = c.at("attrs");
    const MultiheadAttentionForwardOptions o = mha_options(x, a);
    nn::MultiheadAttention mha(x[0].size(-1), a["num_heads"], {.batch_first = o.batch_first});
    mha.load_state_dict({{"in_proj_weight", x[3]},
                         {"in_proj_bias", x[4]},
                         {"out_proj.weight", x[5]},
                         {"out_proj.bias", x[6]}});
    Outputs outs = both(mha(x[0], x[1], x[2], o.key_padding_mask, o.need_weights, o.attn_mask,
                            o.average_attn_weights));
    REQUIRE(outs.size() == c.at("outputs").size());
    Tensor loss = Tensor::zeros({});
    for (size_t k = 0; k < outs.size(); ++k) {
      CHECK(reference_error(outs[k], tensor_from_json(c.at("outputs")[k])) <= 1e-5);
      loss = loss + sum(outs[k] * tensor_from_json(c.at("cotangents")[k]));
    }
    loss.backward();
    const Tensor got[] = {x[0].grad(),
                          x[1].grad(),
                          x[2].grad(),
                          mha.in_proj_weight.grad(),
                          mha.in_proj_bias.grad(),
                          mha.out_proj.weight.grad(),
                          mha.out_proj.bias.grad()};
    for (size_t i = 0; i < 7; ++i) {
      CAPTURE(i);
      const double err = reference_error(got[i], tensor_from_json(c.at("grads")[i]));
      INFO("gradient " << i << ": relative error " << err);
      CHECK(err <= 1e-5);
    }
    ++checked;
  }
  CHECK(checked == 10);
}
