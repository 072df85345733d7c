// Small helpers shared by the framework suites: element-wise comparison
// against hand-computed values, a gradcheck assertion and an error assertion.
#pragma once
#include <doctest/doctest.h>

#include <initializer_list>
#include <numeric>
#include <string>
#include <vector>

#include "gradcheck.h"

namespace minidl::testing {

// Every element of t (any dtype, read as float) equals expected within eps
// (doctest's relative-plus-absolute Approx).
inline void check_values(const Tensor& t, const std::vector<double>& expected, double eps = 1e-6) {
  REQUIRE(t.numel() == static_cast<int64_t>(expected.size()));
  std::vector<float> v = t.to_float_vector();
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("element " << i);
    CHECK(v[i] == doctest::Approx(expected[i]).epsilon(eps));
  }
}

// Two tensors hold the same shape and (approximately) the same values.
inline void check_same(const Tensor& got, const Tensor& want, double eps = 1e-5) {
  REQUIRE(got.shape() == want.shape());
  std::vector<float> w = want.to_float_vector();
  check_values(got, std::vector<double>(w.begin(), w.end()), eps);
}

// The float32 values of tensors one after another, to compare two runs bit
// for bit (==).
inline std::vector<float> all_values(std::initializer_list<Tensor> tensors) {
  std::vector<float> all;
  for (const Tensor& t : tensors) {
    const std::vector<float> v = t.to_vector<float>();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

// Deterministic, well-separated values: a permutation of 0.1 * (0 .. n-1),
// minus an offset, so max/relu/pooling never meet a tie or a kink within the
// gradcheck step.
inline Tensor distinct(const Shape& shape, double offset = 0) {
  int64_t n = numel_of(shape);
  int64_t mult = 7;
  while (std::gcd(mult, n) != 1) ++mult;
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(0.1 * ((i * mult) % n) - offset);
  return Tensor::from_vector(v, shape);
}

}  // namespace minidl::testing

// CHECK_GRADCHECK(f, inputs[, options]): the autograd gradient of f agrees
// with central differences (variadic so lambdas may contain commas).
#define CHECK_GRADCHECK(...)                                          \
  do {                                                                \
    auto gc_res_ = ::minidl::testing::gradcheck(__VA_ARGS__);         \
    CHECK_MESSAGE(gc_res_.ok, gc_res_.first_failure);                 \
  } while (0)

// stmt throws minidl::Error whose message contains fragment.
#define CHECK_ERROR(stmt, fragment) \
  CHECK_THROWS_WITH_AS(stmt, doctest::Contains(fragment), ::minidl::Error)
