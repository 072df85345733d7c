// nn::Embedding: lookup by hand, PyTorch's initialisation, the padding row's
// missing gradient, from_pretrained, and errors.
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <cmath>

#include "cell_gradcheck.h"
#include "check_close.h"

using namespace minidl;
using testing::cell_param_gradcheck;
using testing::check_close;

namespace {
// weight row i = [10 i, 10 i + 1]
void set_rows(nn::Embedding& e) {
  NoGradGuard no_grad;
  for (int64_t i = 0; i < e.num_embeddings; ++i)
    for (int64_t j = 0; j < e.embedding_dim; ++j) e.weight.set({i, j}, 10.0 * i + j);
}
}  // namespace

TEST_CASE("Embedding looks rows up for ids of any shape, int64 and int32") {
  nn::Embedding e{4, 2};
  set_rows(e);
  Tensor y = e(Tensor::of_ints({0, 3, 1, 1}, {2, 2}));
  CHECK(y.shape() == Shape{2, 2, 2});
  check_close(y, {0, 1, 30, 31, 10, 11, 10, 11});
  check_close(e(Tensor::of_ints({2, 0}, {2}, kInt32)), {20, 21, 0, 1});
  CHECK(e(Tensor::of_ints({3}).reshape({})).shape() == Shape{2});  // a 0-d id -> [DIM]
}

TEST_CASE(
    "Embedding init is N(0, 1) with the padding row zeroed; negative padding_idx counts from the "
    "end") {
  manual_seed(3);
  nn::Embedding e{1000, 8, /*padding_idx=*/-1};
  CHECK(e.padding_idx == 999);
  CHECK(e.named_parameters().keys() == std::vector<std::string>{"weight"});
  CHECK(e.weight.shape() == Shape{1000, 8});
  const std::vector<float> w = e.weight.to_float_vector();
  double s = 0, s2 = 0;
  for (size_t i = 0; i < 999 * 8; ++i) s += w[i], s2 += w[i] * w[i];
  const double n = 999 * 8, mean = s / n;
  CHECK(std::abs(mean) < 0.05);
  CHECK(std::abs(std::sqrt(s2 / n - mean * mean) - 1) < 0.05);
  for (size_t i = 999 * 8; i < w.size(); ++i) CHECK(w[i] == 0);
}

TEST_CASE("Embedding gradients: repeated ids add up, the padding row gets none") {
  nn::Embedding e{4, 2, /*padding_idx=*/1};
  set_rows(e);  // a non-zero padding row is still read
  Tensor ids = Tensor::of_ints({1, 2, 2, 0, 1}, {5});
  Tensor y = e(ids);
  check_close(y, {10, 11, 20, 21, 20, 21, 0, 1, 10, 11});
  // d sum(y * r) / d weight[i] = sum of r over the positions with id i
  Tensor r = Tensor::of({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {5, 2});
  (y * r).sum().backward();
  check_close(e.weight.grad(), {7, 8, 0, 0, 3 + 5, 4 + 6, 0, 0});
  manual_seed(5);
  nn::Embedding small{5, 3};
  Tensor many = Tensor::of_ints({4, 0, 4, 2, 2, 2}, {2, 3});
  CHECK_GRADCHECK_RESULT(cell_param_gradcheck(small, [&] { return small(many); }));
}

TEST_CASE("Embedding::from_pretrained copies the table; freeze decides requires_grad") {
  Tensor table = Tensor::of({1, 2, 3, 4, 5, 6}, {3, 2});
  auto frozen = nn::Embedding::from_pretrained(table);
  CHECK(!frozen->weight.requires_grad());
  CHECK(frozen->trainable_params().empty());
  check_close((*frozen)(Tensor::of_ints({2, 0})), {5, 6, 1, 2});
  auto tuned = nn::Embedding::from_pretrained(table, /*freeze=*/false, /*padding_idx=*/0);
  CHECK(tuned->weight.requires_grad());
  check_close((*tuned)(Tensor::of_ints({0})), {1, 2});  // the given padding row, kept
  table.set({0, 0}, 100);
  CHECK(tuned->weight.at({0, 0}) == 1);  // a copy
  CHECK_THROWS_WITH_AS(nn::Embedding::from_pretrained(Tensor::zeros({6})),
                       doctest::Contains("expected embeddings [NUM, DIM], got [6]"), Error);
}

TEST_CASE("Embedding rejects ids out of range (naming id and position), float ids, bad sizes") {
  nn::Embedding e{4, 2};
  CHECK_THROWS_WITH_AS(
      e(Tensor::of_ints({0, 1, 2, 7}, {2, 2})),
      doctest::Contains("Embedding(4, 2): id 7 at flat position 3 of ids [2, 2] is outside [0, 4)"),
      Error);
  CHECK_THROWS_WITH_AS(e(Tensor::of_ints({-1}, {1}, kInt32)),
                       doctest::Contains("id -1 at flat position 0"), Error);
  CHECK_THROWS_WITH_AS(e(Tensor::of({1, 2})),
                       doctest::Contains("expected ids of dtype int32 or int64, got float32"),
                       Error);
  CHECK_THROWS_WITH_AS(nn::Embedding(4, 2, 4),
                       doctest::Contains("padding_idx 4 is outside [-4, 4)"), Error);
  CHECK_THROWS_AS(nn::Embedding(0, 2), Error);
}
