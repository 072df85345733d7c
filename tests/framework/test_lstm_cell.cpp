// lstm_cell_pointwise (issue 23, framework/ops/rnn.cpp): a hand-computed
// cell, finite-difference gradients of the gates and c through each output
// and both, the fused op against the formula composed of ops, and errors;
// lstm_layer against its steps composed of linear and lstm_cell_pointwise,
// both directions, and its finite-difference gradients.
#include <doctest/doctest.h>

#include <cmath>
#include <tuple>

#include "helpers.h"

using namespace minidl;
using minidl::testing::check_same;
using minidl::testing::check_values;
using Inputs = std::vector<Tensor>;

// One row, H = 1: gates i, f, g, o = 0, ln 3, atanh 0.5, 0 and c = 2 give
// sigmoid 1/2, 3/4, tanh 1/2, sigmoid 1/2: c' = 3/4 * 2 + 1/2 * 1/2 = 1.75,
// h = tanh(1.75) / 2.
TEST_CASE("lstm_cell_pointwise by hand") {
  Tensor gates = Tensor::of({0.f, std::log(3.f), std::atanh(0.5f), 0.f}, {1, 4});
  auto [h, c] = lstm_cell_pointwise(gates, Tensor::of({2}, {1, 1}));
  check_values(c, {1.75}, 1e-6);
  check_values(h, {std::tanh(1.75) / 2}, 1e-6);
}

TEST_CASE("lstm_cell_pointwise gradients match finite differences, through h, c' and both") {
  manual_seed(11);
  Tensor gates = Tensor::randn({3, 8}), c = Tensor::randn({3, 2});
  Tensor r = Tensor::randn({3, 2});
  CHECK_GRADCHECK([](const Inputs& in) { return lstm_cell_pointwise(in[0], in[1]).first; },
                  {gates, c});
  CHECK_GRADCHECK([](const Inputs& in) { return lstm_cell_pointwise(in[0], in[1]).second; },
                  {gates, c});
  CHECK_GRADCHECK(
      [r](const Inputs& in) {
        auto [h, c2] = lstm_cell_pointwise(in[0], in[1]);
        return h * r + c2 * c2;
      },
      {gates, c});
}

// Two chained steps, as an LSTM runs them: c' feeds the next step, whose h
// and c'' are both used.
TEST_CASE("lstm_cell_pointwise equals its composition from ops over two steps") {
  manual_seed(12);
  const Tensor a1 = Tensor::randn({5, 12}), a2 = Tensor::randn({5, 12}), c0 = Tensor::randn({5, 3});
  const Tensor r = Tensor::randn({5, 3});
  auto composed = [](const Tensor& a, const Tensor& c) {
    const std::vector<Tensor> g = chunk(a, 4, 1);
    Tensor cn = sigmoid(g[1]) * c + sigmoid(g[0]) * tanh(g[2]);
    return std::pair{sigmoid(g[3]) * tanh(cn), cn};
  };
  std::vector<Tensor> grads[2];
  Tensor outs[2];
  for (int fused = 0; fused < 2; ++fused) {
    Tensor x1 = a1.clone().requires_grad_(), x2 = a2.clone().requires_grad_(),
           c = c0.clone().requires_grad_();
    auto step = [&](const Tensor& a, const Tensor& cc) {
      return fused ? lstm_cell_pointwise(a, cc) : composed(a, cc);
    };
    auto [h1, c1] = step(x1, c);
    auto [h2, c2] = step(x2 + cat({h1, h1, h1, h1}, 1), c1);
    outs[fused] = h2 * r + c2 + h1;
    outs[fused].sum().backward();
    grads[fused] = {x1.grad(), x2.grad(), c.grad()};
  }
  check_same(outs[1], outs[0], 1e-6);
  for (int k = 0; k < 3; ++k) check_same(grads[1][k], grads[0][k], 1e-6);
}

TEST_CASE("lstm_cell_pointwise errors name the op and both shapes") {
  CHECK_ERROR(lstm_cell_pointwise(Tensor::zeros({2, 7}), Tensor::zeros({2, 2})),
              "lstm_cell_pointwise: expected gates [B, 4H] and c [B, H], got [2, 7] and [2, 2]");
  CHECK_ERROR(lstm_cell_pointwise(Tensor::zeros({3, 8}), Tensor::zeros({2, 2})),
              "got [3, 8] and [2, 2]");
  CHECK_ERROR(lstm_cell_pointwise(Tensor::zeros({2, 8}, kInt64), Tensor::zeros({2, 2})),
              "lstm_cell_pointwise: expected gates of dtype float32, got int64");
}

// y, h_n and c_n of lstm_layer against the loop it replaces, forward and
// every input's gradient, each output used; then reversed.
TEST_CASE("lstm_layer equals its steps composed of linear and lstm_cell_pointwise") {
  manual_seed(13);
  const int64_t T = 5, B = 3, H = 4;
  const Tensor gx0 = Tensor::randn({T, B, 4 * H}), w0 = Tensor::randn({4 * H, H}) * 0.5;
  const Tensor h00 = Tensor::randn({B, H}), c00 = Tensor::randn({B, H});
  const Tensor ry = Tensor::randn({T, B, H}), rh = Tensor::randn({B, H}), rc = Tensor::randn({B, H});
  for (bool reverse : {false, true}) {
    CAPTURE(reverse);
    Tensor outs[2];
    std::vector<Tensor> grads[2];
    for (int fused = 0; fused < 2; ++fused) {
      Tensor gx = gx0.clone().requires_grad_(), w = w0.clone().requires_grad_(),
             h0 = h00.clone().requires_grad_(), c0 = c00.clone().requires_grad_();
      Tensor y, h_n, c_n;
      if (fused) {
        LstmLayer layer = lstm_layer(gx, w, h0, c0, reverse);
        y = layer.y, h_n = layer.h_n, c_n = layer.c_n;
      } else {
        std::vector<Tensor> ys(T);
        Tensor h = h0, c = c0;
        for (int64_t s = 0; s < T; ++s) {
          const int64_t t = reverse ? T - 1 - s : s;
          std::tie(h, c) = lstm_cell_pointwise(gx.slice(t, t + 1).reshape({B, 4 * H}) +
                                                   linear(h, w, Tensor()), c);
          ys[t] = h;
        }
        y = stack(ys, 0), h_n = h, c_n = c;
      }
      outs[fused] = cat({y.reshape({-1}), h_n.reshape({-1}), c_n.reshape({-1})}, 0);
      ((y * ry).sum() + (h_n * rh).sum() + (c_n * rc).sum()).backward();
      grads[fused] = {gx.grad(), w.grad(), h0.grad(), c0.grad()};
    }
    check_same(outs[1], outs[0], 1e-5);
    for (int k = 0; k < 4; ++k) {
      CAPTURE(k);
      check_same(grads[1][k], grads[0][k], 1e-5);
    }
  }
}

TEST_CASE("lstm_layer gradients match finite differences") {
  manual_seed(14);
  const Tensor gx = Tensor::randn({3, 2, 8}), w = Tensor::randn({8, 2}) * 0.5;
  const Tensor h0 = Tensor::randn({2, 2}), c0 = Tensor::randn({2, 2}), r = Tensor::randn({3, 2, 2});
  CHECK_GRADCHECK(
      [r](const Inputs& in) {
        LstmLayer l = lstm_layer(in[0], in[1], in[2], in[3]);
        return (l.y * r).sum() + l.c_n.sum();
      },
      {gx, w, h0, c0});
  CHECK_GRADCHECK(
      [r](const Inputs& in) { return (lstm_layer(in[0], in[1], in[2], in[3], true).y * r).sum(); },
      {gx, w, h0, c0});
}

TEST_CASE("lstm_layer goes back through time once, whichever outputs the loss reaches") {
  manual_seed(15);
  const Tensor gx = Tensor::randn({4, 2, 12}), w = Tensor::randn({12, 3}) * 0.5;
  const Tensor h0 = Tensor::randn({2, 3}), c0 = Tensor::randn({2, 3});
  int layer_nodes = 0;
  set_node_observer([&](const char* name, bool begin) {
    if (begin && std::string(name) == "lstm_layer") ++layer_nodes;
  });
  for (int outputs : {0, 1, 2}) {  // y only, c_n only, y, h_n and c_n
    CAPTURE(outputs);
    layer_nodes = 0;
    Tensor in = gx.clone().requires_grad_();
    LstmLayer l = lstm_layer(in, w, h0, c0);
    Tensor loss = outputs == 0   ? l.y.sum()
                  : outputs == 1 ? l.c_n.sum()
                                 : l.y.sum() + (l.h_n * 2.0).sum() + l.c_n.sum();
    loss.backward();
    CHECK(layer_nodes == 1);
    CHECK(in.grad().defined());
  }
  set_node_observer(nullptr);
}

TEST_CASE("lstm_layer errors name the op and every shape") {
  CHECK_ERROR(lstm_layer(Tensor::zeros({2, 3, 8}), Tensor::zeros({8, 3}), Tensor::zeros({3, 2}),
                         Tensor::zeros({3, 2})),
              "lstm_layer: expected gx [T, B, 4H], w_hh [4H, H], h0 and c0 [B, H], got gx [2, 3, 8], "
              "w_hh [8, 3], h0 [3, 2], c0 [3, 2]");
  CHECK_ERROR(lstm_layer(Tensor::zeros({2, 3, 8}, kInt64), Tensor::zeros({8, 2}),
                         Tensor::zeros({3, 2}), Tensor::zeros({3, 2})),
              "lstm_layer: expected gx of dtype float32, got int64");
}
