// scaled_dot_product_attention and nn::MultiheadAttention: hand-computed
// values, masks' meanings, finite-difference gradients, PyTorch's names,
// a stack of blocks in a ModuleList, and errors naming both shapes.
// PyTorch's values: test_torch_attn.cpp.
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include "cell_gradcheck.h"
#include "check_close.h"
#include "gradcheck.h"

using namespace minidl;
using testing::cell_param_gradcheck;
using testing::check_close;
using testing::gradcheck;

namespace {
std::vector<double> values(const Tensor& t) {
  const std::vector<float> f = t.to_float_vector();
  return {f.begin(), f.end()};
}
double abs_max(const Tensor& t) {
  double m = 0;
  for (double v : values(t)) m = std::max(m, std::abs(v));
  return m;
}
}  // namespace

TEST_CASE("scaled_dot_product_attention by hand: softmax(q k^T / sqrt(E)) v") {
  Tensor q = Tensor::of({1, 0}, {1, 2}), k = Tensor::of({1, 0, 0, 1}, {2, 2});
  Tensor v = Tensor::of({1, 2, 3, 4}, {2, 2});
  // scores [1/sqrt(2), 0] -> weights [0.6697615, 0.3302385]
  check_close(scaled_dot_product_attention(q, k, v), {1.6604769, 2.6604769}, 1e-6);
  // a float mask is added: -inf on key 1 leaves key 0 alone
  check_close(scaled_dot_product_attention(q, k, v, Tensor::of({0, -INFINITY}, {1, 2})), {1, 2},
              1e-6);
  // an integer mask is boolean; in sdpa nonzero takes part (PyTorch 2)
  check_close(scaled_dot_product_attention(q, k, v, Tensor::of_ints({0, 1}, {1, 2})), {3, 4}, 1e-6);
  // causal: query 0 sees key 0 only, query 1 both
  Tensor q2 = Tensor::of({1, 0, 1, 0}, {2, 2});
  check_close(scaled_dot_product_attention(q2, k, v, {}, 0, /*is_causal=*/true),
              {1, 2, 1.6604769, 2.6604769}, 1e-6);
}

TEST_CASE(
    "scaled_dot_product_attention broadcasts batch dims, and its gradients match finite "
    "differences") {
  Tensor q = Tensor::randn({2, 2, 3, 4}), k = Tensor::randn({1, 2, 5, 4}),
         v = Tensor::randn({2, 1, 5, 3});
  Tensor y = scaled_dot_product_attention(q, k, v);
  CHECK(y.shape() == Shape{2, 2, 3, 3});
  // the same as one batch at a time
  Tensor y10 = scaled_dot_product_attention(narrow(narrow(q, 0, 1, 1), 1, 0, 1), narrow(k, 1, 0, 1),
                                            narrow(v, 0, 1, 1));
  check_close(y10, values(narrow(narrow(y, 0, 1, 1), 1, 0, 1)), 1e-6);
  Tensor mask = Tensor::randn({3, 5});
  CHECK_GRADCHECK_RESULT(gradcheck(
      [&](const std::vector<Tensor>& in) {
        return scaled_dot_product_attention(in[0], in[1], in[2], mask);
      },
      {Tensor::randn({2, 3, 4}), Tensor::randn({2, 5, 4}), Tensor::randn({2, 5, 2})}));
  CHECK_GRADCHECK_RESULT(gradcheck(
      [&](const std::vector<Tensor>& in) {
        return scaled_dot_product_attention(in[0], in[1], in[2], {}, 0, /*is_causal=*/true);
      },
      {Tensor::randn({1, 2, 4, 2}), Tensor::randn({1, 2, 4, 2}), Tensor::randn({1, 2, 4, 3})}));
}

TEST_CASE("scaled_dot_product_attention errors name every shape") {
  CHECK_THROWS_WITH(
      scaled_dot_product_attention(Tensor::zeros({2, 3, 4}), Tensor::zeros({2, 5, 3}),
                                   Tensor::zeros({2, 5, 4})),
      doctest::Contains("scaled_dot_product_attention: expected q [..., L, E], k [..., S, E], "
                        "v [..., S, Ev], got q [2, 3, 4], k [2, 5, 3], v [2, 5, 4]"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(Tensor::zeros({3, 4}), Tensor::zeros({5, 4}),
                                                 Tensor::zeros({5, 4}), Tensor::zeros({3, 4})),
                    doctest::Contains("[3, 4]"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(Tensor::zeros({3, 4}), Tensor::zeros({5, 4}),
                                                 Tensor::zeros({5, 4}), {}, 1.0),
                    doctest::Contains("expected 0 <= dropout_p < 1, got 1"));
}

TEST_CASE("MultiheadAttention: PyTorch's names and initial values, shapes both ways, unbatched") {
  manual_seed(3);
  nn::MultiheadAttention attn(8, 2);
  CHECK(attn.state_dict().keys() == std::vector<std::string>{"in_proj_weight", "in_proj_bias",
                                                             "out_proj.weight", "out_proj.bias"});
  CHECK(attn.in_proj_weight.shape() == Shape{24, 8});
  CHECK(abs_max(attn.in_proj_bias) == 0);
  CHECK(abs_max(attn.out_proj.bias) == 0);
  const double bound = std::sqrt(6.0 / (8 + 24));  // xavier_uniform on [3E, E]
  CHECK(abs_max(attn.in_proj_weight) <= bound);
  CHECK(abs_max(attn.in_proj_weight) > 0.8 * bound);
  CHECK(nn::MultiheadAttention(4, 2, {.bias = false}).state_dict().keys() ==
        std::vector<std::string>{"in_proj_weight", "out_proj.weight"});

  Tensor q = Tensor::randn({3, 2, 8}), kv = Tensor::randn({5, 2, 8});  // [L, N, E], [S, N, E]
  auto [y, w] = attn(q, kv, kv);
  CHECK(y.shape() == Shape{3, 2, 8});
  CHECK(w.shape() == Shape{2, 3, 5});
  check_close(w.sum({-1}), {1, 1, 1, 1, 1, 1}, 1e-6);
  auto [y_heads, w_heads] = attn(q, kv, kv, {}, true, {}, /*average_attn_weights=*/false);
  CHECK(w_heads.shape() == Shape{2, 2, 3, 5});
  check_close(w_heads.mean({1}), values(w), 1e-6);
  CHECK_FALSE(std::get<1>(attn(q, kv, kv, {}, /*need_weights=*/false)).defined());

  // the same weights batch first: the same numbers, transposed
  nn::MultiheadAttention bf(8, 2, {.batch_first = true});
  bf.load_state_dict(attn.state_dict());
  auto [y_bf, w_bf] = bf(transpose(q, 0, 1), transpose(kv, 0, 1), transpose(kv, 0, 1));
  check_close(y_bf, values(transpose(y, 0, 1)), 1e-6);
  check_close(w_bf, values(w), 1e-6);
  // unbatched [L, E]: batch element 1 alone
  Tensor q1 = narrow(q, 1, 1, 1).reshape({3, 8}), kv1 = narrow(kv, 1, 1, 1).reshape({5, 8});
  auto [y1, w1] = attn(q1, kv1, kv1);
  CHECK(y1.shape() == Shape{3, 8});
  check_close(y1, values(narrow(y, 1, 1, 1)), 1e-6);
  check_close(w1, values(narrow(w, 0, 1, 1)), 1e-6);
}

TEST_CASE(
    "MultiheadAttention masks: integer masks remove where nonzero; is_causal equals the triangle") {
  nn::MultiheadAttention attn(4, 2, {.batch_first = true});
  Tensor x = Tensor::randn({2, 3, 4});
  // key_padding_mask: batch 0 ignores key 2, batch 1 keys 1 and 2
  Tensor kpm = Tensor::of_ints({0, 0, 1, 0, 1, 1}, {2, 3});
  auto [y, w] = attn(x, x, x, kpm);
  check_close(narrow(w, 2, 2, 1), {0, 0, 0, 0, 0, 0}, 0);
  check_close(narrow(narrow(w, 0, 1, 1), 2, 0, 1), {1, 1, 1}, 1e-6);
  // a float key_padding_mask is added: -inf where the integer one is 1
  Tensor kpm_f = masked_fill(Tensor::zeros({2, 3}), kpm, -INFINITY);
  check_close(std::get<0>(attn(x, x, x, kpm_f)), values(y), 1e-6);
  // is_causal, an integer upper triangle and a float -inf one agree
  Tensor tri = Tensor::of_ints({0, 1, 1, 0, 0, 1, 0, 0, 0}, {3, 3});
  auto [yc, wc] = attn(x, x, x, {}, true, {}, true, /*is_causal=*/true);
  check_close(std::get<0>(attn(x, x, x, {}, true, tri)), values(yc), 1e-6);
  check_close(
      std::get<0>(attn(x, x, x, {}, true, masked_fill(Tensor::zeros({3, 3}), tri, -INFINITY))),
      values(yc), 1e-6);
  check_close(narrow(narrow(wc, 1, 0, 1), 2, 1, 2), {0, 0, 0, 0}, 0);  // query 0 sees key 0 only
}

TEST_CASE("MultiheadAttention gradients match finite differences (inputs and parameters)") {
  nn::MultiheadAttention attn(4, 2);
  Tensor q = Tensor::randn({2, 2, 4}), kv = Tensor::randn({3, 2, 4});
  Tensor kpm = Tensor::of_ints({0, 0, 1, 0, 0, 0}, {2, 3});
  CHECK_GRADCHECK_RESULT(gradcheck(
      [&](const std::vector<Tensor>& in) { return std::get<0>(attn(in[0], in[1], in[2], kpm)); },
      {q, kv, kv}));
  CHECK_GRADCHECK_RESULT(
      cell_param_gradcheck(attn, [&] { return std::get<0>(attn(q, kv, kv, kpm)); }));
}

TEST_CASE("MultiheadAttention dropout acts in training mode only") {
  nn::MultiheadAttention attn(4, 1, {.dropout = 0.5, .batch_first = true});
  Tensor x = Tensor::randn({2, 6, 4});
  manual_seed(1);
  auto [w_train_out, w_train] = attn(x, x, x);
  attn.eval();
  auto [y_eval, w_eval] = attn(x, x, x);
  CHECK(values(w_train) != values(w_eval));
  check_close(w_eval.sum({-1}), std::vector<double>(12, 1.0), 1e-6);
  CHECK(values(std::get<0>(attn(x, x, x))) == values(y_eval));
}

TEST_CASE("transformer blocks in a ModuleList: state_dict names compose") {
  struct Block : nn::Cell {
    nn::LayerNorm norm{8};
    nn::MultiheadAttention attn{8, 2, {.batch_first = true}};
    Block() { register_cells({{"norm", norm}, {"attn", attn}}); }
    Tensor forward(const Tensor& x) override {
      Tensor h = norm(x);
      return x + std::get<0>(attn(h, h, h, {}, false, {}, true, /*is_causal=*/true));
    }
  };
  struct Model : nn::Cell {
    nn::ModuleList blocks{std::make_shared<Block>(), std::make_shared<Block>()};
    Model() { register_cell("blocks", blocks); }
    Tensor forward(const Tensor& x) override {
      Tensor h = x;
      for (auto& b : blocks) h = (*b)(h);
      return h;
    }
  } model;
  const std::vector<std::string> keys = model.state_dict().keys();
  REQUIRE(keys.size() == 12);
  CHECK(keys[2] == "blocks.0.attn.in_proj_weight");
  CHECK(keys[11] == "blocks.1.attn.out_proj.bias");
  Tensor x = Tensor::randn({2, 5, 8});
  Tensor y = model(x);
  CHECK(y.shape() == Shape{2, 5, 8});
  y.sum().backward();
  for (const auto& item : model.named_parameters()) {  // no structured binding: CAPTURE (clang 14)
    const std::string& name = item.first;
    CAPTURE(name);
    CHECK(item.second.grad().defined());
  }
}

TEST_CASE("MultiheadAttention errors name the shapes and what was expected") {
  CHECK_THROWS_WITH(
      nn::MultiheadAttention(10, 3),
      doctest::Contains("MultiheadAttention: expected embed_dim divisible by num_heads"));
  CHECK_THROWS_WITH(nn::MultiheadAttention(10, 3),
                    doctest::Contains("got embed_dim 10, num_heads 3"));
  nn::MultiheadAttention attn(4, 2);
  Tensor q = Tensor::zeros({3, 2, 4});
  CHECK_THROWS_WITH(
      attn(Tensor::zeros({3, 2, 5}), q, q),
      doctest::Contains("MultiheadAttention(4, 2): expected query [..., 4], key [..., kdim = 4], "
                        "value [..., vdim = 4], got query [3, 2, 5], key [3, 2, 4], value "
                        "[3, 2, 4]"));
  CHECK_THROWS_WITH(
      attn(q, Tensor::zeros({5, 3, 4}), Tensor::zeros({5, 3, 4})),
      doctest::Contains("expected query [L, N, E], key and value [S, N, E], got query "
                        "[3, 2, 4], key [5, 3, 4], value [5, 3, 4]"));
  CHECK_THROWS_WITH(attn(q, q, Tensor::zeros({4, 2, 4})), doctest::Contains("value [4, 2, 4]"));
  CHECK_THROWS_WITH(attn(q, q, q, Tensor::zeros({2, 4})),
                    doctest::Contains("expected key_padding_mask [N, S] = [2, 3], got [2, 4]"));
  CHECK_THROWS_WITH(
      attn(q, q, q, {}, true, Tensor::zeros({3, 4})),
      doctest::Contains(
          "expected attn_mask [L, S] = [3, 3] or [N * H, L, S] = [4, 3, 3], got [3, 4]"));
  CHECK_THROWS_WITH(
      multi_head_attention_forward(q, q, q, 3, attn.in_proj_weight, {}, attn.out_proj.weight, {}),
      doctest::Contains("embed_dim 4 is not divisible by num_heads 3"));
  CHECK_THROWS_WITH(
      multi_head_attention_forward(q, q, q, 2, Tensor::zeros({4, 4}), {}, attn.out_proj.weight, {}),
      doctest::Contains("expected in_proj_weight [12, 4]"));
}

TEST_CASE("MultiheadAttention kdim, vdim, add_bias_kv: PyTorch's names, shapes, initial values") {
  manual_seed(5);
  nn::MultiheadAttention attn(64, 4,
                              {.add_bias_kv = true, .add_zero_attn = true, .kdim = 32, .vdim = 16});
  CHECK(attn.state_dict().keys() ==
        std::vector<std::string>{"q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias",
                                 "bias_k", "bias_v", "out_proj.weight", "out_proj.bias"});
  CHECK_FALSE(attn.in_proj_weight.defined());
  CHECK(attn.k_proj_weight.shape() == Shape{64, 32});
  CHECK(attn.v_proj_weight.shape() == Shape{64, 16});
  CHECK(attn.bias_k.shape() == Shape{1, 1, 64});
  CHECK(abs_max(attn.in_proj_bias) == 0);
  for (const Tensor& w : {attn.q_proj_weight, attn.k_proj_weight, attn.v_proj_weight}) {
    const double bound = std::sqrt(6.0 / double(w.size(0) + w.size(1)));  // xavier_uniform
    CHECK(abs_max(w) <= bound);
    CHECK(abs_max(w) > 0.8 * bound);
  }
  // xavier_normal on [1, 1, E]: fan_in = fan_out = E, std sqrt(2 / 2E) = 0.125
  double sq = 0;
  for (double v : values(cat({attn.bias_k, attn.bias_v}))) sq += v * v;
  CHECK(std::sqrt(sq / 128) == doctest::Approx(0.125).epsilon(0.25));
  // kdim = vdim = embed_dim keeps the packed in_proj_weight
  CHECK(nn::MultiheadAttention(8, 2, {.kdim = 8, .vdim = 8}).state_dict().keys() ==
        std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight",
                                 "out_proj.bias"});
  CHECK(nn::MultiheadAttention(8, 2, {.vdim = 3}).k_proj_weight.shape() == Shape{8, 8});

  // two keys more than given: bias_k and the zero one
  auto [y, w] =
      attn(Tensor::randn({3, 2, 64}), Tensor::randn({5, 2, 32}), Tensor::randn({5, 2, 16}));
  CHECK(y.shape() == Shape{3, 2, 64});
  CHECK(w.shape() == Shape{2, 3, 7});
  check_close(w.sum({-1}), std::vector<double>(6, 1.0), 1e-6);
}

TEST_CASE(
    "bias_kv and add_zero_attn by hand: the appended keys stay when every given one is masked") {
  // E = 4, H = 2; out_proj the identity plus 0.5, so y is the attended value + 0.5
  Tensor q = Tensor::randn({2, 1, 4}), kv = Tensor::randn({3, 1, 4});  // [L, N, E], [S, N, E]
  Tensor w_in = Tensor::randn({12, 4}), eye = Tensor::zeros({4, 4});
  for (int i = 0; i < 4; ++i) eye.data<float>()[i * 5] = 1;
  Tensor b_out = Tensor::full({4}, 0.5), all = Tensor::of_ints({1, 1, 1}, {1, 3});
  Tensor bias_k = Tensor::zeros({1, 1, 4}), bias_v = Tensor::of({1, 2, 3, 4}, {1, 1, 4});
  // the zero key alone: weights [0, 0, 0, 1], the zero value
  auto [y0, w0] = multi_head_attention_forward(q, kv, kv, 2, w_in, {}, eye, b_out,
                                               {.key_padding_mask = all, .add_zero_attn = true});
  check_close(y0, std::vector<double>(8, 0.5), 1e-6);
  check_close(w0, {0, 0, 0, 1, 0, 0, 0, 1}, 1e-6);
  // bias_k alone: its value bias_v
  auto [y1, w1] =
      multi_head_attention_forward(q, kv, kv, 2, w_in, {}, eye, b_out,
                                   {.key_padding_mask = all, .bias_k = bias_k, .bias_v = bias_v});
  check_close(y1, {1.5, 2.5, 3.5, 4.5, 1.5, 2.5, 3.5, 4.5}, 1e-6);
  check_close(w1, {0, 0, 0, 1, 0, 0, 0, 1}, 1e-6);
  // both, bias_k zero: scores 0 and 0, half of bias_v; an integer attn_mask removing every key
  // leaves them too
  auto [y2, w2] =
      multi_head_attention_forward(q, kv, kv, 2, w_in, {}, eye, b_out,
                                   {.attn_mask = Tensor::of_ints({1, 1, 1, 1, 1, 1}, {2, 3}),
                                    .bias_k = bias_k,
                                    .bias_v = bias_v,
                                    .add_zero_attn = true});
  check_close(y2, {1, 1.5, 2, 2.5, 1, 1.5, 2, 2.5}, 1e-6);
  check_close(w2, {0, 0, 0, 0.5, 0.5, 0, 0, 0, 0.5, 0.5}, 1e-6);
}

TEST_CASE("MultiheadAttention with bias_kv: is_causal equals the triangular attn_mask") {
  nn::MultiheadAttention attn(4, 2, {.add_bias_kv = true, .add_zero_attn = true});
  Tensor x = Tensor::randn({3, 2, 4});
  Tensor tri = Tensor::of_ints({0, 1, 1, 0, 0, 1, 0, 0, 0}, {3, 3});
  auto [yc, wc] = attn(x, x, x, {}, true, {}, true, /*is_causal=*/true);
  auto [ym, wm] = attn(x, x, x, {}, true, tri);
  check_close(yc, values(ym), 1e-6);
  check_close(wc, values(wm), 1e-6);
  CHECK(wc.shape() == Shape{2, 3, 5});
  // query 0 sees key 0 and the two appended ones
  check_close(narrow(narrow(wc, 1, 0, 1), 2, 1, 2), {0, 0, 0, 0}, 0);
  CHECK(values(narrow(narrow(wc, 1, 0, 1), 2, 3, 2))[0] > 0);
}

TEST_CASE("MultiheadAttention with every option: gradients match finite differences") {
  manual_seed(11);
  nn::MultiheadAttention attn(
      4, 2,
      {.add_bias_kv = true, .add_zero_attn = true, .kdim = 3, .vdim = 2, .batch_first = true});
  // the biases start at zero: move them so their gradients see the whole formula
  for (Tensor p : {attn.in_proj_bias, attn.out_proj.bias}) {
    NoGradGuard ng;
    p.copy_(Tensor::randn(p.shape()) * 0.5);
  }
  Tensor q = Tensor::randn({2, 2, 4}), k = Tensor::randn({2, 3, 3}), v = Tensor::randn({2, 3, 2});
  Tensor kpm = Tensor::of_ints({0, 0, 1, 1, 1, 1}, {2, 3});  // batch 1: every given key masked
  Tensor mask = Tensor::randn({2, 3});
  CHECK_GRADCHECK_RESULT(gradcheck(
      [&](const std::vector<Tensor>& in) {
        return std::get<0>(attn(in[0], in[1], in[2], kpm, true, mask));
      },
      {q, k, v}));
  CHECK_GRADCHECK_RESULT(
      cell_param_gradcheck(attn, [&] { return std::get<0>(attn(q, k, v, kpm, true, mask)); }));
}

TEST_CASE(
    "MultiheadAttention kdim, vdim and bias_kv errors name the shapes and what was expected") {
  nn::MultiheadAttention attn(4, 2, {.kdim = 3, .vdim = 5});
  Tensor q = Tensor::zeros({2, 1, 4}), k = Tensor::zeros({3, 1, 3}), v = Tensor::zeros({3, 1, 5});
  CHECK_THROWS_WITH(attn(q, v, v),
                    doctest::Contains("MultiheadAttention(4, 2): expected query [..., 4], key "
                                      "[..., kdim = 3], value [..., vdim = 5], got query "
                                      "[2, 1, 4], key [3, 1, 5], value [3, 1, 5]"));
  CHECK_THROWS_WITH(attn(q, k, k), doctest::Contains("value [3, 1, 3]"));
  CHECK_THROWS_WITH(attn(q, k, Tensor::zeros({4, 1, 5})),
                    doctest::Contains("expected query [L, N, E], key [S, N, kdim] and value "
                                      "[S, N, vdim], got query [2, 1, 4], key [3, 1, 3], value "
                                      "[4, 1, 5]"));
  CHECK_THROWS_WITH(nn::MultiheadAttention(4, 2, {.kdim = -1}),
                    doctest::Contains("kdim, vdim >= 0 (0: embed_dim), got embed_dim 4, "
                                      "num_heads 2, dropout 0, kdim -1, vdim 0"));
  // the free function: a key of another size needs the separate weights
  const Tensor b_in = attn.in_proj_bias, w_out = attn.out_proj.weight;
  CHECK_THROWS_WITH(
      multi_head_attention_forward(q, k, v, 2, Tensor::zeros({12, 4}), b_in, w_out, {}),
      doctest::Contains("expected query [L, N, E], key and value [S, N, E], got query "
                        "[2, 1, 4], key [3, 1, 3], value [3, 1, 5]"));
  CHECK_THROWS_WITH(
      multi_head_attention_forward(q, k, v, 2, {}, b_in, w_out, {},
                                   {.use_separate_proj_weight = true,
                                    .q_proj_weight = attn.q_proj_weight,
                                    .k_proj_weight = attn.v_proj_weight,
                                    .v_proj_weight = attn.v_proj_weight}),
      doctest::Contains("expected q_proj_weight [4, 4], k_proj_weight [4, 3], v_proj_weight "
                        "[4, 5], in_proj_bias [12], out_proj weight [4, 4], bias [4] for E = 4, "
                        "kdim = 3, vdim = 5, got [4, 4], [4, 5], [4, 5], [12], [4, 4], none"));
  CHECK_THROWS_WITH(
      multi_head_attention_forward(q, q, q, 2, Tensor::zeros({12, 4}), {}, w_out, {},
                                   {.bias_k = Tensor::zeros({1, 1, 4})}),
      doctest::Contains("expected bias_k and bias_v [1, 1, E] = [1, 1, 4] (both or neither), "
                        "got bias_k [1, 1, 4], bias_v none"));
  CHECK_THROWS_WITH(multi_head_attention_forward(
                        q, q, q, 2, Tensor::zeros({12, 4}), {}, w_out, {},
                        {.bias_k = Tensor::zeros({1, 4}), .bias_v = Tensor::zeros({1, 4})}),
                    doctest::Contains("got bias_k [1, 4], bias_v [1, 4]"));
}
