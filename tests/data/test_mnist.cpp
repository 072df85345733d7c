// MnistDataset on tiny directories the tests write (plain and .gz files), its
// errors, and the real Fashion-MNIST and MNIST files where they are installed.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "data/helpers.h"

using namespace minidl;
using namespace minidl::testing;

// train: 3 images 2x2 holding 10*i + pixel, labels 7 8 9 (plain files);
// test: 2 images holding 100 + 10*i + pixel, labels 1 2 (gzip).
static void write_tiny_mnist(const TempDir& dir) {
  Tensor train = Tensor::arange(12).reshape({3, 2, 2}) +
                 Tensor::of({0, 0, 0, 0, 6, 6, 6, 6, 12, 12, 12, 12}, {3, 2, 2});
  data::write_idx(dir.file("train-images-idx3-ubyte"), train);
  data::write_idx(dir.file("train-labels-idx1-ubyte"), Tensor::of_ints({7, 8, 9}));
  data::write_idx(dir.file("t10k-images-idx3-ubyte.gz"),
                  Tensor::arange(8).reshape({2, 2, 2}) + 100);
  data::write_idx(dir.file("t10k-labels-idx1-ubyte.gz"), Tensor::of_ints({1, 2}));
}

TEST_CASE("MnistDataset reads train, test and all from a directory, plain or .gz") {
  TempDir dir;
  write_tiny_mnist(dir);
  data::MnistDataset train(dir.path.string(), data::Usage::Train);
  CHECK(train.size() == 3);
  CHECK(train.data().dtype() == kFloat32);
  CHECK(train.data().shape() == Shape{3, 1, 2, 2});
  CHECK(train.data().to_float_vector() ==
        std::vector<float>{0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23});
  CHECK(train.labels().dtype() == kInt64);
  CHECK(train.labels().to_vector<int64_t>() == std::vector<int64_t>{7, 8, 9});

  data::MnistDataset test(dir.path.string(), data::Usage::Test);
  CHECK(test.data().shape() == Shape{2, 1, 2, 2});
  CHECK(test.data().at({1, 0, 1, 1}) == 107);
  CHECK(test.labels().to_vector<int64_t>() == std::vector<int64_t>{1, 2});

  data::MnistDataset all(dir.path.string(), data::Usage::All);
  CHECK(all.data().shape() == Shape{5, 1, 2, 2});
  CHECK(all.data().at({2, 0, 0, 0}) == 20);
  CHECK(all.data().at({3, 0, 0, 0}) == 100);
  CHECK(all.labels().to_vector<int64_t>() == std::vector<int64_t>{7, 8, 9, 1, 2});

  // The usual chain rescales the freshly read images in place, without a copy.
  const void* storage = train.data().raw_data();
  data::Dataset scaled =
      std::move(train).map(data::Rescale(1.0 / 10, 0)).map(data::Normalize(1, 2));
  CHECK(scaled.data().raw_data() == storage);
  CHECK(scaled.data().at({2, 0, 1, 1}) == doctest::Approx((2.3 - 1) / 2));
}

TEST_CASE("MnistDataset: missing files name the directory and the names looked for") {
  TempDir dir;
  data::write_idx(dir.file("train-images-idx3-ubyte"), Tensor::zeros({1, 2, 2}));
  std::string err = error_of([&] { data::MnistDataset(dir.path.string(), data::Usage::Train); });
  CHECK(contains(err, cat("missing files in directory '", dir.path.string(), "'")));
  CHECK(contains(err, "train-labels-idx1-ubyte[.gz]"));
  CHECK_FALSE(contains(err, "train-images-idx3-ubyte[.gz]"));
  CHECK(contains(err, "scripts/get_mnist.sh"));
  err = error_of([&] { data::MnistDataset(dir.path.string(), data::Usage::Test); });
  CHECK(contains(err, "t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz]"));
  err = error_of([&] { data::MnistDataset(dir.file("absent"), data::Usage::All); });
  CHECK(contains(err, cat("no such directory '", dir.file("absent"), "'")));
}

TEST_CASE("MnistDataset: image and label counts that differ name both files") {
  TempDir dir;
  data::write_idx(dir.file("train-images-idx3-ubyte"), Tensor::zeros({3, 2, 2}));
  data::write_idx(dir.file("train-labels-idx1-ubyte.gz"), Tensor::of_ints({1, 2}));
  std::string err = error_of([&] { data::MnistDataset(dir.path.string()); });
  CHECK(contains(err, "image and label counts differ"));
  CHECK(contains(err, cat("'", dir.file("train-images-idx3-ubyte"), "' holds 3 images")));
  CHECK(contains(err, cat("'", dir.file("train-labels-idx1-ubyte.gz"), "' holds 2 labels")));
}

TEST_CASE("MnistDataset: files of the wrong rank, and broken files, say which file") {
  TempDir dir;
  data::write_idx(dir.file("train-images-idx3-ubyte"), Tensor::zeros({3, 4}));
  data::write_idx(dir.file("train-labels-idx1-ubyte"), Tensor::of_ints({1, 2, 3}));
  std::string err = error_of([&] { data::MnistDataset(dir.path.string()); });
  CHECK(contains(err, "should hold images [N, H, W], but holds [3, 4]"));
  write_bytes(dir.file("train-images-idx3-ubyte"), idx_bytes(0x08, {3, 2, 2}, {1, 2, 3}));
  err = error_of([&] { data::MnistDataset(dir.path.string()); });
  CHECK(contains(err, dir.file("train-images-idx3-ubyte")));
  CHECK(contains(err, "truncated data"));
}

TEST_CASE("default_mnist_dir follows MINIDL_DATA, else HOME/.cache/minidl") {
  const char* old = std::getenv("MINIDL_DATA");
  std::string saved = old ? old : "";
  setenv("MINIDL_DATA", "/some/where", 1);
  CHECK(data::default_mnist_dir() == "/some/where/mnist");
  unsetenv("MINIDL_DATA");
  if (const char* home = std::getenv("HOME"))
    CHECK(data::default_mnist_dir() == cat(home, "/.cache/minidl/mnist"));
  if (old) setenv("MINIDL_DATA", saved.c_str(), 1);
}

TEST_CASE("Fashion-MNIST from Debian's dataset-fashion-mnist, where installed") {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz")) {
    MESSAGE("skipped: " << dir << " is not installed");
    return;
  }
  data::MnistDataset train(dir, data::Usage::Train), test(dir, data::Usage::Test);
  CHECK(train.data().shape() == Shape{60000, 1, 28, 28});
  CHECK(test.data().shape() == Shape{10000, 1, 28, 28});
  std::vector<int64_t> counts(10);
  for (int64_t y : test.labels().to_vector<int64_t>()) ++counts[std::clamp<int64_t>(y, 0, 9)];
  for (int64_t c : counts) CHECK(c == 1000);  // Fashion-MNIST's test set is balanced
  std::vector<float> px = train.data().slice(0, 100).to_float_vector();
  CHECK(*std::min_element(px.begin(), px.end()) == 0);
  CHECK(*std::max_element(px.begin(), px.end()) == 255);
}

TEST_CASE("MNIST from scripts/get_mnist.sh, where fetched") {
  const std::string dir = data::default_mnist_dir();
  if (!std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz")) {
    MESSAGE("skipped: run scripts/get_mnist.sh to fetch MNIST into " << dir);
    return;
  }
  data::MnistDataset train(dir, data::Usage::Train), test(dir, data::Usage::Test);
  CHECK(train.data().shape() == Shape{8000, 1, 28, 28});
  CHECK(test.data().shape() == Shape{2000, 1, 28, 28});
  // The split get_mnist.sh documents: per digit, its first 80% (largest remainder).
  const std::vector<int64_t> train_counts = {801, 902, 793, 826, 784, 690, 811, 856, 755, 782};
  const std::vector<int64_t> test_counts = {200, 225, 198, 206, 196, 173, 203, 214, 189, 196};
  std::vector<int64_t> a(10), b(10);
  for (int64_t y : train.labels().to_vector<int64_t>()) ++a[y];
  for (int64_t y : test.labels().to_vector<int64_t>()) ++b[y];
  CHECK(a == train_counts);
  CHECK(b == test_counts);
  // Interleaved, not sorted by digit.
  std::vector<int64_t> first = train.labels().slice(0, 20).to_vector<int64_t>();
  CHECK_FALSE(std::is_sorted(first.begin(), first.end()));
}
