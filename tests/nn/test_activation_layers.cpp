// Issue 22's activation cells: each is its function (ops.h) with PyTorch's
// constructor arguments, and Activation knows them by name.
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include "check_close.h"

using namespace minidl;
using testing::check_close;

TEST_CASE("activation cells call their functions with their arguments") {
  Tensor x = Tensor::of({-2, -0.5, 0, 1.5, 3});
  auto same = [](const Tensor& a, const Tensor& b) {
    CHECK(a.to_float_vector() == b.to_float_vector());
  };
  same(nn::LeakyReLU(0.2)(x), leaky_relu(x, 0.2));
  same(nn::GELU("tanh")(x), gelu(x, "tanh"));
  same(nn::GELU()(x), gelu(x));
  same(nn::SiLU()(x), silu(x));
  same(nn::ELU(0.5)(x), elu(x, 0.5));
  same(nn::Softplus(2, 3)(x), softplus(x, 2, 3));
  same(nn::Hardtanh(-1, 2)(x), hardtanh(x, -1, 2));
  same(nn::LogSigmoid()(x), log_sigmoid(x));
  check_close(nn::Hardtanh()(x), {-1, -0.5, 0, 1, 1});
  for (const char* name :
       {"leaky_relu", "gelu", "silu", "elu", "softplus", "hardtanh", "log_sigmoid"}) {
    CAPTURE(name);
    CHECK(nn::Activation(name)(x).shape() == x.shape());
  }
  CHECK_THROWS_WITH_AS(nn::GELU("fast"), doctest::Contains("GELU: approximate must be"), Error);
  CHECK_THROWS_WITH_AS(nn::Hardtanh(2, 1),
                       doctest::Contains("Hardtanh: min_val 2 is above max_val 1"), Error);
}

TEST_CASE("losses keep their class weights as the buffer 'weight'") {
  nn::NLLLoss nll(Tensor::of({1, 2}));
  CHECK(nll.named_buffers().contains("weight"));
  nn::BCEWithLogitsLoss bce({}, "mean", Tensor::of({2}));
  CHECK(bce.named_buffers().contains("pos_weight"));
  CHECK(nn::CrossEntropyLoss().named_buffers().size() == 0);
}
