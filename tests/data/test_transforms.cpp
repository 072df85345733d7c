// Transforms against hand-computed values, in place and out of place, and
// their errors; Dataset::map's check that a transform keeps the N samples.
#include <doctest/doctest.h>

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
