// What gradient accumulation costs and saves: the tutorial's MLP (784-512-512-10,
// SGD lr 0.01, cross entropy, synthetic data) trained on the same total batch
// B either whole or as GradAccumulation(net, micro) in micro batches of B / micro.
//
//   bench_grad_accumulation [--batches 128,256,1024] [--micro 4] [--steps N] [--warmup W]
//                           [--threads T]
//
// Per batch and mode: samples/s (the median of about ten chunks of steps), and
// the peak bytes of tensor storage that one forward and backward added
// (memory_stats). Both modes hold the gradients (2.55 MB here); accumulating
// into them also holds, per parameter, the incoming gradient and the new sum
// for a moment (autograd adds out of place). So this small-activation MLP
// saves memory only from batches of about 512 up; the activations shrink by
// micro, the gradients do not.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "../examples/models.h"
#include "bench_common.h"

using namespace minidl;

namespace {

struct Figures {
  double samples_per_s;
  int64_t peak_bytes;  // added during one forward_backward
};

// Trains `net` through `step` (micro_size 1: the plain step) and measures it.
Figures measure(example::MLP& net, int64_t micro_size, const Tensor& x, const Tensor& labels,
                long warmup, long steps) {
  optim::SGD opt(net.trainable_params(), /*lr=*/0.01);
  nn::CrossEntropyLoss loss_fn;
  parallel::GradAccumulation ga(net, micro_size);
  auto forward_backward = [&] {
    if (micro_size == 1)
      loss_fn(net(x), labels).backward();
    else
      ga.forward_backward(x, labels, loss_fn);
  };
  auto step = [&] {
    opt.zero_grad();
    forward_backward();
    opt.step();
  };
  for (long i = 0; i < warmup; ++i) step();

  opt.zero_grad();
  const int64_t before = memory_stats().current_bytes;
  reset_peak_memory();
  forward_backward();
  const int64_t peak = memory_stats().peak_bytes - before;

  const long chunk = std::max(1L, steps / 10);
  std::vector<double> rates;
  for (long done = 0; done < steps; done += chunk) {
    const long n = std::min(chunk, steps - done);
    const auto t0 = bench::Clock::now();
    for (long i = 0; i < n; ++i) step();
    rates.push_back(n * static_cast<double>(x.size(0)) / bench::seconds_since(t0));
  }
  return {bench::median(rates), peak};
}

}  // namespace

int main(int argc, char** argv) {
  bench::Flags flags(argc, argv,
                     {{"batches", "128,256,1024"},
                      {"micro", "4"},
                      {"steps", "100"},
                      {"warmup", "5"},
                      {"threads", "1"}},
                     "[--batches 128,256,1024] [--micro M] [--steps N] [--warmup W] [--threads T]");
  const long micro = flags.integer("micro"), steps = flags.integer("steps");
  const long warmup = flags.integer("warmup"), threads = flags.integer("threads");
  std::vector<long> batches;
  std::stringstream list(flags.str("batches"));
  for (std::string item; std::getline(list, item, ',');) batches.push_back(std::atol(item.c_str()));
  if (micro < 2 || steps < 1 || threads < 1 || batches.empty() ||
      *std::min_element(batches.begin(), batches.end()) < micro) {
    std::fprintf(stderr,
                 "bench_grad_accumulation: expected --micro >= 2, positive --steps and "
                 "--threads, and batches of at least --micro samples\n");
    return 2;
  }
  set_num_threads(static_cast<int>(threads));
  std::printf("# minidl MLP 784-512-512-10, SGD, steps=%ld threads=%ld\n", steps, threads);
  bench::print_load_note();
  example::MLP shapes;
  int64_t grad_bytes = 0;
  for (const Tensor& p : shapes.parameters()) grad_bytes += p.nbytes();
  std::printf("# peak_MB: bytes one forward and backward added, the gradients' %.2f MB included\n",
              grad_bytes / 1048576.0);
  std::printf("%-6s %-22s %12s %10s\n", "batch", "mode", "samples/s", "peak_MB");
  for (long batch : batches) {
    manual_seed(0);
    Tensor x = Tensor::randn({batch, 1, 28, 28});
    Tensor labels = Tensor::randint(0, 10, {batch});
    for (long m : {1L, micro}) {
      manual_seed(0);
      example::MLP net;
      Figures f = measure(net, m, x, labels, warmup, steps);
      const std::string mode =
          m == 1 ? "whole batch" : "GradAccumulation(" + std::to_string(m) + ")";
      std::printf("%-6ld %-22s %12.1f %10.2f\n", batch, mode.c_str(), f.samples_per_s,
                  f.peak_bytes / 1048576.0);
    }
  }
}
