// Transforms against hand-computed values, in place and out of place, and
// their errors; Dataset::map's check that a transform keeps the N samples;
// RandomShift by hand, and Dataset::augment's draws, which depend on (seed,
// epoch, sample) only: not on the batch size, prefetch, sharding or resuming.
#include <doctest/doctest.h>

#include <array>
#include <cstdlib>
#include <map>
#include <span>

#include "data/helpers.h"

using namespace minidl;
using namespace minidl::testing;

TEST_CASE("Rescale computes x * scale + shift in float32") {
  Tensor x = Tensor::of({0, 51, 255, 102}, {2, 2});
  Tensor y = data::Rescale(1.0 / 255, -0.5)(x);
  CHECK(y.dtype() == kFloat32);
  CHECK(y.shape() == Shape{2, 2});
  CHECK(y.at({0, 0}) == doctest::Approx(-0.5));
  CHECK(y.at({0, 1}) == doctest::Approx(-0.3));
  CHECK(y.at({1, 0}) == doctest::Approx(0.5));
  CHECK(y.at({1, 1}) == doctest::Approx(-0.1));
  CHECK(x.at({1, 0}) == 255);  // the caller's tensor is left alone
  Tensor ints = Tensor::of_ints({1, 2});
  CHECK(data::Rescale(2, 1)(ints).to_float_vector() == std::vector<float>{3, 5});
}

TEST_CASE("Normalize: one mean and std for all values, or one per channel") {
  Tensor x = Tensor::of({1, 2, 3, 4}, {4});
  CHECK(data::Normalize(2, 0.5)(x).to_float_vector() == std::vector<float>{-2, 0, 2, 4});
  // [N=2, C=2, 1, 2]: channel 0 is (x - 1) / 2, channel 1 is (x - 10) / 5.
  Tensor chw = Tensor::of({1, 3, 10, 20, 5, 7, 0, 15}, {2, 2, 1, 2});
  Tensor y = data::Normalize({1, 10}, {2, 5})(chw);
  CHECK(y.shape() == Shape{2, 2, 1, 2});
  CHECK(y.to_float_vector() == std::vector<float>{0, 1, 0, 2, 2, 3, -2, 1});
  CHECK(data::Normalize({1, 10}, {2, 5})(Tensor::zeros({0, 2, 3})).shape() == Shape{0, 2, 3});
}

TEST_CASE("Normalize rejects a zero std and mismatched channel counts") {
  std::string err = error_of([] { data::Normalize(0.5, 0); });
  CHECK(contains(err, "std must be non-zero"));
  err = error_of([] { data::Normalize({0.1, 0.2}, {1}); });
  CHECK(contains(err, "2 means and 1 stds"));
  err = error_of([] {
    data::Normalize({0.1, 0.2, 0.3}, {1, 1, 1})(Tensor::zeros({4, 1, 28, 28}));
  });
  CHECK(contains(err, "need data [N, 3, ...]"));
  CHECK(contains(err, "[4, 1, 28, 28]"));
}

TEST_CASE("HWC2CHW moves channels first") {
  // One 2x2 image with 3 channels: pixel (y, x) channel k holds 100k + 10y + x.
  Tensor hwc = Tensor::of({0, 100, 200, 1, 101, 201, 10, 110, 210, 11, 111, 211}, {1, 2, 2, 3});
  Tensor chw = data::HWC2CHW()(hwc);
  CHECK(chw.shape() == Shape{1, 3, 2, 2});
  CHECK(chw.to_float_vector() ==
        std::vector<float>{0, 1, 10, 11, 100, 101, 110, 111, 200, 201, 210, 211});
  Tensor ints = Tensor::of_ints({1, 2, 3, 4}, {1, 1, 2, 2});  // int64: 8-byte elements
  CHECK(data::HWC2CHW()(ints).to_vector<int64_t>() == std::vector<int64_t>{1, 3, 2, 4});
  std::string err = error_of([] { data::HWC2CHW()(Tensor::zeros({5, 28, 28})); });
  CHECK(contains(err, "expected data [N, H, W, C], got [5, 28, 28]"));
}

TEST_CASE("TypeCast changes the dtype") {
  Tensor y = data::TypeCast(kFloat16)(Tensor::of({0.5f, 2}));
  CHECK(y.dtype() == kFloat16);
  CHECK(y.to_float_vector() == std::vector<float>{0.5f, 2});
}

TEST_CASE("Dataset::map transforms all samples, in place on a temporary") {
  Tensor images = Tensor::of({0, 255, 51, 102}, {2, 1, 1, 2});
  Tensor labels = Tensor::of_ints({1, 0});
  // A named dataset keeps its values; its mapped copy gets new ones.
  data::Dataset ds(images, labels);
  data::Dataset scaled = ds.map(data::Rescale(1.0 / 255, 0));
  CHECK(ds.data().at({0, 0, 0, 1}) == 255);
  CHECK(scaled.data().at({0, 0, 0, 1}) == doctest::Approx(1.0));
  CHECK(images.at({0, 0, 0, 1}) == 255);

  // A chain on a temporary whose data nothing else holds reuses the storage.
  Tensor fresh = Tensor::of({0, 255, 51, 102}, {2, 1, 1, 2});
  const void* storage = fresh.raw_data();
  data::Dataset chained = data::Dataset(std::move(fresh), labels)
                              .map(data::Rescale(1.0 / 255, 0))
                              .map(data::Normalize(0.5, 0.5));
  CHECK(chained.data().raw_data() == storage);
  CHECK(chained.data().to_float_vector()[1] == doctest::Approx(1.0));
  CHECK(chained.data().to_float_vector()[2] == doctest::Approx(-0.6));

  // Any callable is a transform, but it must keep the N samples.
  data::Dataset flat = ds.map([](Tensor x) { return x.flatten(1); });
  CHECK(flat.data().shape() == Shape{2, 2});
  std::string err = error_of([&] { ds.map([](Tensor x) { return x.slice(0, 1); }); });
  CHECK(contains(err, "turned data [2, 1, 1, 2] into [1, 1, 1, 2]"));
}

// ---- Random augmentation per batch (Dataset::augment, RandomShift) ----

// n images [n, 1, 4, 5] with distinct pixels (sample i, pixel p holds 100 i + p)
// and labels 0..n-1, so a batch row's label names its sample.
static data::Dataset numbered_images(int64_t n) {
  Tensor x = Tensor::empty({n, 1, 4, 5});
  float* p = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<float>(100 * (i / 20) + i % 20);
  return data::Dataset(x, Tensor::arange(n, kInt64));
}

// Every sample's augmented image in one pass over `batches`, by sample index.
static std::map<int64_t, std::vector<float>> images_by_sample(const data::BatchDataset& batches,
                                                              int64_t epoch) {
  std::map<int64_t, std::vector<float>> out;
  for (auto& b : batches.epoch(epoch)) {
    const std::vector<float> all = b.data.to_float_vector();
    const std::vector<int64_t> y = b.labels.to_vector<int64_t>();
    const size_t row = all.size() / y.size();
    for (size_t i = 0; i < y.size(); ++i) {
      std::vector<float> image(all.begin() + i * row, all.begin() + (i + 1) * row);
      auto [it, fresh] = out.emplace(y[i], image);
      if (!fresh) CHECK(it->second == image);  // a shard's padding repeats a sample: same draw
    }
  }
  return out;
}

TEST_CASE("RandomShift moves a small image by its drawn (dy, dx), filling the border") {
  // 3x3 image 1..9; seed 3 draws (-1, 0) for sample 0 and (1, -1) for sample 1 in epoch 0.
  const data::RandomShift shift(/*max_shift=*/1, /*seed=*/3, /*fill=*/-1);
  CHECK(shift.shift(0, 0) == std::array<int64_t, 2>{-1, 0});
  CHECK(shift.shift(0, 1) == std::array<int64_t, 2>{1, -1});
  CHECK(shift.shift(1, 1) == std::array<int64_t, 2>{0, 0});
  Tensor x = Tensor::of({1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {2, 1, 3, 3});
  const int64_t index[] = {0, 1};
  Tensor y = shift(x, /*epoch=*/0, index);
  CHECK(y.shape() == Shape{2, 1, 3, 3});
  // out[y][x] = in[y + dy][x + dx]: sample 0 moves down one row, sample 1 up
  // one row and right one column.
  CHECK(y.to_float_vector() == std::vector<float>{-1, -1, -1, 1, 2, 3, 4, 5, 6,  //
                                                  -1, 4, 5, -1, 7, 8, -1, -1, -1});
  CHECK(x.to_float_vector()[0] == 1);  // the input is left alone
  // Every plane of a sample moves alike ([B, C, H, W] with C = 2), and a
  // shift of 0 is the identity.
  Tensor two = Tensor::of({1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 2, 2});
  const int64_t one[] = {1};
  CHECK(shift(two, 0, one).to_float_vector() == std::vector<float>{-1, 3, -1, -1, -1, 7, -1, -1});
  CHECK(shift(two, 1, one).to_float_vector() == two.to_float_vector());
  CHECK(data::RandomShift(0, 5)(x, 0, index).to_float_vector() == x.to_float_vector());
  // A shift wider than the image leaves only fill.
  const data::RandomShift wide(/*max_shift=*/40, /*seed=*/1, /*fill=*/7);
  const auto [dy, dx] = wide.shift(0, 0);
  REQUIRE((std::abs(dy) >= 3 || std::abs(dx) >= 3));
  const int64_t zero[] = {0};
  CHECK(wide(x.slice(0, 1), 0, zero).to_float_vector() == std::vector<float>(9, 7));
}

TEST_CASE("RandomShift draws every shift in -k..k about equally often, anew each epoch") {
  const data::RandomShift shift(/*max_shift=*/2, /*seed=*/0);
  std::map<std::array<int64_t, 2>, int> count;
  int64_t moved = 0;
  for (int64_t i = 0; i < 2500; ++i) {
    count[shift.shift(0, i)]++;
    moved += shift.shift(0, i) != shift.shift(1, i);
  }
  CHECK(count.size() == 25);  // (2k + 1)^2 shifts, each expected 100 times
  for (const auto& entry : count) {  // (CAPTURE cannot take a structured binding in clang 14)
    const auto& s = entry.first;
    const auto c = entry.second;
    CAPTURE(s[0]);
    CAPTURE(s[1]);
    CHECK(c >= 65);
    CHECK(c <= 135);
  }
  CHECK(moved > 2300);  // another epoch, another draw (equal by chance 1 in 25)
  CHECK(data::RandomShift(2, /*seed=*/1).shift(0, 0) != shift.shift(0, 0));
}

TEST_CASE("augment: a sample's draw is the same whatever the batch size, prefetch or sharding") {
  const data::Dataset ds = numbered_images(21).shuffle(/*seed=*/4).augment(data::RandomShift(1, 9));
  const auto reference = images_by_sample(ds.batch(1).prefetch(0), /*epoch=*/2);
  REQUIRE(reference.size() == 21);
  // Each image is its sample's, shifted by its draw for epoch 2 (hand-shifted here).
  const data::RandomShift shift(1, 9);
  const Tensor raw = numbered_images(21).data();
  for (const auto& [i, image] : reference) {
    const auto [dy, dx] = shift.shift(2, i);
    for (int64_t y = 0; y < 4; ++y)
      for (int64_t x = 0; x < 5; ++x) {
        const bool inside = 0 <= y + dy && y + dy < 4 && 0 <= x + dx && x + dx < 5;
        CHECK(image[y * 5 + x] == (inside ? raw.at({i, 0, y + dy, x + dx}) : 0.0));
      }
  }
  CHECK(images_by_sample(ds.batch(8).prefetch(2), 2) == reference);
  CHECK(images_by_sample(ds.batch(21).prefetch(1), 2) == reference);
  // Two ranks with batch 4 each see the samples of the one-rank batch 8, drawn alike.
  for (int64_t r = 0; r < 2; ++r)
    for (const auto& [i, image] : images_by_sample(ds.shard(r, 2).batch(4), 2))
      CHECK(image == reference.at(i));
  // A resumed epoch (from batch 3) draws as the whole pass did.
  auto resumed = ds.batch(2);
  int64_t step = 3;
  for (auto& b : resumed.epoch(2, /*first=*/3)) {
    auto whole = ds.batch(2).epoch(2);
    auto it = whole.begin();
    for (int64_t k = 0; k < step; ++k) ++it;
    CHECK(b.data.to_float_vector() == it->data.to_float_vector());
    ++step;
  }
  CHECK(step == 11);
  // Another epoch moves some samples elsewhere.
  CHECK(images_by_sample(ds.batch(8), 3) != reference);
}

TEST_CASE("augment and RandomShift name what is wrong") {
  CHECK(contains(error_of([] { data::RandomShift(-1, 0); }),
                 "max_shift must be from 0 to 1024 pixels, got -1"));
  const int64_t index[] = {0, 1};
  std::string err = error_of([&] { data::RandomShift(1, 0)(Tensor::zeros({2, 3}), 0, index); });
  CHECK(contains(err, "expected float32 images [B, ..., H, W] (map Rescale first), got float32 [2, 3]"));
  err = error_of([&] { data::RandomShift(1, 0)(Tensor::zeros({3, 2, 2}), 0, index); });
  CHECK(contains(err, "2 sample indices for a batch of 3"));
  CHECK(contains(error_of([] { numbered_images(2).augment(nullptr); }), "empty transform"));
  auto drop_one = [](Tensor x, int64_t, std::span<const int64_t>) { return x.slice(0, 1); };
  err = error_of([&] {
    for (auto& b : numbered_images(4).augment(drop_one).batch(2).prefetch(0).epoch(0)) (void)b;
  });
  CHECK(contains(err, "turned batch [2, 1, 4, 5] into [1, 1, 4, 5]; it must keep dim 0"));
}
