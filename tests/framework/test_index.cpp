// Indexing ops of issue 22: index_select (backward index_add), where and
// masked_fill; forward values, gradient checks, bad input.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "helpers.h"

using namespace minidl;
using minidl::testing::check_values;
using minidl::testing::distinct;
using Inputs = std::vector<Tensor>;

TEST_CASE("index_select picks slices along any dim; repeated indices add in the backward") {
  Tensor x = Tensor::arange(12).reshape({3, 4});
  check_values(index_select(x, 0, Tensor::of_ints({2, 0})), {8, 9, 10, 11, 0, 1, 2, 3});
  check_values(index_select(x, 1, Tensor::of_ints({3, 3, 1}, {}, kInt32)),
               {3, 3, 1, 7, 7, 5, 11, 11, 9});
  CHECK(index_select(x, -1, Tensor::of_ints({}, {0})).shape() == Shape{3, 0});
  Tensor ints = Tensor::of_ints({5, 6, 7});
  check_values(index_select(ints, 0, Tensor::of_ints({1, 1})), {6, 6});
  Tensor w = Tensor::zeros({3, 2}).requires_grad_();
  index_select(w, 0, Tensor::of_ints({1, 1, 2})).sum().backward();
  check_values(w.grad(), {0, 0, 2, 2, 1, 1});
  CHECK_GRADCHECK(
      [](const Inputs& in) {
        return index_select(in[0], 1, Tensor::of_ints({2, 0, 2}));
      },
      {distinct({2, 3, 2})});
  CHECK_ERROR(index_select(x, 1, Tensor::of_ints({0, 4})),
              "index_select: index 4 at position 1 out of range [0, 4) for dim 1 of input [3, 4]");
  CHECK_ERROR(index_select(x, 0, Tensor::of({0})),
              "index_select: expected an int32 or int64 index");
  CHECK_ERROR(index_select(x, 0, Tensor::of_ints({0}, {1, 1})),
              "index_select: expected a 1-D index");
}

TEST_CASE("where selects elementwise with broadcasting; the other side never leaks") {
  Tensor cond = Tensor::of_ints({1, 0, 0, 1}, {2, 2});
  Tensor a = Tensor::of({1, 2, 3, 4}, {2, 2}), b = Tensor::of({-1, -2}, {2});
  check_values(where(cond, a, b), {1, -2, -1, 4});
  check_values(where(Tensor::of({0, 2}, {2}), a, b), {-1, 2, -1, 4});
  check_values(where(Tensor::of_ints({1, 0}, {2, 1}, kInt32), a, b), {1, 2, -1, -2});
  // NaN and inf in the unchosen branch: not in the result, not in the gradient
  Tensor bad = Tensor::of({NAN, INFINITY, 5, NAN}, {2, 2}).requires_grad_();
  Tensor good = Tensor::of({1, 2, 3, 4}, {2, 2}).requires_grad_();
  Tensor keep = Tensor::of_ints({0, 0, 1, 0}, {2, 2});
  Tensor y = where(keep, bad, good);
  check_values(y, {1, 2, 5, 4});
  log(y).sum().backward();
  check_values(bad.grad(), {0, 0, 0.2, 0});
  check_values(good.grad(), {1, 0.5, 0, 0.25});
  CHECK_GRADCHECK(
      [](const Inputs& in) {
        return where(Tensor::of_ints({1, 0, 1}, {3}), in[0], in[1]);
      },
      {distinct({2, 3}), distinct({2, 1}, 1)});
  CHECK_ERROR(where(cond, a, Tensor::zeros({3})), "where: shapes [2, 2] and [3] cannot broadcast");
}

// where over rows long enough for the vector loops (37: two AVX-512 vectors
// and a tail), each operand along the row or broadcast, or read through a
// transposed view, conditions of each dtype; checked element by element
// against cond ? a : b read through the broadcast indices. NaN conditions
// choose a, -0 chooses b; NaN in the unchosen side stays out.
TEST_CASE("where's rows: every broadcast pattern, condition dtype and a transposed operand") {
  const int64_t R = 3, L = 37;
  std::vector<float> cv(R * L), av(R * L), bv(R * L);
  for (int64_t i = 0; i < R * L; ++i) {
    cv[i] = i % 3 == 0 ? 0.f : i % 5 == 0 ? NAN : i % 7 == 0 ? -0.f : 1.f;
    av[i] = static_cast<float>(i) + 0.5f;
    bv[i] = i % 4 == 0 ? NAN : -static_cast<float>(i);
  }
  const auto cut = [&](const std::vector<float>& v, const Shape& s) {
    std::vector<float> out(numel_of(s));
    for (int64_t r = 0; r < s[0]; ++r)
      for (int64_t j = 0; j < s[1]; ++j) out[r * s[1] + j] = v[r * L + j];
    return out;
  };
  const auto at = [&](const std::vector<float>& v, const Shape& s, int64_t r, int64_t j) {
    return v[(s[0] == 1 ? 0 : r) * s[1] + (s[1] == 1 ? 0 : j)];
  };
  const Shape shapes[] = {{R, L}, {R, 1}, {1, L}};
  for (const Shape& sc : shapes)
    for (const Shape& sa : shapes)
      for (const Shape& sb : shapes)
        for (DType ct : {kFloat32, kInt32, kInt64}) {
          const std::vector<float> c = cut(cv, sc), a = cut(av, sa), b = cut(bv, sb);
          std::vector<float> ci(c.size());  // NaN -> 1 for the integer conditions
          for (size_t i = 0; i < c.size(); ++i) ci[i] = c[i] != 0.f;
          Tensor tc = Tensor::from_vector(ct == kFloat32 ? c : ci, sc);
          if (ct != kFloat32) tc = cast(tc, ct);
          Tensor y = where(tc, Tensor::from_vector(a, sa), Tensor::from_vector(b, sb));
          const int64_t rows = std::max({sc[0], sa[0], sb[0]}),
                        cols = std::max({sc[1], sa[1], sb[1]});
          REQUIRE(y.shape() == Shape{rows, cols});
          const std::vector<float> got = y.to_vector<float>();
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < cols; ++j) {
              const float want = at(c, sc, r, j) != 0.f ? at(a, sa, r, j) : at(b, sb, r, j);
              INFO("cond " << sc << " " << dtype_name(ct) << ", a " << sa << ", b " << sb
                           << ", row " << r << ", column " << j);
              CHECK(std::memcmp(&got[r * cols + j], &want, 4) == 0);
            }
        }
  // a read through a transposed view: stride L along the row
  Tensor at_ = Tensor::from_vector(av, {L, R}).transpose(0, 1);
  Tensor tc = Tensor::from_vector(cv, {R, L});
  const std::vector<float> got = where(tc, at_, Tensor::from_vector(bv, {R, L})).to_vector<float>();
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = 0; j < L; ++j) {
      const float want = cv[r * L + j] != 0.f ? av[j * R + r] : bv[r * L + j];
      INFO("transposed a, row " << r << ", column " << j);
      CHECK(std::memcmp(&got[r * L + j], &want, 4) == 0);
    }
}

// masked_fill's value is no tensor that wants a gradient, so its backward
// makes x's gradient alone (where's other side would be a full pass and a sum)
TEST_CASE("masked_fill's gradient: g where the mask is off, 0 where it is on") {
  Tensor x = Tensor::randn({4, 40}).requires_grad_();
  Tensor mask = gt(Tensor::randn({40}), 0.0);
  Tensor g = Tensor::randn({4, 40});
  masked_fill(x, mask, -1e9).backward(g);
  const std::vector<float> gx = x.grad().to_vector<float>(), gv = g.to_vector<float>(),
                           m = mask.to_vector<float>();
  for (int64_t i = 0; i < 160; ++i) CHECK(gx[i] == (m[i % 40] != 0.f ? 0.f : gv[i]));
}

TEST_CASE("masked_fill writes value where the mask is set") {
  Tensor x = Tensor::of({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor mask = Tensor::of_ints({0, 1, 1}, {3});
  Tensor y = masked_fill(x, mask, -1e9);
  check_values(y, {1, -1e9, -1e9, 4, -1e9, -1e9});
  check_values(masked_fill(x, Tensor::of({1, 0}, {2, 1}), 0), {0, 0, 0, 4, 5, 6});
  CHECK_GRADCHECK(
      [](const Inputs& in) {
        return masked_fill(in[0], Tensor::of_ints({1, 0, 0, 1}, {2, 2}), 7);
      },
      {distinct({3, 2, 2})});
  CHECK_ERROR(masked_fill(x, Tensor::of_ints({1, 0}, {2}), 0),
              "masked_fill: shapes [2] and [2, 3] cannot broadcast");
  CHECK_ERROR(masked_fill(x, Tensor::of_ints({1, 0}, {2, 1, 1}), 0),
              "masked_fill: mask [2, 1, 1] does not broadcast to input [2, 3]");
}

TEST_CASE("gather along a dim picks x at the index; its backward scatters") {
  Tensor x = Tensor::of({1, 2, 3, 4, 5, 6}, {2, 3});
  check_values(gather(x, 1, Tensor::of_ints({2, 0, 1, 1}, {2, 2})), {3, 1, 5, 5});
  check_values(gather(x, 0, Tensor::of_ints({1, 0, 1}, {1, 3}, kInt32)), {4, 2, 6});
  check_values(gather(x, 1, Tensor::of_ints({1}, {1, 1})), {2});  // index smaller outside dim
  Tensor w = Tensor::zeros({2, 3}).requires_grad_();
  gather(w, 1, Tensor::of_ints({2, 2, 0, 1}, {2, 2})).sum().backward();
  check_values(w.grad(), {0, 0, 2, 1, 1, 0});
  CHECK_GRADCHECK(
      [](const Inputs& in) {
        return gather(in[0], 1, Tensor::of_ints({0, 2, 2, 1, 0, 0}, {2, 3, 1}));
      },
      {distinct({2, 4, 1})});
  CHECK_ERROR(gather(x, 1, Tensor::of_ints({3}, {1, 1})),
              "gather: index 3 at position 0 out of range [0, 3) for dim 1 of input [2, 3]");
  CHECK_ERROR(gather(x, 1, Tensor::of_ints({0}, {1})),
              "gather: index [1] and input [2, 3]: "
              "expected the same number of dims");
  CHECK_ERROR(gather(x, 1, Tensor::of_ints({0, 0, 0}, {3, 1})),
              "index larger than the input in dim 0");
}

TEST_CASE("scatter_add adds src at the index along a dim") {
  Tensor x = Tensor::zeros({2, 3});
  Tensor src = Tensor::of({1, 2, 3, 4}, {2, 2});
  check_values(scatter_add(x, 1, Tensor::of_ints({0, 0, 2, 1}, {2, 2}), src), {3, 0, 0, 0, 4, 3});
  check_values(scatter_add(Tensor::ones({3, 2}), 0, Tensor::of_ints({2}, {1, 1}), src),
               {1, 1, 1, 1, 2, 1});  // index [1, 1]: src cut, the block padded
  CHECK_GRADCHECK(
      [](const Inputs& in) {
        return scatter_add(in[0], 0, Tensor::of_ints({1, 0, 1, 1}, {2, 2}), in[1]);
      },
      {distinct({3, 2}), distinct({2, 3}, 1)});
  CHECK_ERROR(scatter_add(x, 1, Tensor::of_ints({5}, {1, 1}), src),
              "scatter_add: index 5 at position 0");
}

TEST_CASE("tril, triu and one_hot") {
  Tensor x = Tensor::arange(1, 10).reshape({3, 3});
  check_values(tril(x), {1, 0, 0, 4, 5, 0, 7, 8, 9});
  check_values(triu(x, 1), {0, 2, 3, 0, 0, 6, 0, 0, 0});
  check_values(tril(x, -1), {0, 0, 0, 4, 0, 0, 7, 8, 0});
  CHECK(tril(Tensor::ones({2, 2, 3})).shape() == Shape{2, 2, 3});
  CHECK_GRADCHECK([](const Inputs& in) { return triu(in[0]); }, {distinct({2, 3, 4})});
  CHECK_ERROR(tril(Tensor::ones({3})), "tril: expected an input of at least 2 dims, got shape [3]");
  Tensor oh = one_hot(Tensor::of_ints({2, 0, 1}));
  CHECK(oh.dtype() == kInt64);
  CHECK(oh.shape() == Shape{3, 3});
  check_values(oh, {0, 0, 1, 1, 0, 0, 0, 1, 0});
  CHECK(one_hot(Tensor::of_ints({1, 0}, {1, 2}), 4).shape() == Shape{1, 2, 4});
  CHECK_ERROR(one_hot(Tensor::of_ints({1, 4}), 3),
              "one_hot: id 4 at position 1 out of range [0, 3)");
}
