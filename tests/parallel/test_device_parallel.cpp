// The data-parallel wrappers on CUDA tensors under 1, 2 and 4 ranks (and
// alone): DistributedGradReducer, DataParallel (both styles, no_sync),
// GradAccumulation, AdaSum and Model's data-parallel mode, each run twice
// from the same start, once on the CPU and once with the network on CUDA,
// and compared. Without a GPU, CUDA is the emulated device of
// tests/emulated_device.h (the CPU's kernels behind the device seam): every
// CUDA path above the kernels runs (device buckets, host staging through
// pinned memory for the MPI backend, copies back) and must give the CPU's
// bits exactly. With a real GPU the same cases run on it, within 1e-5.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "data/dataset.h"
#include "emulated_device.h"
#include "framework/random.h"
#include "nets.h"
#include "nn/loss.h"
#include "optim/sgd.h"
#include "parallel/adasum.h"
#include "parallel/data_parallel.h"
#include "parallel/grad_accumulation.h"
#include "parallel/grad_reducer.h"
#include "parallel/train/model.h"

using namespace minidl;
using testing::N;
using testing::R;

namespace {

constexpr Device kCuda = Device::CUDA;

// The emulated device is installed unless a real GPU is present.
bool emulated() {
  static const bool e = testing::emulate();
  return e;
}

// got (on CUDA) equals want (on the CPU): bit for bit on the emulated device,
// within 1e-5 (relative to want's largest value) on a real GPU.
void check_same(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("tensor " << i);
    REQUIRE(got[i].defined() == want[i].defined());
    if (!want[i].defined()) continue;
    CHECK(got[i].device() == kCuda);
    REQUIRE(got[i].shape() == want[i].shape());
    REQUIRE(got[i].dtype() == want[i].dtype());
    const Tensor g = got[i].cpu();
    if (emulated())
      CHECK(std::memcmp(g.raw_data(), want[i].raw_data(), want[i].nbytes()) == 0);
    else
      CHECK(testing::max_rel_diff({g}, {want[i]}) <= 1e-5);
  }
}

// [shape] of normal values, different on every rank and for every seed.
Tensor rank_values(const Shape& shape, uint64_t seed) {
  RandomGenerator g(seed * 1009 + static_cast<uint64_t>(R()));
  Tensor t = Tensor::empty(shape);
  for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] = static_cast<float>(g.normal());
  return t;
}

std::vector<Tensor> to_cuda(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t.defined() ? t.detach().to(kCuda) : Tensor());
  return out;
}

std::vector<Tensor> grads_of(const std::vector<Tensor>& params) {
  std::vector<Tensor> out;
  for (const Tensor& p : params) out.push_back(p.grad());
  return out;
}

// A network on `device` whose weights are those `seed` draws (on the CPU, then copied).
template <class Net, class... Args>
std::unique_ptr<Net> make_net(uint64_t seed, Device device, Args... args) {
  manual_seed(seed);
  auto net = std::make_unique<Net>(args...);
  net->to(device);
  return net;
}

#define REQUIRE_CUDA()                                   \
  if (!emulated() && !device_available(kCuda)) {         \
    MESSAGE("no CUDA device and no emulation: skipped"); \
    return;                                              \
  }

}  // namespace

TEST_CASE("device: the Communicator's Tensor collectives on CUDA equal the CPU's") {
  REQUIRE_CUDA();
  parallel::Communicator& world = parallel::world();
  const Tensor blocks = rank_values({N(), 3, 2}, 5), one = rank_values({3, 2}, 6);
  Tensor sum = one.clone(), sum_cuda = one.to(kCuda);
  world.allreduce(sum, parallel::ReduceOp::Avg);
  world.allreduce(sum_cuda, parallel::ReduceOp::Avg);
  check_same({world.reduce_scatter(blocks.to(kCuda)), world.allgather(one.to(kCuda)), sum_cuda},
             {world.reduce_scatter(blocks), world.allgather(one), sum});
}

TEST_CASE("device: DistributedGradReducer on CUDA gradients equals the CPU's") {
  REQUIRE_CUDA();
  // A float16 gradient too (widened in the bucket, cast back).
  std::vector<Tensor> params, grads;
  const std::vector<Shape> shapes = {{3, 4}, {5}, {1}, {2, 3, 2}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    params.push_back(Tensor::zeros(shapes[i]).requires_grad_());
    Tensor g = rank_values(shapes[i], i);
    grads.push_back(i == 1 ? g.to(kFloat16) : g);
  }
  std::vector<Tensor> dev_params = to_cuda(params);
  for (Tensor& p : dev_params) p.requires_grad_();
  const std::vector<Tensor> dev_grads = to_cuda(grads);

  const int64_t pinned_before = testing::Emulated::pinned_allocs;
  const std::vector<parallel::GradReducerOptions> options = {
      {}, {.mean = false}, {.degree = 3}, {.bucket_bytes = 16}, {.bucket_bytes = 0}};
  for (size_t o = 0; o < options.size(); ++o) {
    INFO("options " << o);
    parallel::DistributedGradReducer cpu(params, options[o]), dev(dev_params, options[o]);
    check_same(dev.reduce(dev_grads), cpu.reduce(grads));
    check_same(dev_grads, grads);  // the inputs are left alone
    // reduce_grads twice: the second finds float32 gradients in the buckets.
    for (int rep = 0; rep < 2; ++rep) {
      for (size_t i = 0; i < params.size(); ++i) {
        params[i].set_grad(grads[i].clone());
        dev_params[i].set_grad(dev_grads[i].clone());
      }
      cpu.reduce_grads();
      dev.reduce_grads();
      check_same(grads_of(dev_params), grads_of(params));
    }
  }
  // The MPI backend staged the device buckets through pinned host memory.
  if (emulated() && N() > 1) CHECK(testing::Emulated::pinned_allocs > pinned_before);
}

TEST_CASE("device: DataParallel on CUDA, both styles and no_sync, equals the CPU's") {
  REQUIRE_CUDA();
  for (const bool explicit_style : {false, true}) {
    INFO((explicit_style ? "explicit style" : "automatic style"));
    // Different weights on every rank: construction broadcasts rank 0's.
    auto train = [&](Device d) {
      auto net = make_net<testing::Deep>(40 + R(), d, /*depth=*/4);
      parallel::DataParallel dp(*net, {.bucket_bytes = 256});  // several buckets
      optim::Momentum opt(net->trainable_params(), /*lr=*/0.05, /*momentum=*/0.9);
      nn::MSELoss loss;
      auto pass = [&](int step) {
        Tensor l =
            loss(dp(rank_values({4, 6}, 100 + step).to(d)), rank_values({4, 3}, 200 + step).to(d));
        if (explicit_style) l = dp.scale_loss(l);
        l.backward();
      };
      std::vector<Tensor> first_grads;
      for (int step = 0; step < 3; ++step) {
        opt.zero_grad();
        if (step == 1) {  // one pass accumulated locally, then one that communicates
          auto no_sync = dp.no_sync();
          pass(10);
        }
        pass(step);
        if (explicit_style) dp.apply_collective_grads();
        if (step == 0) first_grads = grads_of(net->parameters());
        opt.step();
      }
      std::vector<Tensor> out = net->parameters();
      for (const Tensor& g : first_grads) out.push_back(g.detach().clone());
      return out;
    };
    std::vector<Tensor> want = train(Device::CPU), got = train(kCuda);
    check_same(got, want);
    CHECK(testing::same_on_every_rank(want));
  }
}

TEST_CASE("device: GradAccumulation over DataParallel on CUDA equals the CPU's") {
  REQUIRE_CUDA();
  auto train = [&](Device d) {
    auto net = make_net<testing::Mlp>(50, d);
    parallel::DataParallel dp(*net, {.bucket_bytes = 128});
    parallel::GradAccumulation ga(dp, /*micro_size=*/3);
    optim::Momentum opt(net->trainable_params(), /*lr=*/0.1, /*momentum=*/0.9);
    nn::CrossEntropyLoss loss;
    std::vector<Tensor> out;
    for (int step = 0; step < 2; ++step) {
      opt.zero_grad();
      Tensor labels = Tensor::of_ints({0, 2, 1, 1, 0, 2, 2}).to(d);
      StepOutput o = ga.forward_backward(rank_values({7, 6}, 300 + step).to(d), labels, loss);
      opt.step();
      out.push_back(o.logits);
      CHECK(o.loss.device() == Device::CPU);
      out.push_back(o.loss.to(d));  // compared on the device like the rest
    }
    for (const Tensor& p : net->parameters()) out.push_back(p);
    return out;
  };
  std::vector<Tensor> want = train(Device::CPU), got = train(kCuda);
  check_same(got, want);
}

TEST_CASE("device: AdaSum on CUDA gradients equals the CPU's") {
  REQUIRE_CUDA();
  if (N() < 2) {
    MESSAGE("AdaSum needs 2 or more ranks (a power of two): skipped with ", N());
    return;
  }
  auto train = [&](Device d) {
    auto net = make_net<testing::Mlp>(60 + R(), d);  // each rank its own weights
    optim::Momentum opt(net->trainable_params(), /*lr=*/0.05, /*momentum=*/0.9);
    parallel::AdaSumByGradWrapCell adasum(opt);
    nn::MSELoss loss;
    for (int step = 0; step < 2; ++step) {
      adasum.zero_grad();
      loss((*net)(rank_values({5, 6}, 400 + step).to(d)), rank_values({5, 3}, 500 + step).to(d))
          .backward();
      adasum.step();
    }
    // And the list form, with a float16 tensor.
    parallel::AdaSum op;
    std::vector<Tensor> out =
        op({rank_values({9}, 600).to(d), rank_values({2, 2}, 601).to(kFloat16).to(d)});
    for (const Tensor& p : net->parameters()) out.push_back(p);
    return out;
  };
  std::vector<Tensor> want = train(Device::CPU), got = train(kCuda);
  check_same(got, want);
}

TEST_CASE("device: Model's data-parallel training on CUDA equals the CPU's") {
  REQUIRE_CUDA();
  // class = the largest of 4 features
  manual_seed(9);
  Tensor x = Tensor::randn({64, 4}), y = argmax(x);
  const data::Dataset set(x, y);
  auto train = [&](Device d) {
    auto net = make_net<testing::Mlp>(70, d, /*in=*/4, /*hidden=*/16, /*out=*/4);
    nn::CrossEntropyLoss loss;
    optim::Momentum opt(net->trainable_params(), /*lr=*/0.05, /*momentum=*/0.9);
    Model model(*net, loss, opt, {.parallel = ParallelMode::DataParallel, .bucket_bytes = 256});
    model.train(2, set.batch(16 / N()));  // Model shards by rank
    std::vector<Tensor> out = net->parameters();
    const auto figures = model.eval(set.batch(8));
    out.push_back(Tensor::from_vector(
                      std::vector<float>{float(figures.at("loss")), float(figures.at("accuracy"))})
                      .to(d));
    return out;
  };
  std::vector<Tensor> want = train(Device::CPU), got = train(kCuda);
  check_same(got, want);
}
