// Shared by the nn and optim suites: a tensor against hand-computed values
// within an absolute tolerance, and an assertion on a gradcheck result
// (testing::gradcheck or testing::cell_param_gradcheck).
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gradcheck.h"

namespace minidl::testing {

// Every element of t is within tol of want (absolute).
inline void check_close(const Tensor& t, const std::vector<double>& want, double tol = 1e-5) {
  auto got = t.to_float_vector();
  REQUIRE(got.size() == want.size());
  double max_diff = 0;
  for (size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, std::abs(got[i] - want[i]));
  INFO("got " << t << ", max difference " << max_diff);
  CHECK(max_diff <= tol);
}

}  // namespace minidl::testing

// CHECK_GRADCHECK_RESULT(result): a GradcheckResult is ok, else its first failure.
#define CHECK_GRADCHECK_RESULT(expr)              \
  do {                                            \
    auto res_ = (expr);                           \
    INFO(res_.first_failure);                     \
    INFO("max abs error " << res_.max_abs_error); \
    CHECK(res_.ok);                               \
  } while (0)
