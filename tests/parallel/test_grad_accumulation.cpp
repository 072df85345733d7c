// GradAccumulation alone and around DataParallel, under 1 and 2 ranks.
//
// The central property: GradAccumulation(net, m) taking a batch B in m micro
// batches ends K optimizer steps with the same parameters as the plain
// network taking B at once, whether B divides by m or not; around a
// DataParallel, with each rank taking its B rows of a global batch of N B, it
// matches one model on the global batch and communicates once per batch.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nets.h"
#include "data/dataset.h"
#include "framework/autograd.h"
#include "framework/ops.h"
#include "framework/random.h"
#include "nn/dense.h"
#include "nn/loss.h"
#include "optim/sgd.h"
#include "parallel/data_parallel.h"
#include "parallel/grad_accumulation.h"
#include "parallel/init.h"
#include "parallel/train/model.h"

using namespace minidl;
using namespace minidl::testing;
using parallel::DataParallel;
using parallel::GradAccumulation;

namespace {



std::vector<Tensor> grads_of(const nn::Cell& net) {
  std::vector<Tensor> g;
  for (const Tensor& p : net.parameters()) g.push_back(p.grad());
  return g;
}

std::vector<Tensor> scaled(const std::vector<Tensor>& ts, double s) {
  std::vector<Tensor> out;
  NoGradGuard no_grad;
  for (const Tensor& t : ts) out.push_back(t * s);
  return out;
}

constexpr int kSteps = 3;

using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;
std::unique_ptr<optim::Optimizer> momentum(std::vector<Tensor> params) {
  return std::make_unique<optim::Momentum>(std::move(params), /*lr=*/0.1, /*momentum=*/0.9);
}
std::unique_ptr<optim::Optimizer> sgd(std::vector<Tensor> params) {
  return std::make_unique<optim::SGD>(std::move(params), /*lr=*/0.1);
}

struct Result {
  double param_diff = 0, loss_diff = 0, logits_diff = 0;
  int64_t reductions = 0;  // DataParallel's, after the K steps
};

// K steps of GradAccumulation(net or DataParallel(net), m) on this rank's
// `batch` rows against K steps of one plain model on the global batch (batch
// rows, or N * batch with data_parallel). Each step also compares the reported
// loss and logits with the reference's on the same rows, and checks that a
// step communicates at most once.
Result run_equivalence(int64_t batch, int64_t m, const MakeOpt& make_opt, bool data_parallel) {
  const int64_t global = data_parallel ? batch * N() : batch;
  manual_seed(123);
  std::vector<Tensor> xs, ys;
  for (int k = 0; k < kSteps; ++k) {
    xs.push_back(Tensor::randn({global, 6}));
    ys.push_back(Tensor::randn({global, 3}));
  }
  auto mine = [&](const Tensor& t) {
    return data_parallel ? t.slice(R() * batch, (R() + 1) * batch) : t;
  };
  manual_seed(7);
  Mlp ref, net;
  net.load_state_dict(ref.state_dict());
  nn::MSELoss mse;
  auto ref_opt = make_opt(ref.trainable_params());
  auto opt = make_opt(net.trainable_params());
  std::unique_ptr<DataParallel> dp;
  if (data_parallel)
    dp = std::make_unique<DataParallel>(net, parallel::DataParallelOptions{.bucket_bytes = 64});
  GradAccumulation ga(dp ? static_cast<nn::Cell&>(*dp) : net, m);

  Result r;
  for (int k = 0; k < kSteps; ++k) {
    Tensor ref_logits, ref_loss;
    {
      NoGradGuard no_grad;  // the reference on this rank's rows, before the update
      ref_logits = ref(mine(xs[k]));
      ref_loss = mse(ref_logits, mine(ys[k]));
    }
    opt->zero_grad();
    const int64_t before = dp ? dp->stats().reductions : 0;
    StepOutput out = ga.forward_backward(mine(xs[k]), mine(ys[k]), mse);
    if (dp) CHECK(dp->stats().reductions - before == (N() > 1 ? 1 : 0));  // once per batch
    CHECK_FALSE(out.loss.requires_grad());
    CHECK(out.logits.shape() == Shape{batch, 3});
    r.loss_diff =
        std::max(r.loss_diff, std::abs(out.loss.item() - ref_loss.item()) / ref_loss.item());
    r.logits_diff = std::max(r.logits_diff, max_rel_diff({out.logits}, {ref_logits}));
    opt->step();

    mse(ref(xs[k]), ys[k]).backward();
    ref_opt->step();
    ref_opt->zero_grad();
  }
  CHECK(same_on_every_rank(net.parameters()));
  r.param_diff = max_rel_diff(net.parameters(), ref.parameters());
  r.reductions = dp ? dp->stats().reductions : 0;
  return r;
}

struct Case {
  int64_t batch, m;
};
const Case kCases[] = {{8, 2}, {8, 4}, {10, 4}};  // 10 / 4: slices of 3, 3, 2, 2

}  // namespace

TEST_CASE("equivalence: GradAccumulation equals the plain network on the whole batch") {
  for (const Case& c : kCases)
    for (bool use_momentum : {false, true}) {
      CAPTURE(c.batch);
      CAPTURE(c.m);
      CAPTURE(use_momentum);
      Result r =
          run_equivalence(c.batch, c.m, use_momentum ? MakeOpt(momentum) : MakeOpt(sgd), false);
      MESSAGE("B=", c.batch, " m=", c.m, std::string(use_momentum ? " Momentum" : " SGD"),
              ": parameters ", r.param_diff, ", loss ", r.loss_diff, ", logits ", r.logits_diff,
              " (max relative diff)");
      CHECK(r.param_diff <= 1e-5);
      CHECK(r.loss_diff <= 1e-5);
      CHECK(r.logits_diff <= 1e-5);
    }
}

TEST_CASE(
    "equivalence: GradAccumulation(DataParallel) on shards equals one model on the global "
    "batch, communicating once per batch") {
  for (const Case& c : kCases)
    for (bool use_momentum : {false, true}) {
      CAPTURE(c.batch);
      CAPTURE(c.m);
      CAPTURE(use_momentum);
      Result r =
          run_equivalence(c.batch, c.m, use_momentum ? MakeOpt(momentum) : MakeOpt(sgd), true);
      MESSAGE(N(), " ranks, ", c.batch, " rows each, m=", c.m,
              std::string(use_momentum ? " Momentum" : " SGD"), ": parameters ", r.param_diff,
              " (max relative diff), ", r.reductions, " reductions in ", kSteps, " steps");
      CHECK(r.param_diff <= 1e-5);
      CHECK(r.loss_diff <= 1e-5);
      CHECK(r.reductions == (N() > 1 ? kSteps : 0));
    }
}

TEST_CASE("a short batch around DataParallel: one sample per slice, communicating once") {
  // 3 rows per rank with micro_size 4 (an epoch's short last batch): 3 slices,
  // the ranks reduce once (on the last), and the result is the global batch's.
  Result r = run_equivalence(/*batch=*/3, /*m=*/4, MakeOpt(sgd), /*data_parallel=*/true);
  MESSAGE(N(), " ranks, 3 rows each, m=4: parameters ", r.param_diff, " (max relative diff)");
  CHECK(r.param_diff <= 1e-5);
  CHECK(r.loss_diff <= 1e-5);
  CHECK(r.reductions == (N() > 1 ? kSteps : 0));
}

TEST_CASE("mean mode: loss, logits and gradients of an uneven split are the whole batch's") {
  manual_seed(5);
  Tensor x = Tensor::randn({10, 6});
  Tensor labels = Tensor::randint(0, 3, {10});
  Mlp ref, net;
  net.load_state_dict(ref.state_dict());
  GradAccumulation ga(net, /*micro_size=*/4);

  SUBCASE("cross entropy, mean reduction") {
    nn::CrossEntropyLoss ce;
    StepOutput out = ga.forward_backward(x, labels, ce);
    Tensor logits = ref(x);
    Tensor loss = ce(logits, labels);
    loss.backward();
    CHECK(out.loss.item() == doctest::Approx(loss.item()).epsilon(1e-6));
    CHECK(max_rel_diff({out.logits}, {logits}) <= 1e-6);
    CHECK(max_rel_diff(grads_of(net), grads_of(ref)) <= 1e-5);
  }
  SUBCASE("cross entropy, sum reduction: weighted 1, still the whole batch's") {
    nn::CrossEntropyLoss ce(nn::Reduction::Sum);
    StepOutput out = ga.forward_backward(x, labels, ce);
    Tensor loss = ce(ref(x), labels);
    loss.backward();
    CHECK(out.loss.item() == doctest::Approx(loss.item()).epsilon(1e-6));
    CHECK(max_rel_diff(grads_of(net), grads_of(ref)) <= 1e-5);
  }
  SUBCASE("micro_size 1 is the plain step") {
    GradAccumulation one(net, 1);
    nn::CrossEntropyLoss ce;
    StepOutput out = one.forward_backward(x, labels, ce);
    Tensor loss = ce(ref(x), labels);
    loss.backward();
    CHECK(out.loss.item() == doctest::Approx(loss.item()).epsilon(1e-6));
    CHECK(max_rel_diff(grads_of(net), grads_of(ref)) <= 1e-6);
  }
}

TEST_CASE(
    "sum mode (MindSpore's): the loss is the sum of the micro losses, the gradients its gradient") {
  manual_seed(6);
  nn::MSELoss mse;
  for (const Case& c : kCases) {
    CAPTURE(c.batch);
    CAPTURE(c.m);
    Tensor x = Tensor::randn({c.batch, 6}), y = Tensor::randn({c.batch, 3});
    Mlp ref, net;
    net.load_state_dict(ref.state_dict());
    GradAccumulation ga(net, c.m, {.sum_loss = true});
    CHECK(ga.options().sum_loss);
    StepOutput out = ga.forward_backward(x, y, mse);

    // The reference: each micro loss on its own rows, summed, one backward.
    std::vector<int64_t> rows;
    Tensor sum;
    for (int64_t i = 0, begin = 0; i < c.m; ++i) {
      const int64_t end = begin + c.batch / c.m + (i < c.batch % c.m);
      rows.push_back(end - begin);
      Tensor l = mse(ref(x.slice(begin, end)), y.slice(begin, end));
      sum = sum.defined() ? sum + l : l;
      begin = end;
    }
    if (c.batch % c.m) CHECK(rows == std::vector<int64_t>{3, 3, 2, 2});
    sum.backward();
    MESSAGE("B=", c.batch, " m=", c.m, ": sum of micro losses ", out.loss.item());
    CHECK(out.loss.item() == doctest::Approx(sum.item()).epsilon(1e-6));
    CHECK(max_rel_diff(grads_of(net), grads_of(ref)) <= 1e-5);
    if (c.batch % c.m == 0) {  // even: m times the whole batch's loss and gradient
      Mlp whole;
      whole.load_state_dict(ref.state_dict());
      Tensor full = mse(whole(x), y);
      full.backward();
      CHECK(out.loss.item() == doctest::Approx(c.m * full.item()).epsilon(1e-5));
      CHECK(max_rel_diff(grads_of(net), scaled(grads_of(whole), double(c.m))) <= 1e-5);
    }
  }
}

TEST_CASE("errors: micro_size below 1, an empty batch, mismatched labels") {
  Mlp net;
  CHECK_THROWS_WITH_AS(GradAccumulation(net, 0), "GradAccumulation: micro_size must be >= 1, got 0",
                       Error);
  CHECK_THROWS_WITH_AS(GradAccumulation(net, -1),
                       "GradAccumulation: micro_size must be >= 1, got -1", Error);
  GradAccumulation ga(net, 4);
  nn::MSELoss mse;
  CHECK_THROWS_WITH_AS(ga.forward_backward(Tensor::randn({0, 6}), Tensor::randn({0, 3}), mse),
                       "GradAccumulation: an empty batch (data [0, 6]) has no micro batches to run",
                       Error);
  CHECK_FALSE(net.fc1.weight.grad().defined());  // nothing ran
  CHECK_THROWS_WITH_AS(ga.forward_backward(Tensor::randn({8, 6}), Tensor::randn({7, 3}), mse),
                       doctest::Contains("differ in dim 0"), Error);
  nn::MSELoss none(nn::Reduction::None);
  CHECK_THROWS_WITH_AS(ga.forward_backward(Tensor::randn({8, 6}), Tensor::randn({8, 3}), none),
                       doctest::Contains("reduction \"none\""), Error);
  // A batch of exactly micro_size samples is fine: slices of one row.
  StepOutput out = ga.forward_backward(Tensor::randn({4, 6}), Tensor::randn({4, 3}), mse);
  CHECK(out.logits.shape() == Shape{4, 3});
}

TEST_CASE("names: the network is the child \"network\"; forward is the network's") {
  manual_seed(2);
  Mlp net;
  GradAccumulation ga(net, 2);
  auto names = ga.named_parameters();
  CHECK(names.contains("network.fc1.weight"));
  CHECK(names.size() == net.named_parameters().size());
  CHECK(&ga.network() == &net);
  CHECK(ga.micro_size() == 2);
  Tensor x = Tensor::randn({5, 6});
  CHECK(max_rel_diff({ga(x)}, {net(x)}) == 0.0);
}

namespace {
// Records the batch size of every forward call.
struct Probe : nn::Cell {
  Mlp& net;
  std::vector<int64_t> sizes;
  explicit Probe(Mlp& n) : net(n) { register_cell("net", n); }
  Tensor forward(const Tensor& x) override {
    sizes.push_back(x.size(0));
    return net(x);
  }
};
struct Losses : Callback {
  std::vector<double> values;
  void on_step_end(const StepEnd& s) override { values.push_back(s.loss); }
};
}  // namespace

TEST_CASE("a short batch (fewer samples than micro_size) runs one sample per micro batch") {
  // An epoch's last batch: 8,000 samples in batches of 7 end with 6, fewer
  // than micro_size 7. It used to be refused after the whole epoch had trained.
  manual_seed(12);
  Tensor x = Tensor::randn({3, 6}), labels = Tensor::randint(0, 3, {3});
  nn::CrossEntropyLoss ce;
  Mlp ref, net;
  net.load_state_dict(ref.state_dict());
  Probe probe(net);

  SUBCASE("mean mode: the whole short batch's loss and gradients") {
    GradAccumulation ga(probe, /*micro_size=*/4);
    StepOutput out = ga.forward_backward(x, labels, ce);
    CHECK(probe.sizes == std::vector<int64_t>{1, 1, 1});
    CHECK(out.logits.shape() == Shape{3, 3});
    Tensor loss = ce(ref(x), labels);
    loss.backward();
    CHECK(out.loss.item() == doctest::Approx(loss.item()).epsilon(1e-6));
    CHECK(max_rel_diff(grads_of(net), grads_of(ref)) <= 1e-5);
  }
  SUBCASE("sum mode: the sum of the three one-sample losses") {
    GradAccumulation ga(probe, /*micro_size=*/4, {.sum_loss = true});
    StepOutput out = ga.forward_backward(x, labels, ce);
    CHECK(probe.sizes == std::vector<int64_t>{1, 1, 1});
    Tensor sum = ce(ref(x), labels) * 3.0;  // mean of 3 one-sample losses, times 3
    sum.backward();
    CHECK(out.loss.item() == doctest::Approx(sum.item()).epsilon(1e-6));
    CHECK(max_rel_diff(grads_of(net), grads_of(ref)) <= 1e-5);
  }
  SUBCASE("Model.train: 7 samples in batches of 3 with micro_size 3 end with a batch of 1") {
    data::Dataset ds(Tensor::randn({7, 6}), Tensor::randint(0, 3, {7}));
    GradAccumulation ga(probe, /*micro_size=*/3);
    optim::SGD opt(net.trainable_params(), 0.1), ref_opt(ref.trainable_params(), 0.1);
    CHECK(Model(ga, ce, opt).train(1, ds.batch(3)) == 3);
    CHECK(Model(ref, ce, ref_opt).train(1, ds.batch(3)) == 3);
    CHECK(probe.sizes == std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1});
    CHECK(max_rel_diff(net.parameters(), ref.parameters()) <= 1e-5);
  }
}

TEST_CASE("Model.train dispatches to forward_backward and matches plain training") {
  manual_seed(9);
  data::Dataset ds(Tensor::randn({20, 6}), Tensor::randint(0, 3, {20}));
  auto batches = ds.batch(10);  // two steps of 10: micro batches 3, 3, 2, 2
  Mlp ref, net;
  net.load_state_dict(ref.state_dict());
  Probe probe(net);
  GradAccumulation ga(probe, 4);
  nn::CrossEntropyLoss ce;
  optim::Momentum opt(net.trainable_params(), 0.1, 0.9), ref_opt(ref.trainable_params(), 0.1, 0.9);
  auto ga_losses = std::make_shared<Losses>(), ref_losses = std::make_shared<Losses>();
  CHECK(Model(ga, ce, opt).train(2, batches, {ga_losses}) == 4);
  CHECK(Model(ref, ce, ref_opt).train(2, batches, {ref_losses}) == 4);
  CHECK(probe.sizes == std::vector<int64_t>{3, 3, 2, 2, 3, 3, 2, 2, 3, 3, 2, 2, 3, 3, 2, 2});
  REQUIRE(ga_losses->values.size() == 4);
  for (size_t i = 0; i < 4; ++i)
    CHECK(ga_losses->values[i] == doctest::Approx(ref_losses->values[i]).epsilon(1e-5));
  const double diff = max_rel_diff(net.parameters(), ref.parameters());
  MESSAGE("Model.train with GradAccumulation(4): max relative parameter difference ", diff);
  CHECK(diff <= 1e-5);

  probe.sizes.clear();
  auto m = Model(ga, ce, opt).eval(batches);  // eval: forward on whole batches
  CHECK(probe.sizes == std::vector<int64_t>{10, 10});
  CHECK(m["loss"] == doctest::Approx(Model(ref, ce, ref_opt).eval(batches)["loss"]).epsilon(1e-5));
}

TEST_CASE("activation memory: micro batches of B/4 peak well below the whole batch") {
  // x [256, 16] -> fc1 [256, 4096] -> relu -> fc2 [256, 4]: activations dominate the
  // parameters (0.3 MB), so the peak follows the rows alive at once.
  constexpr int64_t kB = 256;
  manual_seed(3);
  Mlp net(/*in=*/16, /*hidden=*/4096, /*out=*/4);
  Tensor x = Tensor::randn({kB, 16}), labels = Tensor::randint(0, 4, {kB});
  nn::CrossEntropyLoss ce;
  GradAccumulation ga(net, 4);
  struct Peak {
    int64_t added, absolute;
  };
  auto peak_of = [&](const std::function<void()>& step) {
    net.zero_grad();  // both steps allocate the gradients
    const int64_t before = memory_stats().current_bytes;
    reset_peak_memory();
    step();
    const int64_t peak = memory_stats().peak_bytes;
    net.zero_grad();
    return Peak{peak - before, peak};
  };
  Peak full = peak_of([&] { ce(net(x), labels).backward(); });
  Peak micro = peak_of([&] { ga.forward_backward(x, labels, ce); });
  if (R() == 0)
    std::printf(
        "peak bytes above the start: whole batch %lld, GradAccumulation(4) %lld "
        "(%.2fx); absolute peaks %lld and %lld\n",
        (long long)full.added, (long long)micro.added, double(micro.added) / full.added,
        (long long)full.absolute, (long long)micro.absolute);
  CHECK(micro.added < 0.5 * full.added);
  CHECK(micro.absolute < 0.5 * full.absolute);
}
