// nn::RNN, LSTM and GRU: steps by hand (gate order, GRU's r * (W_hn h + b_hn)),
// PyTorch's parameter names, shapes and init, finite-difference gradients,
// state carried across calls, dropout between layers, scopes, and errors.
// Values and gradients against PyTorch: test_torch_rnn.cpp.
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <cmath>

#include "cell_gradcheck.h"
#include "check_close.h"
#include "gradcheck.h"

using namespace minidl;
using testing::cell_param_gradcheck;
using testing::check_close;
using testing::gradcheck;

namespace {
double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }
std::vector<double> values(const Tensor& t) {
  const std::vector<float> v = t.to_float_vector();
  return {v.begin(), v.end()};
}
Tensor flat(std::initializer_list<Tensor> ts) {
  std::vector<Tensor> parts;
  for (const Tensor& t : ts) parts.push_back(t.reshape({-1}));
  return concat(parts);
}
}  // namespace

TEST_CASE("RNN steps by hand: tanh and relu, with an initial state") {
  const TensorDict params{{"weight_ih_l0", Tensor::of({1, 2}, {1, 2})},
                          {"weight_hh_l0", Tensor::of({0.5}, {1, 1})},
                          {"bias_ih_l0", Tensor::of({0.1})},
                          {"bias_hh_l0", Tensor::of({-0.2})}};
  Tensor x = Tensor::of({1, -1, 0.5, 0.5}, {2, 1, 2});  // T = 2, B = 1, I = 2
  Tensor h0 = Tensor::of({2}, {1, 1, 1});
  nn::RNN rnn{2, 1};
  rnn.load_state_dict(params);
  // h1 = tanh(1 - 2 + 0.5 * 2 + 0.1 - 0.2), h2 = tanh(0.5 + 1 + 0.5 h1 + 0.1 - 0.2)
  const double h1 = std::tanh(-0.1), h2 = std::tanh(1.4 + 0.5 * h1);
  auto [y, h_n] = rnn(x, h0);
  CHECK(y.shape() == Shape{2, 1, 1});
  check_close(y, {h1, h2});
  check_close(h_n, {h2});
  nn::RNN relu_rnn{2, 1, {.nonlinearity = "relu"}};
  relu_rnn.load_state_dict(params);
  auto [y_relu, h_relu] = relu_rnn(x, h0);
  check_close(y_relu, {0, 1.4});  // relu(-0.1) = 0, then relu(1.4 + 0.5 * 0)
  // one step, unbatched: x [1, 2], h0 [1, 1] -> y [1, 1], h_n [1, 1]
  auto [y1, h1_n] = rnn(Tensor::of({1, -1}, {1, 2}), Tensor::of({2}, {1, 1}));
  CHECK(y1.shape() == Shape{1, 1});
  CHECK(h1_n.shape() == Shape{1, 1});
  check_close(y1, {h1});
}

TEST_CASE(
    "LSTM gates are i, f, g, o and GRU's are r, z, n with n = tanh(x_n + r * (W_hn h + b_hn))") {
  // Zero weights: the gates are bias_ih + bias_hh.
  nn::LSTM lstm{1, 1};
  lstm.load_state_dict({{"weight_ih_l0", Tensor::zeros({4, 1})},
                        {"weight_hh_l0", Tensor::zeros({4, 1})},
                        {"bias_ih_l0", Tensor::of({0.5, -1, 2, 0.3})},
                        {"bias_hh_l0", Tensor::of({0.1, 0.1, 0.1, 0.1})}});
  auto [y, s] =
      lstm(Tensor::of({3}, {1, 1, 1}), {Tensor::of({9}, {1, 1, 1}), Tensor::of({0.7}, {1, 1, 1})});
  const double c = sigmoid(-0.9) * 0.7 + sigmoid(0.6) * std::tanh(2.1);
  const double h = sigmoid(0.4) * std::tanh(c);
  check_close(s.c, {c});
  check_close(s.h, {h});
  check_close(y, {h});

  nn::GRU gru{1, 1};
  gru.load_state_dict({{"weight_ih_l0", Tensor::zeros({3, 1})},
                       {"weight_hh_l0", Tensor::zeros({3, 1})},
                       {"bias_ih_l0", Tensor::of({0.2, -0.3, 0.5})},
                       {"bias_hh_l0", Tensor::of({0.1, 0.4, -0.6})}});
  auto [gy, gh] = gru(Tensor::of({3}, {1, 1, 1}), Tensor::of({0.8}, {1, 1, 1}));
  const double r = sigmoid(0.3), z = sigmoid(0.1), n = std::tanh(0.5 + r * -0.6);
  check_close(gh, {(1 - z) * n + z * 0.8});
  check_close(gy, {(1 - z) * n + z * 0.8});
}

TEST_CASE("RNN, LSTM, GRU parameters: PyTorch's names, shapes and U(-1/sqrt(H), 1/sqrt(H)) init") {
  manual_seed(11);
  nn::LSTM lstm{5, 16, {.num_layers = 2}};
  const TensorDict p = lstm.named_parameters();
  CHECK(p.keys() == std::vector<std::string>{"weight_ih_l0", "weight_hh_l0", "bias_ih_l0",
                                             "bias_hh_l0", "weight_ih_l1", "weight_hh_l1",
                                             "bias_ih_l1", "bias_hh_l1"});
  CHECK(p["weight_ih_l0"].shape() == Shape{64, 5});
  CHECK(p["weight_hh_l0"].shape() == Shape{64, 16});
  CHECK(p["weight_ih_l1"].shape() == Shape{64, 16});
  CHECK(p["bias_hh_l1"].shape() == Shape{64});
  CHECK(lstm.weight_hh[1].same(p["weight_hh_l1"]));
  for (const auto& item : p) {  // no structured binding: CAPTURE's lambda (clang 14)
    const std::string& name = item.first;
    CAPTURE(name);
    const std::vector<float> v = item.second.to_float_vector();
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    CHECK(*lo >= -0.25f);  // 1 / sqrt(16)
    CHECK(*hi <= 0.25f);
    CHECK(*hi - *lo > 0.4f);  // spread over the range
  }
  CHECK(nn::GRU(3, 4).named_parameters()["weight_hh_l0"].shape() == Shape{12, 4});
  nn::RNN both{3, 4, {.num_layers = 2, .bias = false, .bidirectional = true}};
  CHECK(both.named_parameters().keys() ==
        std::vector<std::string>{"weight_ih_l0", "weight_hh_l0", "weight_ih_l0_reverse",
                                 "weight_hh_l0_reverse", "weight_ih_l1", "weight_hh_l1",
                                 "weight_ih_l1_reverse", "weight_hh_l1_reverse"});
  CHECK(both.named_parameters()["weight_ih_l1_reverse"].shape() == Shape{4, 8});  // [H, 2H]
  auto [y, h_n] = both(Tensor::zeros({5, 2, 3}));
  CHECK(y.shape() == Shape{5, 2, 8});
  CHECK(h_n.shape() == Shape{4, 2, 4});
  CHECK(nn::RNN(3, 4).named_parameters()["weight_ih_l0"].shape() == Shape{4, 3});
  CHECK(nn::RNN(3, 4, {.bias = false}).named_parameters().keys() ==
        std::vector<std::string>{"weight_ih_l0", "weight_hh_l0"});
}

TEST_CASE("LSTM and GRU gradients match finite differences (inputs, states, parameters)") {
  manual_seed(21);
  Tensor x = Tensor::randn({3, 2, 2}), h0 = Tensor::randn({2, 2, 3}), c0 = Tensor::randn({2, 2, 3});
  nn::LSTM lstm{2, 3, {.num_layers = 2}};
  auto run_lstm = [&](const Tensor& xs, const Tensor& h, const Tensor& c) {
    auto [y, s] = lstm(xs, {h, c});
    return flat({y, s.h, s.c});
  };
  CHECK_GRADCHECK_RESULT(gradcheck(
      [&](const std::vector<Tensor>& in) { return run_lstm(in[0], in[1], in[2]); }, {x, h0, c0}));
  CHECK_GRADCHECK_RESULT(cell_param_gradcheck(lstm, [&] { return run_lstm(x, h0, c0); }));

  nn::GRU gru{2, 3, {.num_layers = 2, .batch_first = true}};
  auto run_gru = [&](const Tensor& xs, const Tensor& h) {
    auto [y, h_n] = gru(xs, h);
    return flat({y, h_n});
  };
  Tensor xb = Tensor::randn({2, 3, 2});  // [B, T, I]
  CHECK_GRADCHECK_RESULT(
      gradcheck([&](const std::vector<Tensor>& in) { return run_gru(in[0], in[1]); }, {xb, h0}));
  CHECK_GRADCHECK_RESULT(cell_param_gradcheck(gru, [&] { return run_gru(xb, h0); }));
}

TEST_CASE("LSTM with proj_size: h_t = W_hr (o * tanh(c_t)), h of size P, c of size H") {
  // I = 1, H = 2, P = 1: W_ih = 0, W_hh = 0.5, so every gate is its bias + 0.5 h_{t-1}
  nn::LSTM lstm{1, 2, {.proj_size = 1}};
  CHECK(lstm.named_parameters().keys() ==
        std::vector<std::string>{"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                                 "weight_hr_l0"});
  const std::vector<float> b = {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f};  // i, f, g, o
  lstm.load_state_dict({{"weight_ih_l0", Tensor::zeros({8, 1})},
                        {"weight_hh_l0", Tensor::full({8, 1}, 0.5)},
                        {"bias_ih_l0", Tensor::from_vector(b)},
                        {"bias_hh_l0", Tensor::zeros({8})},
                        {"weight_hr_l0", Tensor::of({2, -1}, {1, 2})}});
  double h = 0.25, c[2] = {1, -1};  // h0, c0
  std::vector<double> ys;
  for (int t = 0; t < 2; ++t) {
    double m[2];
    for (int u = 0; u < 2; ++u) {
      auto gate = [&](int k) { return b[2 * k + u] + 0.5 * h; };
      c[u] = sigmoid(gate(1)) * c[u] + sigmoid(gate(0)) * std::tanh(gate(2));
      m[u] = sigmoid(gate(3)) * std::tanh(c[u]);
    }
    h = 2 * m[0] - m[1];  // W_hr [1, 2]
    ys.push_back(h);
  }
  Tensor x = Tensor::zeros({2, 1, 1});  // T = 2, B = 1, I = 1
  auto [y, s] = lstm(x, {Tensor::of({0.25}, {1, 1, 1}), Tensor::of({1, -1}, {1, 1, 2})});
  CHECK(y.shape() == Shape{2, 1, 1});
  CHECK(s.h.shape() == Shape{1, 1, 1});
  CHECK(s.c.shape() == Shape{1, 1, 2});
  check_close(y, ys);
  check_close(s.h, {ys[1]});
  check_close(s.c, {c[0], c[1]});

  // shapes: layer 1 reads D*P, y and h have P features, c has H
  nn::LSTM deep{3, 5, {.num_layers = 2, .batch_first = true, .bidirectional = true,
                       .proj_size = 2}};
  const TensorDict p = deep.named_parameters();
  CHECK(p.size() == 20);
  CHECK(p["weight_ih_l1_reverse"].shape() == Shape{20, 4});
  CHECK(p["weight_hh_l0"].shape() == Shape{20, 2});
  CHECK(p["weight_hr_l1_reverse"].shape() == Shape{2, 5});
  auto [yd, sd] = deep(Tensor::zeros({4, 6, 3}));
  CHECK(yd.shape() == Shape{4, 6, 4});
  CHECK(sd.h.shape() == Shape{4, 4, 2});
  CHECK(sd.c.shape() == Shape{4, 4, 5});
  for (const auto& entry : p) {  // U(-1/sqrt(H), 1/sqrt(H)) for every parameter
    CAPTURE(entry.first);  // (not a structured binding: clang 14 cannot capture one)
    CHECK(max(abs(entry.second)).item() <= 1 / std::sqrt(5.0));
  }
}

TEST_CASE("LSTM with proj_size: gradients match finite differences") {
  manual_seed(22);
  Tensor x = Tensor::randn({3, 2, 2}), h0 = Tensor::randn({4, 2, 2}), c0 = Tensor::randn({4, 2, 3});
  nn::LSTM lstm{2, 3, {.num_layers = 2, .bidirectional = true, .proj_size = 2}};
  auto run = [&](const Tensor& xs, const Tensor& h, const Tensor& c) {
    auto [y, s] = lstm(xs, {h, c});
    return flat({y, s.h, s.c});
  };
  CHECK_GRADCHECK_RESULT(gradcheck(
      [&](const std::vector<Tensor>& in) { return run(in[0], in[1], in[2]); }, {x, h0, c0}));
  CHECK_GRADCHECK_RESULT(cell_param_gradcheck(lstm, [&] { return run(x, h0, c0); }));
}

TEST_CASE("A sequence in two calls, passing the state, equals one call") {
  manual_seed(4);
  nn::LSTM lstm{3, 4, {.num_layers = 2, .batch_first = true}};
  Tensor x = Tensor::randn({2, 5, 3});  // [B, T, I]
  auto [y, s] = lstm(x);
  auto [y_a, s_a] = lstm(transpose(transpose(x, 0, 1).slice(0, 2), 0, 1));
  auto [y_b, s_b] = lstm(transpose(transpose(x, 0, 1).slice(2, 5), 0, 1), s_a);
  CHECK(y.shape() == Shape{2, 5, 4});
  CHECK(s.h.shape() == Shape{2, 2, 4});  // [L, B, H], also with batch_first
  check_close(transpose(y, 0, 1).slice(2, 5), values(transpose(y_b, 0, 1)), 1e-6);
  check_close(s.h, values(s_b.h), 1e-6);
  check_close(s.c, values(s_b.c), 1e-6);
}

TEST_CASE("dropout acts between layers in training mode only") {
  manual_seed(8);
  nn::GRU gru{3, 4, {.num_layers = 2, .dropout = 0.5}};
  nn::GRU plain{3, 4, {.num_layers = 2}};
  plain.load_state_dict(gru.state_dict());
  Tensor x = Tensor::randn({5, 2, 3});
  const std::vector<double> want = values(plain(x).first);
  CHECK(values(gru(x).first) != want);  // training: dropped
  gru.eval();
  check_close(gru(x).first, want, 0);
  nn::RNN one{3, 4, {.dropout = 0.5}};  // one layer: nothing between layers
  nn::RNN one_plain{3, 4};
  one_plain.load_state_dict(one.state_dict());
  check_close(one(x).first, values(one_plain(x).first), 0);
}

TEST_CASE("operator() names the layer's autograd scope") {
  nn::LSTM lstm{2, 3};
  set_scope_tracking(true);
  auto [y, s] = lstm(Tensor::randn({2, 1, 2}));
  set_scope_tracking(false);
  REQUIRE(y.impl().grad_fn);
  REQUIRE(y.impl().grad_fn->scope);
  CHECK(std::string(y.impl().grad_fn->scope) == "LSTM");
}

TEST_CASE("recurrent layers reject bad inputs, states and options, naming both shapes") {
  nn::RNN rnn{5, 6, {.num_layers = 2}};
  CHECK_THROWS_WITH_AS(rnn(Tensor::zeros({4, 3, 7})),
                       doctest::Contains("RNN(5, 6, num_layers=2): expected input [T, B, I] or "
                                         "unbatched [T, I] with I = input_size = 5, got [4, 3, 7]"),
                       Error);
  CHECK_THROWS_WITH_AS(rnn(Tensor::zeros({4, 3, 2, 5})), doctest::Contains("got [4, 3, 2, 5]"),
                       Error);
  CHECK_THROWS_WITH_AS(rnn(Tensor::zeros({4, 3, 5}), Tensor::zeros({1, 3, 6})),
                       doctest::Contains("expected h0 [2, 3, 6] ([num_layers, batch, hidden_size]) "
                                         "for input [4, 3, 5], got [1, 3, 6]"),
                       Error);
  nn::GRU gru{5, 6, {.batch_first = true}};
  CHECK_THROWS_WITH_AS(gru(Tensor::zeros({3, 4, 5}), Tensor::zeros({1, 4, 6})),
                       doctest::Contains("expected h0 [1, 3, 6]"), Error);  // B = 3 comes first
  CHECK_THROWS_WITH_AS(gru(Tensor::zeros({4, 5}), Tensor::zeros({1, 1, 6})),
                       doctest::Contains("expected h0 [1, 6] ([num_layers, hidden_size])"), Error);
  nn::LSTM lstm{5, 6};
  CHECK_THROWS_WITH_AS(lstm(Tensor::zeros({4, 3, 5}), {Tensor::zeros({1, 3, 6}), Tensor()}),
                       doctest::Contains("give both h0 and c0, or neither"), Error);
  CHECK_THROWS_WITH_AS(
      lstm(Tensor::zeros({4, 3, 5}), {Tensor::zeros({1, 3, 6}), Tensor::zeros({3, 6})}),
      doctest::Contains("expected c0 [1, 3, 6]"), Error);
  nn::GRU both{5, 6, {.num_layers = 2, .bidirectional = true}};
  CHECK_THROWS_WITH_AS(
      both(Tensor::zeros({4, 3, 5}), Tensor::zeros({2, 3, 6})),
      doctest::Contains("GRU(5, 6, num_layers=2, bidirectional): expected h0 [4, 3, "
                        "6] ([2 * num_layers, batch, hidden_size])"),
      Error);
  CHECK_THROWS_WITH_AS(nn::GRU(5, 6, {.dropout = 1}),
                       doctest::Contains("dropout 1 is outside [0, 1)"), Error);
  CHECK_THROWS_WITH_AS(nn::RNN(5, 6, {.nonlinearity = "gelu"}),
                       doctest::Contains("nonlinearity 'gelu' is not 'tanh' or 'relu'"), Error);
  CHECK_THROWS_WITH_AS(nn::LSTM(5, 6, {.proj_size = 6}),
                       doctest::Contains("LSTM(5, 6, num_layers=1, proj_size=6): expected "
                                         "proj_size 0 (no projection) or from 1 to hidden_size - "
                                         "1 = 5, got 6"),
                       Error);
  CHECK_THROWS_WITH_AS(nn::LSTM(5, 6, {.proj_size = -1}), doctest::Contains("got -1"), Error);
  nn::LSTM proj{5, 6, {.proj_size = 2}};
  CHECK_THROWS_WITH_AS(
      proj(Tensor::zeros({4, 3, 5}), {Tensor::zeros({1, 3, 6}), Tensor::zeros({1, 3, 6})}),
      doctest::Contains("expected h0 [1, 3, 2] ([num_layers, batch, proj_size]) for input [4, 3, "
                        "5], got [1, 3, 6]"),
      Error);
  CHECK_THROWS_WITH_AS(
      proj(Tensor::zeros({4, 3, 5}), {Tensor::zeros({1, 3, 2}), Tensor::zeros({1, 3, 2})}),
      doctest::Contains("expected c0 [1, 3, 6] ([num_layers, batch, hidden_size])"), Error);
  CHECK_THROWS_AS(nn::RNN(0, 6), Error);
}

TEST_CASE("RNNCell, LSTMCell, GRUCell: one step of their layers, batched or not") {
  manual_seed(6);
  nn::LSTM lstm{3, 4};
  nn::LSTMCell lstm_cell{3, 4};
  CHECK(lstm_cell.named_parameters().keys() ==
        std::vector<std::string>{"weight_ih", "weight_hh", "bias_ih", "bias_hh"});
  for (const auto& [name, t] : lstm_cell.named_parameters())
    Tensor(t).copy_(lstm.named_parameters()[name + "_l0"]);
  Tensor x = Tensor::randn({1, 2, 3}), h = Tensor::randn({1, 2, 4}), c = Tensor::randn({1, 2, 4});
  auto [y, s] = lstm(x, {h, c});
  nn::LSTMState one = lstm_cell(x.reshape({2, 3}), {h.reshape({2, 4}), c.reshape({2, 4})});
  check_close(one.h, values(s.h), 1e-6);
  check_close(one.c, values(s.c), 1e-6);
  nn::LSTMState single = lstm_cell(x.reshape({2, 3}).slice(1, 2).reshape({3}));  // unbatched [I]
  CHECK(single.h.shape() == Shape{4});
  CHECK(single.c.shape() == Shape{4});

  nn::RNNCell rnn_cell{2, 1, /*bias=*/true, /*nonlinearity=*/"relu"};
  rnn_cell.load_state_dict({{"weight_ih", Tensor::of({1, 2}, {1, 2})},
                            {"weight_hh", Tensor::of({0.5}, {1, 1})},
                            {"bias_ih", Tensor::of({0.1})},
                            {"bias_hh", Tensor::of({-0.2})}});
  check_close(rnn_cell(Tensor::of({0.5, 0.5}, {1, 2}), Tensor::of({2}, {1, 1})), {1.5 + 1 - 0.1});
  check_close(rnn_cell(Tensor::of({0.5, 0.5})), {1.5 - 0.1});  // zero state, unbatched

  nn::GRUCell gru_cell{3, 4, /*bias=*/false};
  CHECK(gru_cell.named_parameters().keys() == std::vector<std::string>{"weight_ih", "weight_hh"});
  CHECK(gru_cell(Tensor::randn({5, 3})).shape() == Shape{5, 4});
  CHECK_THROWS_WITH_AS(
      gru_cell(Tensor::zeros({5, 2})),
      doctest::Contains("GRUCell(3, 4): expected input [B, 3] or unbatched [3], got [5, 2]"),
      Error);
  CHECK_THROWS_WITH_AS(gru_cell(Tensor::zeros({5, 3}), Tensor::zeros({4, 4})),
                       doctest::Contains("expected h [5, 4] for input [5, 3], got [4, 4]"), Error);
  CHECK_THROWS_WITH_AS(lstm_cell(Tensor::zeros({2, 3}), {Tensor::zeros({2, 4}), Tensor()}),
                       doctest::Contains("give both h and c, or neither"), Error);
}
