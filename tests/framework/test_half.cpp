// float16 and casts: IEEE half rounding (round to nearest even, subnormals,
// overflow to inf), cast between f32, f16, i32 and i64, float16 arithmetic
// computed in float32, and gradients through casts.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "helpers.h"

using namespace minidl;
using minidl::testing::check_values;
using Inputs = std::vector<Tensor>;

namespace {
float through_half(float f) { return half_to_float(float_to_half(f)); }
}  // namespace

TEST_CASE("float_to_half rounds to the nearest half, ties to even") {
  // 1/3 = 0.25 * (1 + 341.33/1024) -> mantissa 341 -> 0.333251953125 (0x3555)
  CHECK(float_to_half(1.f / 3).bits == 0x3555);
  CHECK(through_half(1.f / 3) == doctest::Approx(0.333251953125).epsilon(1e-9));
  CHECK(float_to_half(1.f).bits == 0x3c00);
  CHECK(float_to_half(-2.f).bits == 0xc000);
  CHECK(float_to_half(0.f).bits == 0x0000);
  CHECK(float_to_half(-0.f).bits == 0x8000);
  CHECK(through_half(0.1f) == doctest::Approx(0.0999755859375).epsilon(1e-9));
  // Spacing is 2 in [2048, 4096): 2049 ties to 2048 (even), 2051 to 2052 (even).
  CHECK(through_half(2049.f) == 2048.f);
  CHECK(through_half(2051.f) == 2052.f);
  CHECK(through_half(2050.5f) == 2050.f);
  // Spacing is 2^-10 in [1, 2): 1 + 2^-11 ties to 1, 1 + 3 * 2^-11 to 1 + 2^-9.
  CHECK(through_half(1.f + 0x1p-11f) == 1.f);
  CHECK(through_half(1.f + 3 * 0x1p-11f) == 1.f + 0x1p-9f);
}

TEST_CASE("float16 range: 65504 is the largest finite value, larger values overflow to inf") {
  CHECK(float_to_half(65504.f).bits == 0x7bff);
  CHECK(through_half(65504.f) == 65504.f);
  CHECK(through_half(65519.f) == 65504.f);  // below the halfway point 65520
  CHECK(std::isinf(through_half(65520.f)));
  CHECK(float_to_half(1e5f).bits == 0x7c00);
  CHECK(float_to_half(-1e6f).bits == 0xfc00);
  CHECK(through_half(-1e6f) == -std::numeric_limits<float>::infinity());
  CHECK(std::isinf(through_half(std::numeric_limits<float>::infinity())));
  CHECK(std::isnan(through_half(std::numeric_limits<float>::quiet_NaN())));
  // The smallest normal half, 2^-14.
  CHECK(float_to_half(0x1p-14f).bits == 0x0400);
  CHECK(through_half(0x1p-14f) == 0x1p-14f);
}

TEST_CASE("float16 subnormals: 1e-5 rounds to 168 * 2^-24") {
  // Subnormal spacing is 2^-24 = 5.96e-8; 1e-5 / 2^-24 = 167.77 -> 168.
  CHECK(float_to_half(1e-5f).bits == 168);
  CHECK(through_half(1e-5f) == doctest::Approx(1.0013580322265625e-05).epsilon(1e-9));
  CHECK(float_to_half(0x1p-24f).bits == 1);        // smallest subnormal
  CHECK(through_half(0x1p-24f) == 0x1p-24f);
  CHECK(float_to_half(0x1p-25f).bits == 0);        // half of it ties to 0 (even)
  CHECK(float_to_half(0x1.8p-25f).bits == 1);      // 0.75 of it rounds up
  CHECK(float_to_half(3 * 0x1p-25f).bits == 2);    // 1.5 ties to 2 (even)
  CHECK(float_to_half(1e-9f).bits == 0);           // underflows to zero
  CHECK(float_to_half(-1e-5f).bits == (0x8000 | 168));
  CHECK(half_to_float(Half{0x03ff}) == doctest::Approx(1023 * 0x1p-24).epsilon(1e-9));
  CHECK(half_to_float(Half{0x0200}) == 0x1p-15f);
}

TEST_CASE("cast between float32 and float16 keeps shape and rounds") {
  Tensor x = Tensor::of({1.f / 3, 65504, 1e-5f, 70000, -70000, 0.5}, {2, 3});
  Tensor h = cast(x, kFloat16);
  CHECK(h.dtype() == kFloat16);
  CHECK(h.shape() == Shape{2, 3});
  CHECK(h.nbytes() == 12);
  Tensor back = h.to(kFloat32);
  std::vector<float> v = back.to_vector<float>();
  CHECK(v[0] == doctest::Approx(0.333251953125).epsilon(1e-9));
  CHECK(v[1] == 65504.f);
  CHECK(v[2] == doctest::Approx(1.0013580322265625e-05).epsilon(1e-9));
  CHECK(v[3] == std::numeric_limits<float>::infinity());
  CHECK(v[4] == -std::numeric_limits<float>::infinity());
  CHECK(v[5] == 0.5f);
  CHECK(h.data<Half>()[1].bits == 0x7bff);
  // Casting to the same dtype is a no-op.
  CHECK(cast(x, kFloat32).same(x));
}

TEST_CASE("cast between float and integer dtypes truncates toward zero") {
  Tensor x = Tensor::of({2.7, -2.7, 0.4, -0.4, 100, -3});
  Tensor i32 = x.to(kInt32);
  CHECK(i32.dtype() == kInt32);
  CHECK(i32.to_vector<int32_t>() == std::vector<int32_t>{2, -2, 0, 0, 100, -3});
  Tensor i64 = x.to(kInt64);
  CHECK(i64.to_vector<int64_t>() == std::vector<int64_t>{2, -2, 0, 0, 100, -3});
  CHECK(x.to(kFloat16).to(kInt32).to_vector<int32_t>() == std::vector<int32_t>{2, -2, 0, 0, 100, -3});
  CHECK(x.to(kFloat16).to(kInt64).to_vector<int64_t>() == std::vector<int64_t>{2, -2, 0, 0, 100, -3});

  Tensor big = Tensor::of_ints({16777217, -5, 3000000000LL});
  check_values(big.to(kFloat32), {16777216, -5, 3e9});  // float32 has 24 bits of mantissa
  CHECK(big.to(kFloat32).to_vector<float>()[0] == 16777216.f);
  Tensor hi = Tensor::of_ints({3, 2049, -70000}, {}, kInt32).to(kFloat16);
  CHECK(hi.dtype() == kFloat16);
  std::vector<float> hv = hi.to_float_vector();
  CHECK(hv[0] == 3.f);
  CHECK(hv[1] == 2048.f);
  CHECK(hv[2] == -std::numeric_limits<float>::infinity());

  Tensor a = Tensor::of_ints({-7, 0, 123456789});
  Tensor b = a.to(kInt32);
  CHECK(b.dtype() == kInt32);
  CHECK(b.to_vector<int32_t>() == std::vector<int32_t>{-7, 0, 123456789});
  CHECK(b.to(kInt64).to_vector<int64_t>() == std::vector<int64_t>{-7, 0, 123456789});
}

TEST_CASE("float to integer casts saturate: NaN -> 0, +-inf and out of range -> max/min") {
  // As CUDA's conversion (and the CUDA backend) does; a plain C++ conversion
  // of these values is undefined behaviour (UBSan's float-cast-overflow).
  constexpr float inf = std::numeric_limits<float>::infinity();
  constexpr float nan = std::numeric_limits<float>::quiet_NaN();
  constexpr int32_t i32max = std::numeric_limits<int32_t>::max(), i32min = -i32max - 1;
  constexpr int64_t i64max = std::numeric_limits<int64_t>::max(), i64min = -i64max - 1;
  Tensor x =
      Tensor::of({nan, inf, -inf, 3e9f, -3e9f, 1e30f, -1e30f, 2147483520.f, -2147483648.f, -7.9f});
  CHECK(x.to(kInt32).to_vector<int32_t>() == std::vector<int32_t>{0, i32max, i32min, i32max, i32min,
                                                                  i32max, i32min, 2147483520,
                                                                  i32min, -7});
  CHECK(x.to(kInt64).to_vector<int64_t>() == std::vector<int64_t>{0, i64max, i64min, 3000000000,
                                                                  -3000000000, i64max, i64min,
                                                                  2147483520, -2147483648, -7});
  // 2^63 is the first float32 past int64's max; -2^63 is its min, exactly
  CHECK(Tensor::of({9.2233720e18f, -9.2233720e18f}).to(kInt64).to_vector<int64_t>() ==
        std::vector<int64_t>{i64max, i64min});
  // through float16 (65504 is its largest finite value; 1e5 is inf there)
  CHECK(Tensor::of({nan, 1e5f, -1e5f, 65504}).to(kFloat16).to(kInt32).to_vector<int32_t>() ==
        std::vector<int32_t>{0, i32max, i32min, 65504});
  // fills convert the same way
  CHECK(Tensor::full({2}, std::nan(""), kInt32).to_vector<int32_t>() ==
        std::vector<int32_t>{0, 0});
  CHECK(Tensor::full({1}, 1e300, kInt64).to_vector<int64_t>() == std::vector<int64_t>{i64max});
  CHECK(Tensor::full({1}, -inf, kInt32).to_vector<int32_t>() == std::vector<int32_t>{i32min});
  Tensor s = Tensor::zeros({2}, kInt64);  // and so does set
  s.set({0}, std::nan(""));
  s.set({1}, -1e300);
  CHECK(s.to_vector<int64_t>() == std::vector<int64_t>{0, i64min});
}

TEST_CASE("float16 ops compute in float32 and return float16") {
  Tensor a = Tensor::of({1, 2, 3}).to(kFloat16), b = Tensor::of({0.5, 0.25, 4}).to(kFloat16);
  Tensor s = a + b;
  CHECK(s.dtype() == kFloat16);
  check_values(s, {1.5, 2.25, 7});
  check_values(a * b, {0.5, 0.5, 12});
  check_values(a / b, {2, 8, 0.75});
  check_values(a - 1.0, {0, 1, 2});
  CHECK((a - 1.0).dtype() == kFloat16);
  check_values(exp(a), {2.718281828459045, 7.38905609893065, 20.085536923187668}, 1e-3);
  CHECK(exp(a).dtype() == kFloat16);
  check_values(sqrt(a), {1, 1.4142135623730951, 1.7320508075688772}, 1e-3);
  CHECK(relu(a - 2.0).dtype() == kFloat16);
  check_values(relu(a - 2.0), {0, 0, 1});
  CHECK(sum(a).dtype() == kFloat16);
  CHECK(sum(a).item() == 6);
  check_values(max(a, {0}), {3});
  check_values(mean(a), {2});
  // Mixed float16 and float32 operands give float32.
  Tensor m = a + Tensor::of({0.1, 0.1, 0.1});
  CHECK(m.dtype() == kFloat32);
  check_values(m, {1.1, 2.1, 3.1});
  // Results round to float16: 1 + 2^-11 is not representable.
  check_values(Tensor::of({1}).to(kFloat16) + 0x1p-11, {1});
}

TEST_CASE("float16 mean and scalar operands are not rounded to float16 on the way") {
  // 70000 elements: the count 70000 is inf in float16, and so is the sum.
  Tensor ones = Tensor::ones({70000}, kFloat16);
  CHECK(mean(ones).dtype() == kFloat16);
  CHECK(mean(ones).item() == 1);
  check_values(mean(Tensor::full({2, 2049}, 3.0, kFloat16), {1}), {3, 3});
  // A double operand is applied in float32: 1e5 is inf as a float16.
  Tensor small = Tensor::of({0.001, 0.002}).to(kFloat16);
  Tensor scaled = small * 1e5;
  CHECK(scaled.dtype() == kFloat16);
  check_values(scaled, {100.0625, 200.125}, 1e-4);  // float16(0.001) * 1e5, rounded to float16
  check_values(1e5 * small, {100.0625, 200.125}, 1e-4);
  check_values(small / 1e-5, {100.0625, 200.125}, 1e-4);
}

TEST_CASE("gradients flow through casts and into float16 leaves") {
  // y = 2 * f16(x): the gradient reaches the float32 leaf as float32.
  Tensor x = Tensor::of({0.5, -1.25, 3}).requires_grad_();
  (x.to(kFloat16) * 2.0).sum().backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().dtype() == kFloat32);
  check_values(x.grad(), {2, 2, 2});

  // A float16 leaf gets a float16 gradient: d sum(h^2) = 2h.
  Tensor h = Tensor::of({0.5, -1.25, 3}).to(kFloat16).requires_grad_();
  (h * h).sum().backward();
  REQUIRE(h.grad().defined());
  CHECK(h.grad().dtype() == kFloat16);
  check_values(h.grad(), {1, -2.5, 6});

  // Casts to integers leave the graph.
  Tensor y = x.to(kInt64);
  CHECK_FALSE(y.requires_grad());

  // Round trips float32 -> float16 -> float32 pass the gradient unchanged
  // (gradcheck with a step that keeps the inputs exactly representable).
  CHECK_GRADCHECK([](const Inputs& in) { return in[0].to(kFloat16).to(kFloat32) * in[0]; },
                  {Tensor::of({0.5, 1, 1.5, -2})},
                  minidl::testing::GradcheckOptions{.eps = 0.125, .rtol = 1e-3, .atol = 1e-4});
}
