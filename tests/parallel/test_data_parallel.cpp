// DataParallel (and DistributedGradReducer) under 1, 2 and 4 ranks.
//
// The central property: N ranks, each taking its B/N rows of one global batch,
// end K optimizer steps with the same parameters as one model taking the whole
// batch. The single-model reference runs in the same process, on a separate
// model with the same initial weights, without communication.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nets.h"
#include "framework/autograd.h"
#include "framework/ops.h"
#include "framework/random.h"
#include "nn/conv.h"
#include "nn/dense.h"
#include "nn/loss.h"
#include "optim/sgd.h"
#include "parallel/backend/local.h"
#include "parallel/data_parallel.h"
#include "parallel/grad_accumulation.h"
#include "parallel/grad_reducer.h"
#include "parallel/init.h"

using namespace minidl;
using namespace minidl::testing;
using parallel::DataParallel;

namespace {

std::vector<Tensor> grads_of(const std::vector<Tensor>& params) {
  std::vector<Tensor> g;
  for (const Tensor& p : params) g.push_back(p.grad());
  return g;
}

// This rank's rows [r B/N, (r+1) B/N) of a global batch.
Tensor shard(const Tensor& global) {
  const int64_t b = global.size(0) / N();
  return global.slice(R() * b, (R() + 1) * b);
}

constexpr int64_t kBatch = 8;  // divisible by 1, 2 and 4
constexpr int kSteps = 3;

// K steps of one model on the full batch (reference) and K steps of a replica
// on this rank's shard, driven by `step` (forward, backward, reduce, update).
// Returns the max relative parameter difference.
using ShardStep = std::function<void(Mlp& net, const Tensor& x, const Tensor& y)>;
double run_equivalence(
    const std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>& make_opt,
    const std::function<ShardStep(Mlp& net, optim::Optimizer& opt)>& make_step) {
  manual_seed(123);
  std::vector<Tensor> xs, ys;
  for (int k = 0; k < kSteps; ++k) {
    xs.push_back(Tensor::randn({kBatch, 6}));
    ys.push_back(Tensor::randn({kBatch, 3}));
  }
  manual_seed(7);
  Mlp ref, net;
  net.load_state_dict(ref.state_dict());
  nn::MSELoss mse;

  auto ref_opt = make_opt(ref.trainable_params());
  for (int k = 0; k < kSteps; ++k) {
    mse(ref(xs[k]), ys[k]).backward();
    ref_opt->step();
    ref_opt->zero_grad();
  }

  auto opt = make_opt(net.trainable_params());
  ShardStep step = make_step(net, *opt);
  for (int k = 0; k < kSteps; ++k) {
    step(net, shard(xs[k]), shard(ys[k]));
    opt->step();
    opt->zero_grad();
  }
  CHECK(same_on_every_rank(net.parameters()));
  return max_rel_diff(net.parameters(), ref.parameters());
}

std::unique_ptr<optim::Optimizer> momentum(std::vector<Tensor> params) {
  return std::make_unique<optim::Momentum>(std::move(params), /*lr=*/0.1, /*momentum=*/0.9);
}
std::unique_ptr<optim::Optimizer> sgd(std::vector<Tensor> params) {
  return std::make_unique<optim::SGD>(std::move(params), /*lr=*/0.1);
}
}  // namespace

TEST_CASE(
    "equivalence: DataParallel automatic style (Momentum) equals one rank on the full batch") {
  std::unique_ptr<DataParallel> dp;
  nn::MSELoss mse;
  double diff = run_equivalence(momentum, [&](Mlp& net, optim::Optimizer&) -> ShardStep {
    dp = std::make_unique<DataParallel>(net, parallel::DataParallelOptions{.bucket_bytes = 64});
    return [&](Mlp&, const Tensor& x, const Tensor& y) { mse((*dp)(x), y).backward(); };
  });
  MESSAGE(N(), " ranks, automatic: max relative parameter difference ", diff);
  CHECK(diff <= 1e-5);
  CHECK(dp->stats().reductions == (N() > 1 ? kSteps : 0));
}

TEST_CASE("equivalence: DataParallel explicit style (SGD) equals one rank on the full batch") {
  std::unique_ptr<DataParallel> dp;
  nn::MSELoss mse;
  double diff = run_equivalence(sgd, [&](Mlp& net, optim::Optimizer&) -> ShardStep {
    dp = std::make_unique<DataParallel>(net);
    return [&](Mlp&, const Tensor& x, const Tensor& y) {
      Tensor loss = dp->scale_loss(mse((*dp)(x), y));
      loss.backward();
      CHECK(dp->stats().buckets_started_in_hooks == 0);  // explicit: the hooks stay quiet
      dp->apply_collective_grads();
    };
  });
  MESSAGE(N(), " ranks, explicit: max relative parameter difference ", diff);
  CHECK(diff <= 1e-5);
}

TEST_CASE("equivalence: DistributedGradReducer (Momentum) equals one rank on the full batch") {
  std::unique_ptr<parallel::DistributedGradReducer> reducer;
  nn::MSELoss mse;
  double diff = run_equivalence(momentum, [&](Mlp& net, optim::Optimizer&) -> ShardStep {
    reducer = std::make_unique<parallel::DistributedGradReducer>(net.trainable_params());
    return [&](Mlp& m, const Tensor& x, const Tensor& y) {
      mse(m(x), y).backward();
      reducer->reduce_grads();
    };
  });
  MESSAGE(N(), " ranks, DistributedGradReducer: max relative parameter difference ", diff);
  CHECK(diff <= 1e-5);
}

// x [B, 1, 8, 8] -> conv 4@3x3 (pad 1) -> relu -> max-pool 2 -> fc 64-10: the
// discrete choices of LeNet (ReLU's sign, max-pool's largest element) in small.
struct PoolNet : nn::Cell {
  nn::Conv2d conv{/*in=*/1, /*out=*/4, /*kernel=*/3, {.padding = 1}};
  nn::Dense fc{64, 10};
  PoolNet() { register_cells({{"conv", conv}, {"fc", fc}}); }
  Tensor forward(const Tensor& x) override { return fc(max_pool2d(relu(conv(x)), 2).flatten(1)); }
};

TEST_CASE(
    "rounding: N ranks, or one process splitting the batch, track one process on the whole batch "
    "to float32 rounding; one rank is the same bits") {
  // 100 Momentum steps on fresh random batches of 16: one model on the whole
  // batch, DataParallel replicas on 16 / N rows each, and one model taking the
  // batch in two halves (GradAccumulation). docs/data-parallel.md cites the
  // figures this prints.
  constexpr int64_t kRows = 16;
  constexpr int kLong = 100;
  manual_seed(11);
  std::vector<Tensor> xs, ys;
  for (int k = 0; k < kLong; ++k) {
    // MNIST-like pixels: most 0, the rest multiples of 1/8 (many equal values).
    Tensor x = Tensor::rand({kRows, 1, 8, 8});
    float* p = x.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) p[i] = p[i] < 0.5f ? 0.0f : std::floor(p[i] * 16) / 8 - 1;
    xs.push_back(x);
    ys.push_back(Tensor::randint(0, 10, {kRows}));
  }
  manual_seed(3);
  PoolNet ref, net, halves;  // halves: one process, the batch split in two
  net.load_state_dict(ref.state_dict());
  halves.load_state_dict(ref.state_dict());
  DataParallel dp(net);
  parallel::GradAccumulation split(halves, /*micro_size=*/2);
  nn::CrossEntropyLoss loss;
  optim::Momentum ref_opt(ref.trainable_params(), 0.05, 0.9), opt(net.trainable_params(), 0.05, 0.9),
      halves_opt(halves.trainable_params(), 0.05, 0.9);
  std::vector<double> diff, halves_diff;
  bool replicas_equal = true;
  for (int k = 0; k < kLong; ++k) {
    loss(ref(xs[k]), ys[k]).backward();
    ref_opt.step();
    ref_opt.zero_grad();
    loss(dp(shard(xs[k])), shard(ys[k])).backward();
    opt.step();
    opt.zero_grad();
    split.forward_backward(xs[k], ys[k], loss);
    halves_opt.step();
    halves_opt.zero_grad();
    replicas_equal = replicas_equal && same_on_every_rank(net.parameters());
    diff.push_back(max_rel_diff(net.parameters(), ref.parameters()));
    halves_diff.push_back(max_rel_diff(halves.parameters(), ref.parameters()));
  }
  CHECK(replicas_equal);  // bit for bit, every step, on every rank count
  auto trace = [](const std::vector<double>& d) {
    std::string out;
    for (int k : {1, 10, 30, 60, 100}) out += cat(k == 1 ? " " : ", ", k, ": ", d[k - 1]);
    return out;
  };
  MESSAGE(N(), " rank(s) vs one rank on the whole batch, max relative parameter difference after step",
          trace(diff));
  MESSAGE("one process, the batch in two halves (GradAccumulation) vs the whole batch, after step",
          trace(halves_diff));
  const double worst = *std::max_element(diff.begin(), diff.end());
  if (N() == 1) {
    CHECK(worst == 0.0);  // one rank is one process taking the whole batch: the same bits
  } else {
    // The gradient is a mean of N shard means, summed in another order than
    // one mean over 16 rows: the first step differs only in the last bits
    // (6e-8 here), and in this small net no ReLU or max-pool choice flips, so
    // 100 steps stay within a few roundings (4e-7 measured).
    CHECK(diff[0] <= 1e-6);
    CHECK(worst <= 1e-5);
  }
  // Two ranks are the same bits as one process taking the batch in halves:
  // the difference is the summation order, not the communication.
  if (N() == 2) CHECK(diff == halves_diff);
  CHECK(halves_diff[0] <= 1e-6);  // the same rounding, with no communication at all
  CHECK(*std::max_element(halves_diff.begin(), halves_diff.end()) <= 1e-5);
}

TEST_CASE("scale_loss divides by the number of ranks; one rank returns the loss itself") {
  manual_seed(1);
  Mlp net;
  DataParallel dp(net);
  CHECK(dp.nranks() == N());
  Tensor loss = Tensor::full({}, 6.0).requires_grad_();
  Tensor scaled = dp.scale_loss(loss);
  CHECK(scaled.item() == doctest::Approx(6.0 / N()));
  if (N() == 1) CHECK(scaled.same(loss));
  scaled.backward();
  CHECK(loss.grad().item() == doctest::Approx(1.0 / N()));  // autograd flows through it
  dp.apply_collective_grads();  // a backward that reached none of net's parameters: zeros, summed
}

TEST_CASE("construction broadcasts rank 0's parameters") {
  manual_seed(0);
  Mlp rank0_init;    // what rank 0 builds (every rank can rebuild it from seed 0)
  manual_seed(R());  // ranks seeded differently
  Mlp net;
  if (N() > 1) CHECK_FALSE(same_on_every_rank(net.parameters()));
  DataParallel dp(net);
  CHECK(same_on_every_rank(net.parameters()));
  CHECK(max_rel_diff(net.parameters(), rank0_init.parameters()) == 0.0);
}

TEST_CASE("different models on different ranks: the same clear error on every rank") {
  // rank 1 has fc1 [8, 5] where the others have [8, 6]
  {
    Mlp net(R() == 1 ? 5 : 6);
    if (N() == 1) {
      CHECK_NOTHROW(DataParallel{net});
    } else {
      CHECK_THROWS_WITH_AS(DataParallel{net},
                           doctest::Contains("DataParallel: rank 1 has parameter fc1.weight [8, 5] "
                                             "where rank 0 has fc1.weight [8, 6]"),
                           Error);
      CHECK_THROWS_WITH_AS(DataParallel{net},
                           doctest::Contains("ranks that differ from rank 0: 1."), Error);
    }
  }
  // the last rank has one layer more
  if (N() > 1) {
    Deep net(R() == N() - 1 ? 3 : 2);  // 2 layers: 6->16->3; 3 layers: 6->16->16->3
    try {
      DataParallel dp(net);
      FAIL("no error");
    } catch (const Error& e) {
      std::string what = e.what();
      MESSAGE(what);
      CHECK(what.find("rank " + std::to_string(N() - 1) +
                      " has parameter fc1.weight [16, 16] "
                      "where rank 0 has fc1.weight [3, 16]") != std::string::npos);
    }
  }
  // a different number of parameters after equal ones
  if (N() > 1) {
    Mlp net;
    if (R() == 1) net.register_cell("fc3", std::make_shared<nn::Dense>(3, 2));
    CHECK_THROWS_WITH_AS(DataParallel{net},
                         doctest::Contains("rank 1 has 6 parameters where rank 0 has 4; its first "
                                           "extra one is fc3.weight [2, 3]"),
                         Error);
  }
  // and the ranks are still in step afterwards
  manual_seed(3);
  Mlp ok;
  DataParallel dp(ok);
  CHECK(same_on_every_rank(ok.parameters()));
}

TEST_CASE("buckets: reverse registration order") {
  manual_seed(2);
  Mlp net;  // fc1.weight, fc1.bias, fc2.weight, fc2.bias
  DataParallel per_tensor(net, {.bucket_bytes = 0});
  CHECK(per_tensor.buckets() == std::vector<std::vector<size_t>>{{3}, {2}, {1}, {0}});
  DataParallel fused(net);
  CHECK(fused.buckets() == std::vector<std::vector<size_t>>{{3, 2, 1, 0}});
  // fc2 (24 floats + 3) in one bucket of 128 bytes, fc1.bias (8) and fc1.weight (48) alone
  DataParallel mid(net, {.bucket_bytes = 128});
  CHECK(mid.buckets() == std::vector<std::vector<size_t>>{{3, 2}, {1}, {0}});
}

TEST_CASE("no_sync accumulates locally; the next backward reduces the sum") {
  const int64_t b = 2;  // rows per rank per micro-batch
  manual_seed(11);
  Tensor xa = Tensor::randn({b * N(), 6}), ya = Tensor::randn({b * N(), 3});
  Tensor xb = Tensor::randn({b * N(), 6}), yb = Tensor::randn({b * N(), 3});
  manual_seed(12);
  Mlp net, local, ref;
  local.load_state_dict(net.state_dict());
  ref.load_state_dict(net.state_dict());
  nn::MSELoss mse;
  DataParallel dp(net, {.bucket_bytes = 100});

  {
    auto guard = dp.no_sync();
    mse(dp(shard(xa)), shard(ya)).backward();
  }
  CHECK(dp.stats().reductions == 0);
  mse(local(shard(xa)), shard(ya)).backward();  // this rank's own gradient, bit for bit
  CHECK(max_rel_diff(grads_of(net.parameters()), grads_of(local.parameters())) == 0.0);
  if (N() > 1) CHECK_FALSE(same_on_every_rank(grads_of(net.parameters())));

  mse(dp(shard(xb)), shard(yb)).backward();  // outside the guard: reduces gA + gB
  CHECK(dp.stats().reductions == (N() > 1 ? 1 : 0));
  CHECK(same_on_every_rank(grads_of(net.parameters())));

  // the reference: the gradient of mean(A) + mean(B) over the global micro-batches
  (mse(ref(xa), ya) + mse(ref(xb), yb)).backward();
  double diff = max_rel_diff(grads_of(net.parameters()), grads_of(ref.parameters()));
  MESSAGE(N(), " ranks, no_sync then sync: max relative gradient difference ", diff);
  CHECK(diff <= 1e-5);

  optim::SGD opt(net.trainable_params(), 0.1), ref_opt(ref.trainable_params(), 0.1);
  opt.step();
  ref_opt.step();
  CHECK(max_rel_diff(net.parameters(), ref.parameters()) <= 1e-5);
}

TEST_CASE("two backwards without zero_grad: the second adds to the reduced gradient") {
  // After a reduction the gradients live in DataParallel's bucket buffers; a
  // backward without zero_grad() accumulates there and reduces again:
  // (mean(gA) + gB_r) summed over ranks / N = mean(gA) + mean(gB), the
  // gradient of mean(A) + mean(B) on one model.
  const int64_t b = 2;
  manual_seed(13);
  Tensor xa = Tensor::randn({b * N(), 6}), ya = Tensor::randn({b * N(), 3});
  Tensor xb = Tensor::randn({b * N(), 6}), yb = Tensor::randn({b * N(), 3});
  manual_seed(14);
  Mlp net, ref;
  ref.load_state_dict(net.state_dict());
  nn::MSELoss mse;
  DataParallel dp(net, {.bucket_bytes = 100});
  mse(dp(shard(xa)), shard(ya)).backward();
  mse(dp(shard(xb)), shard(yb)).backward();
  CHECK(dp.stats().reductions == (N() > 1 ? 2 : 0));
  CHECK(same_on_every_rank(grads_of(net.parameters())));
  (mse(ref(xa), ya) + mse(ref(xb), yb)).backward();
  double diff = max_rel_diff(grads_of(net.parameters()), grads_of(ref.parameters()));
  MESSAGE(N(), " ranks, two reduced backwards: max relative gradient difference ", diff);
  CHECK(diff <= 1e-5);
}

TEST_CASE("apply_collective_grads after an automatic backward throws") {
  manual_seed(4);
  Mlp net;
  nn::MSELoss mse;
  DataParallel dp(net);
  Tensor x = Tensor::randn({2, 6}), y = Tensor::randn({2, 3});
  CHECK_THROWS_WITH_AS(dp.apply_collective_grads(),
                       doctest::Contains("needs loss = dp.scale_loss(loss)"), Error);
  mse(dp(x), y).backward();  // automatic: already averaged
  std::vector<float> before = net.fc1.weight.grad().to_float_vector();
  CHECK_THROWS_WITH_AS(dp.apply_collective_grads(), doctest::Contains("reduced twice"), Error);
  CHECK(net.fc1.weight.grad().to_float_vector() == before);  // and nothing was reduced again
  // the explicit style still works afterwards
  net.zero_grad();
  dp.scale_loss(mse(dp(x), y)).backward();
  CHECK_NOTHROW(dp.apply_collective_grads());
}

TEST_CASE("one rank: automatic style leaves the gradients unchanged") {
  manual_seed(5);
  Mlp net, ref;
  ref.load_state_dict(net.state_dict());
  nn::MSELoss mse;
  DataParallel dp(net, {.group = std::make_shared<parallel::backend::LocalCommunicator>()});
  CHECK(dp.nranks() == 1);
  Tensor x = Tensor::randn({4, 6}), y = Tensor::randn({4, 3});
  mse(dp(x), y).backward();
  mse(ref(x), y).backward();
  CHECK(max_rel_diff(grads_of(net.parameters()), grads_of(ref.parameters())) == 0.0);
  CHECK(dp.stats().reductions == 0);
  CHECK(dp.stats().hooks == 4);
}

TEST_CASE("a parameter backward never reaches counts as zeros") {
  manual_seed(6);
  Mlp net;
  Tensor unused = net.register_parameter("unused", Tensor::ones({3}));
  nn::MSELoss mse;
  DataParallel dp(net);
  mse(dp(Tensor::randn({2, 6})), Tensor::randn({2, 3})).backward();
  if (N() == 1)
    CHECK_FALSE(unused.grad().defined());
  else
    CHECK(unused.grad().to_float_vector() == std::vector<float>(3, 0.0f));
  CHECK(net.fc1.weight.grad().defined());
}

TEST_CASE("overlap: allreduces start while backward is still running") {
  manual_seed(8);
  Deep net(8), ref(8);  // 16 parameters, one bucket each
  ref.load_state_dict(net.state_dict());
  nn::MSELoss mse;
  DataParallel dp(net, {.bucket_bytes = 0});
  REQUIRE(dp.buckets().size() == 16);

  // Counts backward nodes that begin after the first allreduce has started.
  int nodes = 0, nodes_after_start = 0;
  set_node_observer([&](const char*, bool begin) {
    if (!begin) return;
    ++nodes;
    if (dp.stats().buckets_started_in_hooks > 0) ++nodes_after_start;
  });
  manual_seed(9);
  Tensor x = Tensor::randn({kBatch, 6}), y = Tensor::randn({kBatch, 3});
  mse(dp(shard(x)), shard(y)).backward();
  set_node_observer(nullptr);

  const auto& s = dp.stats();
  MESSAGE(N(), " ranks: hooks ", s.hooks, ", buckets started in hooks ", s.buckets_started_in_hooks,
          ", at the end ", s.buckets_started_at_end, ", hooks after the first start ",
          s.hooks_after_first_start, ", backward nodes after the first start ", nodes_after_start,
          " of ", nodes);
  CHECK(s.hooks == 16);
  if (N() > 1) {
    CHECK(s.buckets_started_in_hooks + s.buckets_started_at_end == 16);
    CHECK(s.buckets_started_in_hooks >= 1);
    CHECK(s.hooks_after_first_start >= 1);  // a bucket started before the last hook fired
    CHECK(nodes_after_start >= 1);          // and backward computed after it started
  }
  mse(ref(x), y).backward();
  CHECK(max_rel_diff(grads_of(net.parameters()), grads_of(ref.parameters())) <= 1e-5);
}

TEST_CASE("a group: DataParallel over its members; other ranks get an error") {
  std::vector<int> evens;
  for (int i = 0; i < N(); i += 2) evens.push_back(i);
  auto group = parallel::new_group(evens);
  manual_seed(10);
  Mlp net;
  if (R() % 2 == 1) {
    CHECK_THROWS_WITH_AS((DataParallel{net, {.group = group}}), doctest::Contains("not a member"),
                         Error);
    return;
  }
  DataParallel dp(net, {.group = group});
  CHECK(dp.nranks() == int(evens.size()));
  nn::MSELoss mse;
  manual_seed(100 + R());
  mse(dp(Tensor::randn({2, 6})), Tensor::randn({2, 3})).backward();
  CHECK(dp.stats().reductions == (evens.size() > 1 ? 1 : 0));
}
