// SyncBatchNorm under 1, 2 and 4 ranks, and DataParallel's buffer broadcast.
//
// The central property: N ranks, each normalizing its B/N rows of one global
// batch, give the outputs, input gradients, (summed) weight and bias gradients
// and running statistics of one SyncBatchNorm on a one-rank group taking the
// whole batch, to 1e-6 relative: only the order of the float sums differs.
// The reference runs in the same process on a LocalCommunicator.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "nets.h"
#include "framework/ops.h"
#include "framework/random.h"
#include "nn/conv.h"
#include "nn/dense.h"
#include "nn/loss.h"
#include "nn/norm.h"
#include "optim/sgd.h"
#include "parallel/backend/local.h"
#include "parallel/data_parallel.h"
#include "parallel/sync_batch_norm.h"

using namespace minidl;
using namespace minidl::testing;
using parallel::SyncBatchNorm;

namespace {

constexpr int64_t kBatch = 8;  // divisible by 1, 2 and 4

// This rank's rows [r B/N, (r+1) B/N) of a global batch.
Tensor shard(const Tensor& global) {
  const int64_t b = global.size(0) / N();
  return global.slice(R() * b, (R() + 1) * b);
}

std::shared_ptr<parallel::Communicator> one_rank() {
  return std::make_shared<parallel::backend::LocalCommunicator>();
}

void set_affine(nn::BatchNorm& bn) {
  bn.weight.copy_(Tensor::of({1.5, -0.5, 0.8}));
  bn.bias.copy_(Tensor::of({0.1, 0.2, -0.3}));
}

}  // namespace

TEST_CASE("SyncBatchNorm: N ranks with batch B/N equal one rank with batch B") {
  SyncBatchNorm ref(3, {}, one_rank()), bn(3);
  set_affine(ref);
  set_affine(bn);
  for (int step = 0; step < 2; ++step) {  // two steps: the running estimates move twice
    manual_seed(100 + step);
    Tensor x = Tensor::randn({kBatch, 3, 4, 5}) * 1.5 + 0.5;
    Tensor proj = Tensor::randn({kBatch, 3, 4, 5});  // loss = sum(y * proj)
    Tensor x_ref = x.detach().clone().requires_grad_();
    Tensor y_ref = ref(x_ref);
    (y_ref * proj).sum().backward();

    Tensor xs = shard(x).detach().clone().requires_grad_();
    Tensor y = bn(xs);
    (y * shard(proj)).sum().backward();
    // The loss is the sum of every rank's loss: its parameter gradients are the sums.
    Tensor gw = bn.weight.grad().clone(), gb = bn.bias.grad().clone();
    parallel::world().allreduce(gw);
    parallel::world().allreduce(gb);

    const double d_out = max_rel_diff({y}, {shard(y_ref)});
    const double d_in = max_rel_diff({xs.grad()}, {shard(x_ref.grad())});
    const double d_param = max_rel_diff({gw, gb}, {ref.weight.grad(), ref.bias.grad()});
    const double d_stats = max_rel_diff({bn.running_mean, bn.running_var},
                                        {ref.running_mean, ref.running_var});
    MESSAGE(N(), " ranks, step ", step, ": relative differences: output ", d_out,
            ", input grad ", d_in, ", weight/bias grad ", d_param, ", running stats ", d_stats);
    CHECK(d_out <= 1e-6);
    CHECK(d_in <= 1e-6);
    CHECK(d_param <= 1e-6);
    CHECK(d_stats <= 1e-6);
    CHECK(bn.num_batches_tracked.item() == step + 1);
    ref.zero_grad();
    bn.zero_grad();
  }
  CHECK(same_on_every_rank({bn.running_mean, bn.running_var}));

  bn.eval();  // evaluation: the running estimates, no communication, row by row
  ref.eval();
  Tensor x = Tensor::randn({kBatch, 3, 2, 2});
  CHECK(max_rel_diff({bn(shard(x))}, {shard(ref(x))}) <= 1e-6);
}

TEST_CASE("SyncBatchNorm on one rank equals BatchNorm2d up to float rounding") {
  manual_seed(5);
  Tensor x = Tensor::randn({6, 3, 3, 3}) + 0.3;
  SyncBatchNorm sync(3, {}, one_rank());
  nn::BatchNorm2d plain(3);
  set_affine(sync);
  set_affine(plain);
  CHECK(max_rel_diff({sync(x)}, {plain(x)}) <= 1e-5);
  CHECK(max_rel_diff({sync.running_var}, {plain.running_var}) <= 1e-5);
  CHECK(sync.state_dict().size() == plain.state_dict().size());
}

namespace {
// x [B, 2, 6, 6] -> conv 3x3 [B, 4, 4, 4] -> SyncBatchNorm -> relu -> fc [B, 3]
struct BnNet : nn::Cell {
  nn::Conv2d conv{2, 4, 3};
  SyncBatchNorm bn;
  nn::Dense fc{64, 3};
  explicit BnNet(std::shared_ptr<parallel::Communicator> group) : bn(4, {}, std::move(group)) {
    register_cells({{"conv", conv}, {"bn", bn}, {"fc", fc}});
  }
  Tensor forward(const Tensor& x) override { return fc(relu(bn(conv(x))).flatten(1)); }
};
}  // namespace

TEST_CASE("SyncBatchNorm under DataParallel trains like one rank on the full batch") {
  manual_seed(9);
  BnNet ref(one_rank()), net(nullptr);
  net.load_state_dict(ref.state_dict());
  parallel::DataParallel dp(net);
  optim::SGD ref_opt(ref.trainable_params(), /*lr=*/0.1), opt(dp.trainable_params(), /*lr=*/0.1);
  nn::CrossEntropyLoss ce;
  for (int step = 0; step < 3; ++step) {
    Tensor x = Tensor::randn({kBatch, 2, 6, 6});
    Tensor labels = Tensor::randint(0, 3, {kBatch});
    ce(ref(x), labels).backward();
    ref_opt.step();
    ref_opt.zero_grad();
    ce(dp(shard(x)), shard(labels)).backward();  // mean loss per rank; DataParallel averages
    opt.step();
    opt.zero_grad();
  }
  const double d_params = max_rel_diff(net.parameters(), ref.parameters());
  const double d_stats = max_rel_diff({net.bn.running_mean, net.bn.running_var},
                                      {ref.bn.running_mean, ref.bn.running_var});
  MESSAGE(N(), " ranks, 3 SGD steps: relative difference parameters ", d_params,
          ", running stats ", d_stats);
  CHECK(d_params <= 1e-5);
  CHECK(d_stats <= 1e-6);
  CHECK(same_on_every_rank(net.parameters()));
}

TEST_CASE("DataParallel broadcasts rank 0's buffers at construction") {
  nn::BatchNorm2d bn(3);
  bn.running_mean.fill_(R() + 1.0);  // differs on every rank
  bn.num_batches_tracked.fill_(10 * R() + 7);
  parallel::DataParallel dp(bn);
  CHECK(bn.running_mean.to_float_vector() == std::vector<float>{1, 1, 1});
  CHECK(bn.num_batches_tracked.item() == 7);
  CHECK(same_on_every_rank({bn.running_mean, bn.running_var}));
}
