// gru_layer (issue 23, framework/ops/rnn.cpp): a hand-computed step; the
// layer against its steps composed of linear and ops (PyTorch's GRU
// formula), both directions, with and without b_hh, every input's gradient;
// finite-difference gradients; one pass back through time, its buffers
// freed after; errors.
#include <doctest/doctest.h>

#include <cmath>

#include "helpers.h"

using namespace minidl;
using minidl::testing::check_same;
using minidl::testing::check_values;
using Inputs = std::vector<Tensor>;

// One row, H = 1, w_hh = 0 (gh = b_hh): gx = 0 and b_hh = 0, ln 3, 1 give
// r = 1/2, z = 3/4, n = tanh(1/2); with h0 = 2, h' = n / 4 + 3/2. The second
// step (gh = h' w_hh + b_hh, w_hh = 0 still) starts from h'.
TEST_CASE("gru_layer by hand") {
  const Tensor b_hh = Tensor::of({0.f, std::log(3.f), 1.f}, {3});
  GruLayer l = gru_layer(Tensor::zeros({2, 1, 3}), Tensor::zeros({3, 1}), b_hh,
                         Tensor::of({2}, {1, 1}));
  const double n = std::tanh(0.5), h1 = n / 4 + 1.5, h2 = n / 4 + 0.75 * h1;
  check_values(l.y, {h1, h2}, 1e-6);
  check_values(l.h_n, {h2}, 1e-6);
}

// PyTorch's step from ops: gh = h w_hh^T + b_hh, then the gates.
Tensor composed_step(const Tensor& gx, const Tensor& h, const Tensor& w, const Tensor& b) {
  const std::vector<Tensor> x = chunk(gx, 3, 1), g = chunk(linear(h, w, b), 3, 1);
  const Tensor r = sigmoid(x[0] + g[0]), z = sigmoid(x[1] + g[1]);
  const Tensor n = tanh(x[2] + r * g[2]);
  return (1.0 - z) * n + z * h;
}

TEST_CASE("gru_layer equals its steps composed of linear and ops") {
  manual_seed(16);
  const int64_t T = 5, B = 3, H = 4;
  const Tensor gx0 = Tensor::randn({T, B, 3 * H}), w0 = Tensor::randn({3 * H, H}) * 0.5;
  const Tensor b0 = Tensor::randn({3 * H}), h00 = Tensor::randn({B, H});
  const Tensor ry = Tensor::randn({T, B, H}), rh = Tensor::randn({B, H});
  for (bool reverse : {false, true})
    for (bool bias : {true, false}) {
      CAPTURE(reverse);
      CAPTURE(bias);
      Tensor outs[2];
      std::vector<Tensor> grads[2];
      for (int fused = 0; fused < 2; ++fused) {
        Tensor gx = gx0.clone().requires_grad_(), w = w0.clone().requires_grad_(),
               b = bias ? b0.clone().requires_grad_() : Tensor(), h0 = h00.clone().requires_grad_();
        Tensor y, h_n;
        if (fused) {
          GruLayer layer = gru_layer(gx, w, b, h0, reverse);
          y = layer.y, h_n = layer.h_n;
        } else {
          std::vector<Tensor> ys(T);
          Tensor h = h0;
          for (int64_t s = 0; s < T; ++s) {
            const int64_t t = reverse ? T - 1 - s : s;
            h = composed_step(gx.slice(t, t + 1).reshape({B, 3 * H}), h, w, b);
            ys[t] = h;
          }
          y = stack(ys, 0), h_n = h;
        }
        outs[fused] = cat({y.reshape({-1}), h_n.reshape({-1})}, 0);
        ((y * ry).sum() + (h_n * rh).sum()).backward();
        grads[fused] = {gx.grad(), w.grad(), h0.grad()};
        if (bias) grads[fused].push_back(b.grad());
      }
      check_same(outs[1], outs[0], 1e-5);
      for (size_t k = 0; k < grads[0].size(); ++k) {
        CAPTURE(k);
        check_same(grads[1][k], grads[0][k], 1e-5);
      }
    }
}

TEST_CASE("gru_layer gradients match finite differences") {
  manual_seed(17);
  const Tensor gx = Tensor::randn({3, 2, 6}), w = Tensor::randn({6, 2}) * 0.5;
  const Tensor b = Tensor::randn({6}), h0 = Tensor::randn({2, 2}), r = Tensor::randn({3, 2, 2});
  CHECK_GRADCHECK(
      [r](const Inputs& in) {
        GruLayer l = gru_layer(in[0], in[1], in[2], in[3]);
        return (l.y * r).sum() + (l.h_n * l.h_n).sum();
      },
      {gx, w, b, h0});
  CHECK_GRADCHECK(
      [r](const Inputs& in) { return (gru_layer(in[0], in[1], in[2], in[3], true).y * r).sum(); },
      {gx, w, b, h0});
}

TEST_CASE("gru_layer goes back through time once, whichever outputs the loss reaches") {
  manual_seed(18);
  const Tensor gx = Tensor::randn({4, 2, 9}), w = Tensor::randn({9, 3}) * 0.5;
  const Tensor h0 = Tensor::randn({2, 3});
  int layer_nodes = 0;
  set_node_observer([&](const char* name, bool begin) {
    if (begin && std::string(name) == "gru_layer") ++layer_nodes;
  });
  const int64_t live = memory_stats().current_bytes;
  for (int outputs : {0, 1, 2}) {  // y only, h_n only, both
    CAPTURE(outputs);
    layer_nodes = 0;
    Tensor in = gx.clone().requires_grad_();
    GruLayer l = gru_layer(in, w, Tensor(), h0);
    Tensor loss = outputs == 0   ? l.y.sum()
                  : outputs == 1 ? l.h_n.sum()
                                 : l.y.sum() + (l.h_n * 2.0).sum();
    loss.backward();
    CHECK(layer_nodes == 1);
    CHECK(in.grad().defined());
  }
  set_node_observer(nullptr);
  {  // a forward never taken back (evaluation with a grad-requiring input)
    GruLayer l = gru_layer(gx.clone().requires_grad_(), w, Tensor(), h0);
    CHECK(l.y.requires_grad());
  }
  CHECK(memory_stats().current_bytes == live);  // the layer's buffers freed: no cycle
}

TEST_CASE("gru_layer errors name the op and every shape") {
  CHECK_ERROR(gru_layer(Tensor::zeros({2, 3, 6}), Tensor::zeros({6, 2}), Tensor::zeros({4}),
                        Tensor::zeros({3, 2})),
              "gru_layer: expected gx [T, B, 3H], w_hh [3H, H], b_hh [3H] or none and h0 [B, H], "
              "got gx [2, 3, 6], w_hh [6, 2], b_hh [4], h0 [3, 2]");
  CHECK_ERROR(gru_layer(Tensor::zeros({2, 3, 6}), Tensor::zeros({6, 3}), Tensor(),
                        Tensor::zeros({3, 2})),
              "got gx [2, 3, 6], w_hh [6, 3], b_hh none, h0 [3, 2]");
  CHECK_ERROR(gru_layer(Tensor::zeros({2, 3, 6}, kInt64), Tensor::zeros({6, 2}), Tensor(),
                        Tensor::zeros({3, 2})),
              "gru_layer: expected gx of dtype float32, got int64");
}
