// Autograd: accumulation into .grad(), shared inputs, NoGradGuard, errors on
// misuse, zero_grad, detach, grad-ready hooks (once per backward, final value,
// later layers first) and the node observer.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>

#include "helpers.h"

using namespace minidl;
using minidl::testing::check_values;

TEST_CASE("backward of a scalar fills .grad() of the leaves (hand-computed)") {
  Tensor a = Tensor::of({1, 2, 3}).requires_grad_();
  Tensor b = Tensor::of({4, 5, 6}).requires_grad_();
  CHECK(a.is_leaf());
  CHECK_FALSE(a.grad().defined());
  Tensor loss = (a * b + a).sum();  // d/da = b + 1, d/db = a
  CHECK(loss.requires_grad());
  CHECK_FALSE(loss.is_leaf());
  loss.backward();
  check_values(a.grad(), {5, 6, 7});
  check_values(b.grad(), {1, 2, 3});
  CHECK(a.grad().shape() == a.shape());
  CHECK_FALSE(a.grad().requires_grad());
}

TEST_CASE("gradients accumulate across two backward calls") {
  Tensor w = Tensor::of({1, -2}).requires_grad_();
  (w * 3.0).sum().backward();
  check_values(w.grad(), {3, 3});
  (w * w).sum().backward();  // + 2w
  check_values(w.grad(), {5, -1});
}

TEST_CASE("a tensor used twice gets the sum of both gradients") {
  Tensor x = Tensor::of({1, -2, 3}).requires_grad_();
  (x * x).sum().backward();
  check_values(x.grad(), {2, -4, 6});

  // Through a shared intermediate: y = 2x, loss = sum(y * y + y) -> 8x + 2.
  Tensor z = Tensor::of({0.5, 1}).requires_grad_();
  Tensor y = z * 2.0;
  (y * y + y).sum().backward();
  check_values(z.grad(), {6, 10});
}

TEST_CASE("backward with an explicit grad_output on a non-scalar") {
  Tensor x = Tensor::of({1, 2, 3}).requires_grad_();
  Tensor y = x * x;
  y.backward(Tensor::of({1, 0.5, -1}));
  check_values(x.grad(), {2, 2, -6});
}

TEST_CASE("backward on a leaf sets its gradient to ones") {
  Tensor x = Tensor::of({2}).requires_grad_();
  x.backward();
  check_values(x.grad(), {1});
}

TEST_CASE("tensors that do not require grad get no gradient") {
  Tensor x = Tensor::of({1, 2}).requires_grad_();
  Tensor c = Tensor::of({3, 4});
  (x * c).sum().backward();
  check_values(x.grad(), {3, 4});
  CHECK_FALSE(c.grad().defined());
  CHECK_FALSE(c.requires_grad());
  CHECK_FALSE((c * c).requires_grad());
}

TEST_CASE("NoGradGuard records nothing and restores grad mode") {
  Tensor x = Tensor::of({1, 2}).requires_grad_();
  CHECK(grad_enabled());
  {
    NoGradGuard guard;
    CHECK_FALSE(grad_enabled());
    Tensor y = x * x + 1.0;
    CHECK_FALSE(y.requires_grad());
    CHECK(y.is_leaf());
    CHECK(y.impl().grad_fn == nullptr);
    CHECK_ERROR(y.sum().backward(), "does not require grad");
    {
      NoGradGuard nested;
      CHECK_FALSE(grad_enabled());
    }
    CHECK_FALSE(grad_enabled());  // the inner guard restores the outer state
  }
  CHECK(grad_enabled());
  CHECK((x * x).requires_grad());
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("backward on a non-scalar without grad_output throws") {
  Tensor x = Tensor::of({1, 2, 3}).requires_grad_();
  Tensor y = x * 2.0;
  CHECK_ERROR(y.backward(), "a gradient can be implied only for a scalar output, got shape [3]");
  CHECK_ERROR(y.backward(Tensor::of({1, 2})), "grad_output [2] does not match output [3]");
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("a second backward through a freed graph throws") {
  Tensor x = Tensor::of({1, 2}).requires_grad_();
  Tensor loss = (x * x).sum();
  loss.backward();
  CHECK_ERROR(loss.backward(), "already freed");
  check_values(x.grad(), {2, 4});  // unchanged by the failed call

  // Reusing a freed intermediate in a new graph fails too, instead of
  // silently treating it as a leaf.
  Tensor h = x * 3.0;
  h.sum().backward();
  Tensor again = (h * h).sum();
  CHECK_ERROR(again.backward(), "already freed");
  check_values(x.grad(), {5, 7});
}

TEST_CASE("zero_grad drops the gradient") {
  Tensor x = Tensor::of({1, 2}).requires_grad_();
  (x * 5.0).sum().backward();
  check_values(x.grad(), {5, 5});
  x.zero_grad();
  CHECK_FALSE(x.grad().defined());
  (x * 2.0).sum().backward();  // starts afresh
  check_values(x.grad(), {2, 2});
}

TEST_CASE("set_grad replaces the gradient") {
  Tensor x = Tensor::of({1, 2}).requires_grad_();
  x.set_grad(Tensor::of({7, 8}));
  check_values(x.grad(), {7, 8});
  (x * 1.0).sum().backward();
  check_values(x.grad(), {8, 9});
  x.set_grad(Tensor());
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("detach shares storage but cuts the graph") {
  Tensor x = Tensor::of({1, 2, 3}).requires_grad_();
  Tensor d = x.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.raw_data() == x.raw_data());
  (d * x).sum().backward();  // only the x factor is differentiated
  check_values(x.grad(), {1, 2, 3});

  Tensor y = x * 2.0;
  Tensor yd = y.detach();
  CHECK(yd.is_leaf());
  CHECK_FALSE(yd.requires_grad());
  check_values(yd, {2, 4, 6});
}

TEST_CASE("clone stays in the graph") {
  Tensor x = Tensor::of({1, 2}).requires_grad_();
  Tensor c = x.clone();
  CHECK(c.requires_grad());
  CHECK(c.raw_data() != x.raw_data());
  (c * 3.0).sum().backward();
  check_values(x.grad(), {3, 3});
}

TEST_CASE("gradients flow through views (reshape, slice) to the base") {
  Tensor x = Tensor::arange(6).requires_grad_();
  Tensor v = x.reshape({2, 3});
  (v.slice(1, 2) * v.slice(0, 1)).sum().backward();  // rows [3,4,5] . [0,1,2]
  check_values(x.grad(), {3, 4, 5, 0, 1, 2});
}

TEST_CASE("grad-ready hooks fire once per backward per leaf with the final gradient") {
  Tensor x = Tensor::of({1, 2}).requires_grad_();
  Tensor w = Tensor::of({3, 4}).requires_grad_();
  int x_calls = 0, w_calls = 0;
  std::vector<float> x_seen;
  x.register_grad_ready_hook([&](Tensor& g) {
    ++x_calls;
    x_seen = g.to_vector<float>();
  });
  w.register_grad_ready_hook([&](Tensor&) { ++w_calls; });
  // x is used by three nodes; the hook must see the sum, after the last one.
  Tensor loss = (x * w + x * x + x).sum();
  loss.backward();
  CHECK(x_calls == 1);
  CHECK(w_calls == 1);
  std::vector<float> want{3 + 2 + 1, 4 + 4 + 1};
  CHECK(x_seen == want);
  check_values(x.grad(), {6, 9});

  // A second backward fires again, with the accumulated gradient.
  (x * 2.0).sum().backward();
  CHECK(x_calls == 2);
  CHECK(w_calls == 1);  // w was not in this graph
  CHECK(x_seen == std::vector<float>{8, 11});

  // Hooks may change the gradient in place (a reducer averaging it).
  Tensor p = Tensor::of({1, 1}).requires_grad_();
  p.register_grad_ready_hook([](Tensor& g) { g.copy_(g * 0.5); });
  (p * 4.0).sum().backward();
  check_values(p.grad(), {2, 2});
}

TEST_CASE("in a chain net, later layers' hooks fire before earlier layers'") {
  manual_seed(81);
  // x -> linear(w1, b1) -> relu -> linear(w2, b2) -> tanh -> linear(w3, b3) -> sum
  Tensor x = Tensor::randn({4, 3});
  std::vector<std::pair<std::string, Tensor>> params = {
      {"w1", Tensor::randn({5, 3})}, {"b1", Tensor::randn({5})}, {"w2", Tensor::randn({4, 5})},
      {"b2", Tensor::randn({4})},    {"w3", Tensor::randn({2, 4})}, {"b3", Tensor::randn({2})}};
  std::vector<std::string> fired;
  std::map<std::string, std::vector<float>> seen;
  for (auto& [name, p] : params) {
    p.requires_grad_();
    p.register_grad_ready_hook([&fired, &seen, n = name](Tensor& g) {
      fired.push_back(n);
      seen[n] = g.to_vector<float>();
    });
  }
  auto P = [&](int i) { return params[i].second; };
  Tensor h = relu(linear(x, P(0), P(1)));
  h = tanh(linear(h, P(2), P(3)));
  Tensor loss = linear(h, P(4), P(5)).sum();
  loss.backward();

  REQUIRE(fired.size() == 6);
  auto pos = [&](const std::string& n) {
    return std::find(fired.begin(), fired.end(), n) - fired.begin();
  };
  for (const char* late : {"w3", "b3"})
    for (const char* early : {"w2", "b2", "w1", "b1"}) CHECK(pos(late) < pos(early));
  for (const char* late : {"w2", "b2"})
    for (const char* early : {"w1", "b1"}) CHECK(pos(late) < pos(early));
  // Each hook saw the final gradient.
  for (auto& [name, p] : params) {
    const std::string label = name;  // clang 14 cannot capture a binding
    CAPTURE(label);
    CHECK(seen[name] == p.grad().to_vector<float>());
  }
}

TEST_CASE("the node observer sees each node's backward begin and end") {
  std::vector<std::string> events;
  set_node_observer([&](const char* name, bool begin) {
    events.push_back(std::string(begin ? "+" : "-") + name);
  });
  Tensor x = Tensor::of({1, 2}).requires_grad_();
  exp(x).sum().backward();
  set_node_observer(nullptr);
  CHECK(events == std::vector<std::string>{"+sum", "-sum", "+exp", "-exp"});
  (x * 1.0).sum().backward();  // no observer any more
  CHECK(events.size() == 4);
}

TEST_CASE("requires_grad_ accepts float leaves only") {
  CHECK_ERROR(Tensor::of_ints({1, 2}).requires_grad_(), "only float tensors can require grad");
  Tensor x = Tensor::of({1}).requires_grad_();
  Tensor y = x * 2.0;
  CHECK_ERROR(y.requires_grad_(false), "only leaf tensors");
  Tensor h = Tensor::of({1}).to(kFloat16).requires_grad_();
  CHECK(h.requires_grad());
  x.requires_grad_(false);
  CHECK_FALSE(x.requires_grad());
}

TEST_CASE("register_grad_ready_hook on a non-leaf and set_grad with a wrong shape throw") {
  Tensor x = Tensor::of({1, 2}).requires_grad_();
  Tensor y = x * 2.0;
  CHECK_ERROR(y.register_grad_ready_hook([](Tensor&) {}), "only leaf tensors");
  CHECK_ERROR(x.set_grad(Tensor::zeros({3})), "set_grad: gradient [3] does not match tensor [2]");
}

// A leaf's gradient that reaches it as a view (sum's broadcast, permute's,
// a slice of cat's, transpose's) is added into .grad through its strides,
// or copied out first where its innermost stride is not 0 or 1: three
// backward passes give exactly three times one (sums of equal floats).
TEST_CASE("gradients that arrive as views accumulate exactly into .grad") {
  manual_seed(12);
  auto thrice = [](const Tensor& x, const std::function<Tensor(const Tensor&)>& f) {
    const Tensor gy = Tensor::randn(f(x).shape());
    f(x).backward(gy);
    const std::vector<float> once = x.grad().to_vector<float>();
    for (int pass = 0; pass < 2; ++pass) f(x).backward(gy);
    const std::vector<float> got = x.grad().to_vector<float>();
    REQUIRE(got.size() == once.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == 3 * once[i]);
  };
  thrice(Tensor::randn({4, 300}).requires_grad_(), [](const Tensor& v) { return sum(v, {1}); });
  thrice(Tensor::randn({2, 3, 5}).requires_grad_(),
         [](const Tensor& v) { return mean(v, {0, 2}); });
  thrice(Tensor::randn({3, 5, 4, 6}).requires_grad_(),
         [](const Tensor& v) { return contiguous(permute(v, {0, 2, 1, 3})); });
  thrice(Tensor::randn({2, 3, 4}).requires_grad_(),
         [](const Tensor& v) { return cat({v, v * 2.0}, 1); });
  thrice(Tensor::randn({7, 9}).requires_grad_(),
         [](const Tensor& v) { return contiguous(transpose(v, 0, 1)); });
  thrice(Tensor::randn({3, 1, 4}).requires_grad_(),
         [](const Tensor& v) { return expand(v, {2, 3, 5, 4}) * 1.0; });
}
