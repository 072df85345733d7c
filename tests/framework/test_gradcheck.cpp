// The gradcheck helper itself: it passes for correct backwards and fails for a
// deliberately wrong one.
#include <doctest/doctest.h>

#include "gradcheck.h"

using namespace minidl;
using minidl::testing::gradcheck;

// x -> x^3 with a backward that forgets the factor 3 (returns x^2 * g).
static Tensor wrong_cube(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) out.data<float>()[i] = std::pow(x.data<float>()[i], 3.f);
  return record(out, "wrong_cube", {x}, [x](const Tensor& g) {
    return std::vector<Tensor>{mul(g, mul(x.detach(), x.detach()))};
  });
}

TEST_CASE("gradcheck accepts a correct backward") {
  manual_seed(1);
  auto res = gradcheck([](const std::vector<Tensor>& in) { return pow(in[0], 3); },
                       {Tensor::randn({3, 4})});
  CHECK_MESSAGE(res.ok, res.first_failure);
  CHECK(res.max_abs_error < 1e-2);
}

TEST_CASE("gradcheck rejects a deliberately wrong backward") {
  manual_seed(1);
  auto res = gradcheck([](const std::vector<Tensor>& in) { return wrong_cube(in[0]); },
                       {Tensor::randn({3, 4})});
  CHECK_FALSE(res.ok);
  CHECK(res.first_failure.find("analytic") != std::string::npos);
}
