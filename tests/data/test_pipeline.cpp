// The pipeline: batch sizes with and without drop_remainder, shuffle
// reproducibility, the DistributedSampler property of shard (the ranks' step-k
// batches together are the one-rank step-k batch), and the prefetch thread.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>

#include "data/helpers.h"

using namespace minidl;
using namespace minidl::testing;

// n samples; sample i is data [i, 1000 + i] with label i, so rows are traceable.
static data::Dataset numbered(int64_t n) {
  Tensor x = Tensor::empty({n, 2});
  for (int64_t i = 0; i < n; ++i) {
    x.set({i, 0}, static_cast<double>(i));
    x.set({i, 1}, static_cast<double>(1000 + i));
  }
  return data::Dataset(x, Tensor::arange(n, kInt64));
}

// Every batch's labels, checking on the way that each data row matches its label.
static std::vector<std::vector<int64_t>> labels_of(data::Epoch epoch) {
  std::vector<std::vector<int64_t>> out;
  for (auto& b : epoch) {
    REQUIRE(b.data.size(0) == b.labels.size(0));
    std::vector<int64_t> y = b.labels.to_vector<int64_t>();
    for (int64_t i = 0; i < b.data.size(0); ++i) {
      CHECK(b.data.at({i, 0}) == y[i]);
      CHECK(b.data.at({i, 1}) == 1000 + y[i]);
    }
    out.push_back(y);
  }
  return out;
}

static std::vector<int64_t> sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST_CASE("batch: sizes with and without drop_remainder, in file order without shuffle") {
  auto ds = numbered(10);
  auto keep = ds.batch(4);
  CHECK(keep.num_batches() == 3);
  CHECK(keep.size() == 10);
  auto batches = labels_of(keep.epoch(0));
  REQUIRE(batches.size() == 3);
  CHECK(batches[0] == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(batches[1] == std::vector<int64_t>{4, 5, 6, 7});
  CHECK(batches[2] == std::vector<int64_t>{8, 9});

  auto drop = ds.batch(4, /*drop_remainder=*/true);
  CHECK(drop.num_batches() == 2);
  CHECK(drop.size() == 8);
  batches = labels_of(drop.epoch(0));
  REQUIRE(batches.size() == 2);
  CHECK(batches[1] == std::vector<int64_t>{4, 5, 6, 7});

  auto whole = ds.batch(10, true);
  CHECK(whole.num_batches() == 1);
  CHECK(ds.batch(11, true).num_batches() == 0);
  CHECK(labels_of(ds.batch(11, true).epoch(0)).empty());
  CHECK(labels_of(ds.batch(11).epoch(0)).size() == 1);
  CHECK(contains(error_of([&] { ds.batch(0); }), "batch_size must be at least 1, got 0"));
  // The largest batch size is one partial batch, not an overflow to none.
  const auto biggest = ds.batch(std::numeric_limits<int64_t>::max());
  CHECK(biggest.num_batches() == 1);
  CHECK(labels_of(biggest.epoch(0)) == std::vector<std::vector<int64_t>>{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}});
}

TEST_CASE("a batch has the data's trailing shape and dtypes: MNIST-like [B, 1, 28, 28]") {
  data::Dataset ds(Tensor::zeros({5, 1, 28, 28}), Tensor::arange(5, kInt64));
  auto epoch = ds.batch(2).epoch(0);
  CHECK(epoch.num_batches() == 3);
  auto it = epoch.begin();
  CHECK(it->data.shape() == Shape{2, 1, 28, 28});
  CHECK(it->data.dtype() == kFloat32);
  CHECK(it->labels.shape() == Shape{2});
  CHECK(it->labels.dtype() == kInt64);
}

TEST_CASE("shuffle: a permutation, reproducible per seed and epoch, new every epoch") {
  auto ds = numbered(100);
  auto a = ds.shuffle(/*seed=*/7), b = numbered(100).shuffle(7), c = ds.shuffle(8);
  CHECK(sorted(a.indices(0)) == ds.indices(0));
  CHECK(a.indices(0) == b.indices(0));
  CHECK(a.indices(3) == b.indices(3));
  CHECK(a.indices(0) != a.indices(1));
  CHECK(a.indices(0) != c.indices(0));
  CHECK(a.indices(0) != ds.indices(0));
  // The same on every machine: minidl::RandomGenerator and our own Fisher-Yates.
  auto ten = numbered(10);
  CHECK(ten.shuffle(0).indices(0) == std::vector<int64_t>{6, 1, 2, 4, 7, 5, 3, 0, 9, 8});
  CHECK(ten.shuffle(0).indices(1) == std::vector<int64_t>{4, 6, 8, 9, 3, 5, 7, 2, 0, 1});
  CHECK(ten.shuffle(1).indices(0) == std::vector<int64_t>{5, 0, 8, 7, 3, 1, 9, 6, 4, 2});
  // The batches follow indices().
  auto batches = labels_of(a.batch(30).epoch(5));
  std::vector<int64_t> flat;
  for (auto& y : batches) flat.insert(flat.end(), y.begin(), y.end());
  CHECK(flat == a.indices(5));
}

TEST_CASE(
    "shard: with batch B / N per rank, the ranks' step-k batches make the one-rank step-k batch") {
  const int64_t n_samples = 96, global_batch = 8;
  for (bool shuffle : {false, true}) {
    for (int64_t world : {2, 4}) {
      CAPTURE(shuffle);
      CAPTURE(world);
      auto base = shuffle ? numbered(n_samples).shuffle(/*seed=*/3) : numbered(n_samples);
      for (int64_t epoch : {0, 1}) {
        auto single = labels_of(base.batch(global_batch).epoch(epoch));
        std::vector<std::vector<std::vector<int64_t>>> ranks;
        for (int64_t r = 0; r < world; ++r) {
          auto sharded = base.shard(r, world).batch(global_batch / world);
          CHECK(sharded.num_batches() == static_cast<int64_t>(single.size()));
          ranks.push_back(labels_of(sharded.epoch(epoch)));
        }
        for (size_t k = 0; k < single.size(); ++k) {
          std::vector<int64_t> joined;
          for (auto& rank : ranks) joined.insert(joined.end(), rank[k].begin(), rank[k].end());
          CHECK(sorted(joined) == sorted(single[k]));
        }
      }
    }
  }
}

TEST_CASE("shard: every rank gets ceil(N / S) samples, padded from the start of the order") {
  auto ds = numbered(10).shuffle(5);
  std::vector<int64_t> order = ds.indices(2), seen;
  for (int64_t r = 0; r < 4; ++r) {
    auto mine = ds.shard(r, 4);
    CHECK(mine.size() == 3);
    std::vector<int64_t> idx = mine.indices(2);
    REQUIRE(idx.size() == 3);
    for (int64_t j = 0; j < 3; ++j) CHECK(idx[j] == order[(r + 4 * j) % 10]);
    seen.insert(seen.end(), idx.begin(), idx.end());
    CHECK(mine.batch(2).num_batches() == 2);
  }
  std::vector<int64_t> expect = order;
  expect.push_back(order[0]);
  expect.push_back(order[1]);
  CHECK(sorted(seen) == sorted(expect));
  CHECK(numbered(3).shard(4, 5).indices(0) == std::vector<int64_t>{1});  // N < S: repeats
}

TEST_CASE("shard rejects arguments out of range") {
  auto ds = numbered(4);
  CHECK(contains(error_of([&] { ds.shard(2, 2); }), "shard_id 2 is out of range for num_shards 2"));
  CHECK(contains(error_of([&] { ds.shard(-1, 2); }), "shard_id -1 is out of range"));
  CHECK(contains(error_of([&] { ds.shard(0, 0); }), "num_shards must be at least 1, got 0"));
}

TEST_CASE("prefetch gives the same batches as gathering on the caller's thread") {
  auto ds = numbered(53).shuffle(11).shard(1, 2);
  for (int64_t depth : {1, 2, 8}) {
    CAPTURE(depth);
    auto with = labels_of(ds.batch(5).prefetch(depth).epoch(3));
    auto without = labels_of(ds.batch(5).prefetch(0).epoch(3));
    CHECK(with.size() == 6);
    CHECK(with == without);
  }
  CHECK(ds.batch(5).prefetch_depth() == 2);  // on by default
  CHECK(contains(error_of([&] { ds.batch(5).prefetch(-1); }), "depth must be >= 0"));
}

TEST_CASE("prefetch stops cleanly when an epoch is abandoned") {
  // Big enough that the worker is blocked on a full queue when we leave.
  data::Dataset ds(Tensor::zeros({4096, 1, 28, 28}), Tensor::arange(4096, kInt64));
  auto train = ds.shuffle(1).batch(16).prefetch(2);
  const auto start = std::chrono::steady_clock::now();
  for (int rep = 0; rep < 20; ++rep) {
    int64_t seen = 0;
    for (auto& b : train.epoch(rep)) {
      CHECK(b.data.size(0) == 16);
      if (++seen == 3) break;
    }
    CHECK(seen == 3);
  }
  {
    auto epoch = train.epoch(0);  // started, nothing consumed
    auto it = epoch.begin();
    CHECK(it->labels.size(0) == 16);
  }
  { auto never = train.epoch(0); }  // never started
  // An epoch outlives the BatchDataset it came from.
  std::optional<data::Epoch> orphan;
  {
    auto temp = data::Dataset(Tensor::zeros({40, 3}), Tensor::arange(40, kInt64)).batch(4);
    orphan.emplace(temp.epoch(0));
  }
  int64_t batches = 0;
  for (auto& b : *orphan) batches += b.data.size(0) == 4;
  CHECK(batches == 10);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds < 5);  // no hang
  auto epoch = train.epoch(0);
  epoch.begin();
  CHECK(contains(error_of([&] { epoch.begin(); }), "can be iterated only once"));
}
