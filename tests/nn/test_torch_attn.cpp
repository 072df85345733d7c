// layer_norm, group_norm, scaled_dot_product_attention and multi-head
// attention against PyTorch 1.13: values and gradients from
// tests/reference/attn.json (make_attn.py), within 1e-5 relative; then
// nn::MultiheadAttention loaded with the same weights through
// load_state_dict (PyTorch's names: in_proj_weight or q/k/v_proj_weight,
// bias_k, bias_v; the file's attrs "params") gives the same values and its
// parameters the same gradients.
#include "torch_reference.h"

using namespace minidl;
using namespace minidl::testing;

namespace {

// inputs q, k, v, then the parameters attrs "params" names (PyTorch's
// state_dict names), then the masks attrs points at
std::map<std::string, Tensor> mha_params(const Inputs& x, const Attrs& a) {
  std::map<std::string, Tensor> p;
  size_t i = 3;
  for (const std::string& name : a["params"].get<std::vector<std::string>>()) p[name] = x[i++];
  return p;
}

Tensor param(const std::map<std::string, Tensor>& p, const std::string& name) {
  auto it = p.find(name);
  return it == p.end() ? Tensor() : it->second;
}

MultiheadAttentionForwardOptions mha_options(const Inputs& x, const Attrs& a) {
  const std::map<std::string, Tensor> p = mha_params(x, a);
  MultiheadAttentionForwardOptions o{.batch_first = a["batch_first"],
                                     .need_weights = a["need_weights"],
                                     .average_attn_weights = a["average_attn_weights"],
                                     .is_causal = a.value("is_causal", false),
                                     .bias_k = param(p, "bias_k"),
                                     .bias_v = param(p, "bias_v"),
                                     .add_zero_attn = a["add_zero_attn"],
                                     .use_separate_proj_weight = p.contains("q_proj_weight"),
                                     .q_proj_weight = param(p, "q_proj_weight"),
                                     .k_proj_weight = param(p, "k_proj_weight"),
                                     .v_proj_weight = param(p, "v_proj_weight")};
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
             const std::map<std::string, Tensor> p = mha_params(x, a);
             return both(multi_head_attention_forward(
                 x[0], x[1], x[2], a["num_heads"], param(p, "in_proj_weight"),
                 param(p, "in_proj_bias"), param(p, "out_proj.weight"), param(p, "out_proj.bias"),
                 mha_options(x, a)));
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
    const std::map<std::string, Tensor> p = mha_params(x, a);
    nn::MultiheadAttention mha(x[0].size(-1), a["num_heads"],
                               {.add_bias_kv = p.contains("bias_k"),
                                .add_zero_attn = o.add_zero_attn,
                                .kdim = x[1].size(-1),
                                .vdim = x[2].size(-1),
                                .batch_first = o.batch_first});
    TensorDict weights;
    for (const auto& [name, t] : p) weights.insert(name, t);
    mha.load_state_dict(weights);  // strict: PyTorch's names and shapes, no more, no fewer
    Outputs outs = both(mha(x[0], x[1], x[2], o.key_padding_mask, o.need_weights, o.attn_mask,
                            o.average_attn_weights, o.is_causal));
    REQUIRE(outs.size() == c.at("outputs").size());
    Tensor loss = Tensor::zeros({});
    for (size_t k = 0; k < outs.size(); ++k) {
      CHECK(reference_error(outs[k], tensor_from_json(c.at("outputs")[k])) <= 1e-5);
      loss = loss + sum(outs[k] * tensor_from_json(c.at("cotangents")[k]));
    }
    loss.backward();
    std::vector<std::pair<std::string, Tensor>> got = {
        {"query", x[0].grad()}, {"key", x[1].grad()}, {"value", x[2].grad()}};
    for (const std::string& name : a["params"].get<std::vector<std::string>>())
      got.emplace_back(name, mha.named_parameters().at(name).grad());
    REQUIRE(got.size() == 3 + a["params"].size());
    for (size_t i = 0; i < got.size(); ++i) {
      const std::string& input = got[i].first;
      CAPTURE(input);
      const double err = reference_error(got[i].second, tensor_from_json(c.at("grads")[i]));
      INFO("gradient of " << input << ": relative error " << err);
      CHECK(err <= 1e-5);
    }
    ++checked;
  }
  CHECK(checked == 21);
}
