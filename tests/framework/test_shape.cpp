// Shape ops: reshape, flatten, concat and slice along dim 0, gather by
// labels; forward values and gradient checks.
#include <doctest/doctest.h>

#include "helpers.h"

using namespace minidl;
using minidl::testing::check_values;
using Inputs = std::vector<Tensor>;

TEST_CASE("reshape keeps the element order and infers one -1 dim") {
  Tensor x = Tensor::arange(6);
  Tensor r = reshape(x, {2, 3});
  CHECK(r.shape() == Shape{2, 3});
  CHECK(r.at({1, 0}) == 3);
  CHECK(reshape(x, {-1, 2}).shape() == Shape{3, 2});
  CHECK(reshape(x, {3, -1}).shape() == Shape{3, 2});
  CHECK(reshape(x, {1, 2, 1, 3}).shape() == Shape{1, 2, 1, 3});
  CHECK(reshape(Tensor::of({4}), {}).shape() == Shape{});
  check_values(reshape(r, {6}), {0, 1, 2, 3, 4, 5});
  CHECK(reshape(Tensor::zeros({0, 4}), {-1, 2}).shape() == Shape{0, 2});
}

TEST_CASE("flatten merges the dims from start_dim on") {
  Tensor x = Tensor::arange(24).reshape({2, 3, 4});
  CHECK(flatten(x).shape() == Shape{24});
  CHECK(flatten(x, 1).shape() == Shape{2, 12});
  CHECK(flatten(x, 2).shape() == Shape{2, 3, 4});
  CHECK(flatten(x, -2).shape() == Shape{2, 12});
  CHECK(x.flatten(1).at({1, 5}) == 17);
  CHECK(flatten(Tensor::full({}, 3)).shape() == Shape{1});
  CHECK(flatten(Tensor::zeros({0, 2, 3}), 1).shape() == Shape{0, 6});
}

TEST_CASE("concat stacks along dim 0") {
  Tensor a = Tensor::of({1, 2, 3, 4}, {2, 2}), b = Tensor::of({5, 6}, {1, 2});
  Tensor c = concat({a, b});
  CHECK(c.shape() == Shape{3, 2});
  check_values(c, {1, 2, 3, 4, 5, 6});
  check_values(concat({b, a, b}), {5, 6, 1, 2, 3, 4, 5, 6});
  check_values(concat({a}), {1, 2, 3, 4});
  check_values(concat({Tensor::of({7}), Tensor::of({8, 9})}), {7, 8, 9});
  Tensor ints = concat({Tensor::of_ints({1, 2}), Tensor::of_ints({3})});
  CHECK(ints.dtype() == kInt64);
  CHECK(ints.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3});
  // concat copies: changing the result leaves the inputs alone.
  c.set({0, 0}, 100);
  CHECK(a.at({0, 0}) == 1);
}

TEST_CASE("slice takes rows [start, end) of dim 0") {
  Tensor x = Tensor::arange(12).reshape({4, 3});
  Tensor s = slice(x, 1, 3);
  CHECK(s.shape() == Shape{2, 3});
  check_values(s, {3, 4, 5, 6, 7, 8});
  check_values(slice(x, 3, 4), {9, 10, 11});
  CHECK(slice(x, 2, 2).shape() == Shape{0, 3});
  check_values(slice(x, 0, 4), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  check_values(slice(Tensor::arange(5), 1, 4), {1, 2, 3});
}

TEST_CASE("gather picks x[i, labels[i]] for int64 and int32 labels") {
  Tensor x = Tensor::of({0.1, 0.2, 0.7, 0.5, 0.3, 0.2, 0.0, 1.0, 0.0}, {3, 3});
  Tensor g = gather(x, Tensor::of_ints({2, 0, 1}));
  CHECK(g.shape() == Shape{3});
  check_values(g, {0.7, 0.5, 1.0});
  check_values(gather(x, Tensor::of_ints({0, 0, 2}, {}, kInt32)), {0.1, 0.5, 0.0});
}

TEST_CASE("gradients of reshape, flatten, concat, slice and gather") {
  manual_seed(71);
  Tensor x = Tensor::randn({2, 3, 2});
  CHECK_GRADCHECK([](const Inputs& in) { return reshape(in[0], {3, 4}) * 2.0; }, {x});
  CHECK_GRADCHECK([](const Inputs& in) { return flatten(in[0], 1).sigmoid(); }, {x});
  CHECK_GRADCHECK([](const Inputs& in) { return concat({in[0], in[1], in[0]}); },
                  {Tensor::randn({2, 3}), Tensor::randn({1, 3})});
  CHECK_GRADCHECK([](const Inputs& in) { return slice(in[0], 1, 3); }, {Tensor::randn({4, 3})});
  CHECK_GRADCHECK([](const Inputs& in) { return slice(in[0], 0, 1) * slice(in[0], 2, 3); },
                  {Tensor::randn({3, 2})});
  Tensor labels = Tensor::of_ints({1, 0, 3});
  CHECK_GRADCHECK([labels](const Inputs& in) { return gather(in[0], labels); },
                  {Tensor::randn({3, 4})});
  Tensor repeated = Tensor::of_ints({2, 2}, {}, kInt32);
  CHECK_GRADCHECK([repeated](const Inputs& in) { return gather(in[0], repeated); },
                  {Tensor::randn({2, 3})});
}

TEST_CASE("slice and gather gradients are zero outside the picked elements (hand-computed)") {
  Tensor x = Tensor::zeros({3, 2}).requires_grad_();
  (slice(x, 1, 2) * 3.0).sum().backward();
  check_values(x.grad(), {0, 0, 3, 3, 0, 0});

  Tensor y = Tensor::zeros({2, 3}).requires_grad_();
  gather(y, Tensor::of_ints({2, 1})).sum().backward();
  check_values(y.grad(), {0, 0, 1, 0, 1, 0});

  Tensor a = Tensor::zeros({1, 2}).requires_grad_(), b = Tensor::zeros({2, 2}).requires_grad_();
  (concat({a, b}) * Tensor::of({1, 2, 3, 4, 5, 6}, {3, 2})).sum().backward();
  check_values(a.grad(), {1, 2});
  check_values(b.grad(), {3, 4, 5, 6});
}
