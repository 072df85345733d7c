// Dropout's counter-based mask: Philox4x32-10 against the Random123 paper's
// known answers, the CPU kernel against a per-element reference built from
// philox.h, the keep fraction within binomial bounds, the 1/(1-p) scaling,
// reproducibility from manual_seed and from a saved generator state, the
// gradient (the same mask), and float16.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "framework/backend/backend.h"
#include "framework/backend/philox.h"
#include "helpers.h"

using namespace minidl;
using minidl::testing::check_values;
using Inputs = std::vector<Tensor>;

namespace {

void check_words(const philox::Words& got, std::vector<uint32_t> want) {
  for (int j = 0; j < 4; ++j) {
    INFO("word " << j);
    CHECK(got.w[j] == want[j]);
  }
}

// dropout's multiplier of element i, one element at a time (no vector loop).
float reference_scale(uint64_t seed, uint64_t offset, float keep, int64_t i) {
  const philox::Words r = philox::block_words(seed, offset + static_cast<uint64_t>(i / 4));
  return philox::keep_scale(r.w[i % 4], keep, 1.f / keep);
}

// 1 where dropout kept the element of an all-ones input, 0 where it dropped it.
std::vector<int> kept(const Tensor& y) {
  std::vector<int> k;
  for (float v : y.to_float_vector()) k.push_back(v != 0.f);
  return k;
}

}  // namespace

TEST_CASE("Philox4x32-10 gives the Random123 known answers") {
  // Salmon et al. 2011 / Random123 kat_vectors: counter, key -> output
  check_words(philox::philox4x32_10(0, 0, 0, 0, 0, 0),
              {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  const uint32_t ones = 0xffffffffu;
  check_words(philox::philox4x32_10(ones, ones, ones, ones, ones, ones),
              {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  check_words(philox::philox4x32_10(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822,
                                    0x299f31d0),
              {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
  // block_words puts the block in counter words 0-1 and the seed in the key
  // (values from an independent Python implementation of the same rounds)
  const uint64_t seed = 0x0123456789abcdefull;
  check_words(philox::block_words(seed, 0), {0xb850222e, 0xc58cb04b, 0x14a7a020, 0x7a84fff9});
  check_words(philox::block_words(seed, 5), {0x5765db8a, 0xd104608f, 0xc658b7d8, 0xe9aa137f});
  // the uniform is the top 24 bits: exact, in [0, 1)
  CHECK(philox::uniform(0) == 0.f);
  CHECK(philox::uniform(0xffffffffu) == 1.f - 0x1p-24f);
  CHECK(philox::uniform(0x80000000u) == 0.5f);
}

TEST_CASE("the CPU dropout kernel draws element i from word i % 4 of block offset + i / 4") {
  const Kernels& k = kernels(Device::CPU);
  const uint64_t seed = 0x0123456789abcdefull;
  // the first ten multipliers of (seed, offset 0) for keep 0.5 and 0.7, by hand
  // from the words above: kept where word >> 8 is below keep * 2^24
  std::vector<float> ones(10, 1.f), out(10);
  k.dropout(seed, 0, 0.5f, 10, ones.data(), out.data());
  const std::vector<int> mask_half{0, 0, 1, 1, 0, 1, 1, 0, 0, 0};
  for (int i = 0; i < 10; ++i) CHECK(out[i] == (mask_half[i] ? 2.f : 0.f));
  k.dropout(seed, 0, 0.7f, 10, ones.data(), out.data());
  const std::vector<int> mask_07{0, 0, 1, 1, 1, 1, 1, 1, 0, 1};
  for (int i = 0; i < 10; ++i) CHECK(out[i] == (mask_07[i] ? 1.f / 0.7f : 0.f));

  // every length around the vector width and the OpenMP threshold, with an
  // offset, against the element-at-a-time reference
  for (int64_t n : {1, 3, 4, 5, 17, 64, 1001, 70001}) {
    CAPTURE(n);
    std::vector<float> x(n), y(n);
    for (int64_t i = 0; i < n; ++i) x[i] = 0.5f + static_cast<float>(i % 7);
    k.dropout(seed, 12345, 0.6f, n, x.data(), y.data());
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) wrong += y[i] != x[i] * reference_scale(seed, 12345, 0.6f, i);
    CHECK(wrong == 0);
  }
  // a call split at a multiple of 4 elements, the second part at offset + n1 / 4,
  // gives the same mask as one call; out may be x
  std::vector<float> whole(100, 3.f), parts(100, 3.f);
  k.dropout(seed, 7, 0.5f, 100, whole.data(), whole.data());
  k.dropout(seed, 7, 0.5f, 40, parts.data(), parts.data());
  k.dropout(seed, 7 + 10, 0.5f, 60, parts.data() + 40, parts.data() + 40);
  CHECK(whole == parts);
}

TEST_CASE("dropout keeps a fraction 1 - p within binomial bounds, in every word position") {
  const int64_t n = 1 << 20;
  for (double p : {0.1, 0.5, 0.9}) {
    CAPTURE(p);
    manual_seed(21);
    std::vector<float> v = dropout(Tensor::ones({n}), p).to_float_vector();
    const float scale = 1.f / static_cast<float>(1 - p);
    int64_t kept_total = 0, kept_at[4] = {0, 0, 0, 0}, bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (v[i] == 0.f) continue;
      bad += v[i] != scale;  // exactly 1 * float(1 / float(1 - p))
      ++kept_total;
      ++kept_at[i % 4];
    }
    CHECK(bad == 0);
    // Binomial(n, 1 - p): std sqrt(n p (1 - p)); allow 5 of them (4.5 for n/4
    // per word position, so a word that is always kept or dropped fails)
    const double sd = std::sqrt(n * p * (1 - p));
    CHECK(std::abs(kept_total - n * (1 - p)) < 5 * sd);
    for (int j = 0; j < 4; ++j) {
      CAPTURE(j);
      CHECK(std::abs(kept_at[j] - n / 4 * (1 - p)) < 5 * sd / 2);
    }
  }
}

TEST_CASE("dropout scales kept elements by 1/(1-p) and propagates NaN like x * 0") {
  manual_seed(4);
  const float nan = std::nanf("");
  Tensor x = Tensor::from_vector(std::vector<float>(64, 3.f));
  x.data<float>()[0] = nan;
  x.data<float>()[1] = -2.5f;
  std::vector<float> y = dropout(x, 0.25).to_float_vector();
  const float scale = 1.f / 0.75f;
  CHECK(std::isnan(y[0]));  // NaN * 0 and NaN * scale are both NaN
  CHECK((y[1] == -2.5f * scale || y[1] == 0.f));
  for (size_t i = 2; i < y.size(); ++i) CHECK((y[i] == 3.f * scale || y[i] == 0.f));
  check_values(dropout(Tensor::of({1, -2, 3}), 0.0), {1, -2, 3});  // p = 0 keeps all, scale 1
}

TEST_CASE("dropout masks come from the default generator: a seed or a saved state replays them") {
  manual_seed(9);
  std::vector<int> a1 = kept(dropout(Tensor::ones({256}), 0.5));
  std::vector<int> a2 = kept(dropout(Tensor::ones({256}), 0.5));
  CHECK(a1 != a2);  // each call moves the generator on: a fresh mask
  manual_seed(9);
  CHECK(kept(dropout(Tensor::ones({256}), 0.5)) == a1);
  CHECK(kept(dropout(Tensor::ones({256}), 0.5)) == a2);
  // a checkpoint's generator state (RandomGenerator::state) replays the next mask
  const std::string state = default_generator().state();
  std::vector<int> a3 = kept(dropout(Tensor::ones({256}), 0.5));
  default_generator().set_state(state);
  CHECK(kept(dropout(Tensor::ones({256}), 0.5)) == a3);
  // the mask depends on the position, not on the values or the shape
  manual_seed(9);
  Tensor y = dropout(Tensor::full({16, 16}, -4.0), 0.5);
  CHECK(kept(y) == a1);
  CHECK(y.shape() == Shape{16, 16});
}

TEST_CASE("dropout's gradient applies the forward's mask to the incoming gradient") {
  manual_seed(6);
  Tensor x = Tensor::randn({5, 7}).requires_grad_();
  Tensor r = Tensor::randn({5, 7});
  manual_seed(60);
  Tensor y = dropout(x, 0.4);
  (y * r).sum().backward();
  manual_seed(60);
  std::vector<float> m = dropout(Tensor::ones({5, 7}), 0.4).to_float_vector();
  std::vector<float> g = x.grad().to_float_vector(), rv = r.to_float_vector();
  for (size_t i = 0; i < g.size(); ++i) CHECK(g[i] == rv[i] * m[i]);  // the forward's product
  // the mask reaches the gradient twice; reseeding inside fixes it for the differences
  auto twice = [](const Inputs& in) {
    manual_seed(77);
    return dropout(in[0], 0.25) * in[0];
  };
  CHECK_GRADCHECK(twice, {Tensor::randn({3, 5})});
}

TEST_CASE("float16 dropout draws the float32 mask and rounds the scaled values") {
  manual_seed(13);
  Tensor x = Tensor::randn({9, 11});
  Tensor h = x.to(kFloat16);
  manual_seed(31);
  Tensor yh = dropout(h, 0.3);
  CHECK(yh.dtype() == kFloat16);
  manual_seed(31);
  Tensor want = dropout(h.to(kFloat32), 0.3).to(kFloat16);
  CHECK(yh.to_float_vector() == want.to_float_vector());
  CHECK_THROWS_AS(dropout(Tensor::ones({2}, kInt32), 0.5), Error);
}
