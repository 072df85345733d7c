// bench_train_torch: libtorch's training throughput on synthetic data, the
// twin of minidl's bench_train (same flags, same output).
//
//   bench_train_torch [--model lenet|mlp] [--batch B] [--steps N] [--warmup W] [--threads T]
//
// One fixed random batch (inputs [B, 1, 28, 28] for lenet, [B, 784] for mlp;
// labels uniform in 0..9) is trained on for W untimed then N timed steps of
// Momentum SGD (lr 0.01, momentum 0.9) on cross entropy. Output: '#' comment
// lines, then `samples/s=R` (median over chunks of the timed steps) and
// `peak_rss_mb=M` (getrusage ru_maxrss).
#include <torch/torch.h>
#include <torch/version.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_common.h"

namespace {

// LeNet-5: x [B, 1, 28, 28] -> logits [B, 10]
struct LeNet5Impl : torch::nn::Module {
  torch::nn::Conv2d conv1{torch::nn::Conv2dOptions(1, 6, /*kernel_size=*/5).padding(2)};
  torch::nn::Conv2d conv2{torch::nn::Conv2dOptions(6, 16, /*kernel_size=*/5)};
  torch::nn::Linear fc1{400, 120}, fc2{120, 84}, fc3{84, 10};
  LeNet5Impl() {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1(x)), /*kernel_size=*/2);
    x = torch::max_pool2d(torch::relu(conv2(x)), /*kernel_size=*/2).flatten(1);
    return fc3(torch::relu(fc2(torch::relu(fc1(x)))));
  }
};
TORCH_MODULE(LeNet5);

// MLP 784-512-512-10: x [B, 784] -> logits [B, 10]
struct MlpImpl : torch::nn::Module {
  torch::nn::Linear fc1{784, 512}, fc2{512, 512}, fc3{512, 10};
  MlpImpl() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
  }
  torch::Tensor forward(torch::Tensor x) {
    return fc3(torch::relu(fc2(torch::relu(fc1(x)))));
  }
};
TORCH_MODULE(Mlp);

struct Result {
  double samples_per_s, first_loss, last_loss;
};

template <class Net>
Result train(Net net, const torch::Tensor& x, const torch::Tensor& labels, long warmup, long steps) {
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(/*lr=*/0.01).momentum(0.9));
  auto step = [&] {
    opt.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(net->forward(x), labels);
    loss.backward();
    opt.step();
    return loss;
  };
  Result r{0, step().template item<double>(), 0};
  for (long i = 1; i < warmup; ++i) step();
  // Timed steps in about ten chunks; the median chunk rate resists the odd
  // slow chunk on a shared machine.
  const long chunk = std::max(1L, steps / 10);
  const double batch = static_cast<double>(x.size(0));
  std::vector<double> rates;
  torch::Tensor loss;
  for (long done = 0; done < steps;) {
    const long n = std::min(chunk, steps - done);
    const auto t0 = bench::Clock::now();
    for (long i = 0; i < n; ++i) loss = step();
    rates.push_back(n * batch / bench::seconds_since(t0));
    done += n;
  }
  r.samples_per_s = bench::median(rates);
  r.last_loss = loss.defined() ? loss.item<double>() : r.first_loss;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  bench::reexec_with_env_default(argv, "OPENBLAS_NUM_THREADS", "1");
  bench::Flags flags(argc, argv,
                     {{"model", "lenet"}, {"batch", "64"}, {"steps", "100"}, {"warmup", "10"},
                      {"threads", "1"}},
                     "[--model lenet|mlp] [--batch B] [--steps N] [--warmup W] [--threads T]");
  const std::string model = flags.str("model");
  const long batch = flags.integer("batch"), steps = flags.integer("steps");
  const long warmup = flags.integer("warmup"), threads = flags.integer("threads");
  if (model != "lenet" && model != "mlp") {
    std::fprintf(stderr, "--model: expected lenet or mlp, got '%s'\n", model.c_str());
    return 2;
  }
  if (batch < 1 || steps < 1 || warmup < 1 || threads < 1) {
    std::fprintf(stderr, "--batch, --steps, --warmup and --threads must be >= 1, got %ld, %ld, "
                 "%ld, %ld\n", batch, steps, warmup, threads);
    return 2;
  }
  torch::manual_seed(0);
  torch::set_num_threads(static_cast<int>(threads));
  const char* blas_threads = std::getenv("OPENBLAS_NUM_THREADS");
  std::printf("# libtorch %s model=%s batch=%ld steps=%ld warmup=%ld threads=%ld "
              "OPENBLAS_NUM_THREADS=%s\n", TORCH_VERSION, model.c_str(), batch, steps, warmup,
              threads, blas_threads ? blas_threads : "unset");
  bench::print_load_note();

  const auto labels = torch::randint(0, 10, {batch}, torch::kLong);
  const Result r = model == "lenet"
                       ? train(LeNet5(), torch::randn({batch, 1, 28, 28}), labels, warmup, steps)
                       : train(Mlp(), torch::randn({batch, 784}), labels, warmup, steps);
  std::printf("# loss first=%.4f last=%.4f\n", r.first_loss, r.last_loss);
  std::printf("samples/s=%.1f\n", r.samples_per_s);
  std::printf("peak_rss_mb=%.1f\n", bench::peak_rss_mb());
  return 0;
}
