// BatchNorm1d / BatchNorm2d: hand-computed training and evaluation outputs,
// PyTorch's running-statistics update (momentum 0.1, unbiased running
// variance), finite-difference gradients, state_dict names and errors.
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include "cell_gradcheck.h"
#include "check_close.h"
#include "gradcheck.h"

using namespace minidl;
using testing::cell_param_gradcheck;
using testing::check_close;
using testing::gradcheck;

// Channel 0 holds 1, 3, 5: mean 3, biased variance 8/3, unbiased 4.
// Channel 1 holds 10, 20, 60: mean 30, biased variance 1400/3, unbiased 700.
TEST_CASE("BatchNorm1d training: batch statistics, affine, running estimates by hand") {
  nn::BatchNorm1d bn(2);
  bn.weight.copy_(Tensor::of({2, 0.5}));
  bn.bias.copy_(Tensor::of({1, -1}));
  Tensor x = Tensor::of({1, 10, 3, 20, 5, 60}, {3, 2});
  // y = weight (x - mean) / sqrt(var + 1e-5) + bias
  check_close(bn(x), {-1.4494851, -1.4629100, 1.0, -1.2314550, 3.4494851, -0.3056349}, 1e-5);
  check_close(bn.running_mean, {0.3, 3.0}, 1e-6);         // 0.9 * 0 + 0.1 * mean
  check_close(bn.running_var, {1.3, 70.9}, 1e-5);         // 0.9 * 1 + 0.1 * unbiased var
  CHECK(bn.num_batches_tracked.item() == 1);

  bn.eval();  // normalizes with the running estimates, leaves them alone
  check_close(bn(x), {2.2278765, -0.5843336, 5.7360951, 0.0094755, 9.2443137, 2.3847119}, 1e-5);
  check_close(bn.running_mean, {0.3, 3.0}, 1e-6);
  CHECK(bn.num_batches_tracked.item() == 1);
}

TEST_CASE("BatchNorm counts its batches in int64, exactly past 2^24 (float32's would stall)") {
  nn::BatchNorm1d bn(2);
  const int64_t start =
      (int64_t{1} << 25) + 1;  // float32 rounds it to 2^25, and 2^25 + 1 back to 2^25
  bn.num_batches_tracked.fill_(static_cast<double>(start));
  Tensor x = Tensor::of({1, 10, 3, 20}, {2, 2});
  (void)bn(x);
  (void)bn(x);
  CHECK(bn.num_batches_tracked.to_vector<int64_t>()[0] == start + 2);
  Tensor counts = Tensor::zeros({2, 3}, kInt64).transpose(0, 1);  // a view: through a copy
  counts.increment_();
  CHECK(counts.contiguous().to_vector<int64_t>() == std::vector<int64_t>(6, 1));
  CHECK_THROWS_WITH(Tensor::zeros({2}).increment_(),
                    doctest::Contains("increment_: expected an int64 tensor, got float32"));
}

TEST_CASE("BatchNorm2d takes the statistics over N, H and W") {
  nn::BatchNorm2d bn(2, {.momentum = 0.5});
  // x [2, 2, 1, 2]: channel 0 holds 0, 2, 4, 6 (mean 3, biased var 5, unbiased 20/3),
  // channel 1 holds 1, 1, 3, 7 (mean 3, biased var 6, unbiased 8).
  Tensor x = Tensor::of({0, 2, 1, 1, 4, 6, 3, 7}, {2, 2, 1, 2});
  check_close(bn(x), {-1.3416394, -0.4472131, -0.8164959, -0.8164959, 0.4472131, 1.3416394, 0.0,
                      1.6329918},
              1e-5);
  check_close(bn.running_mean, {1.5, 1.5}, 1e-6);                    // 0.5 * 0 + 0.5 * 3
  check_close(bn.running_var, {0.5 + 10.0 / 3, 0.5 + 4.0}, 1e-5);  // 0.5 * 1 + 0.5 * unbiased
}

TEST_CASE("BatchNorm gradients match finite differences, through the batch statistics") {
  Tensor x = Tensor::randn({3, 2, 2, 2}) * 2 + 1;
  nn::BatchNorm2d bn(2);
  bn.weight.copy_(Tensor::of({1.5, -0.7}));
  bn.bias.copy_(Tensor::of({0.2, 0.3}));
  CHECK_GRADCHECK_RESULT(gradcheck([&](const std::vector<Tensor>& in) { return bn(in[0]); }, {x},
                                   {.eps = 1e-2, .rtol = 2e-2, .atol = 5e-3}));
  CHECK_GRADCHECK_RESULT(cell_param_gradcheck(bn, [&] { return bn(x); }));

  nn::BatchNorm1d bn1(3);
  Tensor x1 = Tensor::randn({4, 3, 2});
  CHECK_GRADCHECK_RESULT(gradcheck([&](const std::vector<Tensor>& in) { return bn1(in[0]); }, {x1},
                                   {.eps = 1e-2, .rtol = 2e-2, .atol = 5e-3}));
  bn1.eval();  // evaluation mode: an affine map of x, gradient weight / sqrt(running_var + eps)
  CHECK_GRADCHECK_RESULT(gradcheck([&](const std::vector<Tensor>& in) { return bn1(in[0]); }, {x1}));
}

TEST_CASE("BatchNorm registers PyTorch's names; no affine means no parameters") {
  nn::BatchNorm2d bn(4);
  std::vector<std::string> names;
  for (const auto& [name, t] : bn.state_dict()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"weight", "bias", "running_mean", "running_var",
                                          "num_batches_tracked"});
  CHECK(bn.parameters().size() == 2);
  CHECK(bn.num_batches_tracked.dtype() == kInt64);
  nn::BatchNorm1d plain(4, {.affine = false});
  CHECK(plain.parameters().empty());
  CHECK(plain.named_buffers().size() == 3);
}

TEST_CASE("BatchNorm errors name the expected and the got shape") {
  nn::BatchNorm2d bn(3);
  CHECK_THROWS_WITH(bn(Tensor::zeros({2, 4, 5, 5})),
                    doctest::Contains("BatchNorm2d(3): expected input [N, C, H, W] with C = 3, "
                                      "got [2, 4, 5, 5]"));
  CHECK_THROWS_WITH(bn(Tensor::zeros({2, 3})), doctest::Contains("got [2, 3]"));
  nn::BatchNorm1d bn1(3);
  CHECK_THROWS_WITH(bn1(Tensor::zeros({1, 3})),
                    doctest::Contains("more than one value per channel, got input [1, 3]"));
  CHECK_THROWS_WITH(nn::BatchNorm1d(3, {.momentum = 1.5}), doctest::Contains("momentum"));
}
