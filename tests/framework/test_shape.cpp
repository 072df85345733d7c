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

// ---- shape ops of issue 22: permute, narrow, slice, split, cat, stack,
// squeeze, unflatten, expand (any dim) ----
using minidl::testing::check_same;
using minidl::testing::distinct;

TEST_CASE("permute reorders dims of any rank, negative dims too") {
  Tensor x = Tensor::arange(24).reshape({2, 3, 4});
  Tensor p = permute(x, {2, 0, 1});
  CHECK(p.shape() == Shape{4, 2, 3});
  CHECK(p.at({3, 1, 2}) == x.at({1, 2, 3}));
  CHECK(p.at({1, 0, 2}) == x.at({0, 2, 1}));
  check_same(x.permute({-1, 1, 0}), permute(x, {2, 1, 0}));
  Tensor ints = Tensor::of_ints({1, 2, 3, 4, 5, 6}, {2, 3});
  check_values(permute(ints, {1, 0}), {1, 4, 2, 5, 3, 6});
  CHECK(permute(ints, {1, 0}).dtype() == kInt64);
  CHECK_GRADCHECK(
      [](const Inputs& in) {
        return permute(in[0], {1, 3, 0, 2});
      },
      {distinct({2, 3, 2, 2})});
  CHECK_ERROR(permute(x, {0, 1}), "permute: 2 dims given for shape [2, 3, 4]");
  CHECK_ERROR(permute(x, {0, 1, 1}), "permute: dim 1 repeated");
}

TEST_CASE("transpose swaps any two dims of any rank") {
  Tensor x = Tensor::arange(120).reshape({2, 3, 4, 5});
  Tensor t = transpose(x, 0, 2);
  CHECK(t.shape() == Shape{4, 3, 2, 5});
  CHECK(t.at({3, 1, 0, 4}) == x.at({0, 1, 3, 4}));
  check_same(transpose(x, 1, -1), permute(x, {0, 3, 2, 1}));
  CHECK_GRADCHECK([](const Inputs& in) { return transpose(in[0], 0, 2); }, {distinct({2, 3, 2})});
}

TEST_CASE("narrow is a view along any dim; negative start counts from the end") {
  Tensor x = Tensor::arange(24).reshape({2, 3, 4});
  Tensor rows = narrow(x, 0, 1, 1);
  CHECK(rows.shape() == Shape{1, 3, 4});
  CHECK(rows.impl().storage == x.impl().storage);  // a view
  check_values(narrow(x, 2, 1, 2), {1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22});
  CHECK(narrow(x, 2, 1, 2).impl().storage == x.impl().storage);  // a strided view
  Tensor one = Tensor::arange(12).reshape({1, 3, 4});
  Tensor v = narrow(one, 1, 1, 2);
  CHECK(v.impl().storage == one.impl().storage);  // dims before are 1: still a view
  check_values(v, {4, 5, 6, 7, 8, 9, 10, 11});
  check_values(narrow(x, -1, -1, 1), {3, 7, 11, 15, 19, 23});
  check_values(x.narrow(1, 2, 1), {8, 9, 10, 11, 20, 21, 22, 23});
  CHECK(narrow(x, 1, 3, 0).shape() == Shape{2, 0, 4});
  CHECK_GRADCHECK([](const Inputs& in) { return narrow(in[0], 1, 1, 2); }, {distinct({2, 4, 3})});
  CHECK_GRADCHECK([](const Inputs& in) { return narrow(in[0], 0, 1, 2); }, {distinct({4, 3})});
  CHECK_ERROR(narrow(x, 1, 2, 2),
              "narrow: start 2 and length 2 out of range for dim 1 of shape "
              "[2, 3, 4] (size 3)");
  CHECK_ERROR(narrow(x, 3, 0, 1), "narrow: dim 3 out of range");
}

TEST_CASE("slice along any dim clamps like a Python slice") {
  Tensor x = Tensor::arange(12).reshape({3, 4});
  check_values(slice(x, 1, 1, 3), {1, 2, 5, 6, 9, 10});
  check_values(slice(x, 1, -2, 100), {2, 3, 6, 7, 10, 11});
  CHECK(slice(x, 1, 3, 1).shape() == Shape{3, 0});
  check_values(slice(x, 0, -1, 3), {8, 9, 10, 11});
  check_values(slice(x, 0, 1, 2), {4, 5, 6, 7});  // the 3-arg form stays: rows of dim 0
}

TEST_CASE("split, split_with_sizes and chunk cut along a dim") {
  Tensor x = Tensor::arange(10).reshape({2, 5});
  auto parts = split(x, 2, 1);
  REQUIRE(parts.size() == 3);
  check_values(parts[0], {0, 1, 5, 6});
  check_values(parts[2], {4, 9});
  auto sized = split_with_sizes(x, {1, 4}, -1);
  REQUIRE(sized.size() == 2);
  check_values(sized[1], {1, 2, 3, 4, 6, 7, 8, 9});
  auto chunks = x.chunk(3, 1);  // ceil(5 / 3) = 2: sizes 2, 2, 1
  REQUIRE(chunks.size() == 3);
  CHECK(chunks[2].shape() == Shape{2, 1});
  CHECK(chunk(Tensor::arange(4), 3).size() == 2);  // sizes 2, 2 as torch.chunk
  CHECK_ERROR(split_with_sizes(x, {2, 2}, 1),
              "split_with_sizes: sizes [2, 2] sum to 4, expected 5");
  CHECK_ERROR(split(x, 0, 1), "split: split_size 0");
  CHECK_ERROR(chunk(x, 0), "chunk: expected a positive number of chunks");
  CHECK_GRADCHECK([](const Inputs& in) { return split(in[0], 2, 1)[1] * 2.0; }, {distinct({2, 5})});
}

TEST_CASE("cat joins along any dim; stack adds a dim") {
  Tensor a = Tensor::of({1, 2, 3, 4}, {2, 2}), b = Tensor::of({5, 6}, {2, 1});
  Tensor c = cat({a, b}, 1);
  CHECK(c.shape() == Shape{2, 3});
  check_values(c, {1, 2, 5, 3, 4, 6});
  check_values(cat({a, a}, 0), {1, 2, 3, 4, 1, 2, 3, 4});
  const std::vector<Tensor> named{a, a};
  CHECK(cat(named, 1).shape() == Shape{2, 4});  // not error.h's string cat
  check_values(cat({b, a}, -1), {5, 1, 2, 6, 3, 4});
  Tensor s = stack({a, a * 10.0}, 1);
  CHECK(s.shape() == Shape{2, 2, 2});
  check_values(s, {1, 2, 10, 20, 3, 4, 30, 40});
  CHECK(stack({a, a}, -1).shape() == Shape{2, 2, 2});
  check_values(cat({Tensor::of_ints({1, 2}), Tensor::of_ints({3})}), {1, 2, 3});
  CHECK_ERROR(cat({a, Tensor::zeros({3, 1})}, 1),
              "cat: shapes [2, 2] and [3, 1] differ outside dim 1");
  CHECK_ERROR(stack({a, b}), "stack: shapes [2, 2] and [2, 1] differ");
  CHECK_GRADCHECK(
      [](const Inputs& in) {
        return cat({in[0], in[1], in[0]}, 1);
      },
      {distinct({2, 2, 3}), distinct({2, 1, 3})});
  CHECK_GRADCHECK(
      [](const Inputs& in) {
        return stack({in[0], in[1]}, 2);
      },
      {distinct({2, 3}), distinct({2, 3}, 1)});
}

TEST_CASE("unsqueeze, squeeze, unflatten and flatten(start, end) are views") {
  Tensor x = Tensor::arange(6).reshape({2, 3});
  CHECK(unsqueeze(x, 0).shape() == Shape{1, 2, 3});
  CHECK(unsqueeze(x, -1).shape() == Shape{2, 3, 1});
  CHECK(x.unsqueeze(1).shape() == Shape{2, 1, 3});
  CHECK(unsqueeze(x, 1).impl().storage == x.impl().storage);
  Tensor y = Tensor::zeros({1, 2, 1, 3});
  CHECK(squeeze(y).shape() == Shape{2, 3});
  CHECK(squeeze(y, 2).shape() == Shape{1, 2, 3});
  CHECK(y.squeeze(1).shape() == Shape{1, 2, 1, 3});  // not of size 1: unchanged
  CHECK(squeeze(Tensor::full({}, 1), 0).shape() == Shape{});
  CHECK(unflatten(Tensor::zeros({2, 12}), 1, {3, -1}).shape() == Shape{2, 3, 4});
  CHECK(flatten(Tensor::zeros({2, 3, 4, 5}), 1, 2).shape() == Shape{2, 12, 5});
  CHECK(flatten(Tensor::zeros({2, 3, 4, 5}), 0, -2).shape() == Shape{24, 5});
  CHECK_ERROR(unflatten(Tensor::zeros({2, 12}), 1, {5, -1}), "unflatten: cannot infer");
  CHECK_ERROR(unflatten(Tensor::zeros({2, 12}), 1, {5, 2}),
              "unflatten: sizes [5, 2] do not multiply to 12");
  CHECK_ERROR(flatten(Tensor::zeros({2, 3}), 1, 0), "flatten: start_dim 1 after end_dim 0");
  CHECK_ERROR(unsqueeze(x, 3), "unsqueeze: dim 3 out of range");
}

TEST_CASE("expand broadcasts as a view and its backward sums") {
  Tensor x = Tensor::of({1, 2, 3}, {3, 1});
  Tensor e = expand(x, {2, 3, 2});
  CHECK(e.shape() == Shape{2, 3, 2});
  check_values(e, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  CHECK(e.impl().storage == x.impl().storage);
  CHECK(x.expand({-1, 4}).shape() == Shape{3, 4});
  CHECK_GRADCHECK([](const Inputs& in) { return expand(in[0], {2, 3, 4}); }, {distinct({3, 1})});
  CHECK_ERROR(expand(x, {3, 2, 2}),
              "expand: input [3, 1] -> [3, 2, 2]: dim 1 of size 3 can only "
              "expand from size 1");
  CHECK_ERROR(expand(x, {2}), "expand: shape [2] has fewer dims than input [3, 1]");
}

TEST_CASE("pad adds constant borders from the last dim back; negative pads crop") {
  Tensor x = Tensor::of({1, 2, 3, 4}, {2, 2});
  Tensor p = pad(x, {1, 0});
  CHECK(p.shape() == Shape{2, 3});
  check_values(p, {0, 1, 2, 0, 3, 4});
  check_values(pad(x, {0, 1, 1, 0}, -1), {-1, -1, -1, 1, 2, -1, 3, 4, -1});
  check_values(pad(x, {-1, 1}), {2, 0, 4, 0});
  CHECK(pad(x, {0, 0}).shape() == Shape{2, 2});
  CHECK_GRADCHECK(
      [](const Inputs& in) {
        return pad(in[0], {1, 2, -1, 1});
      },
      {distinct({2, 3, 2})});
  CHECK_ERROR(pad(x, {1}), "pad: 1 pad amounts for input [2, 2]: expected an even number");
  CHECK_ERROR(pad(x, {-3, 0}),
              "pad: input [2, 2] with pads [-3, 0]: dim 1 of size 2 would become negative");
}
