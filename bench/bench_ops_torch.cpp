// bench_ops_torch: libtorch's twin of bench_ops. Prints one `name GFLOP/s`
// line per case (lines starting with '#' are comments), which bench_ops parses.
//
//   bench_ops_torch [--threads T] [--min-time S] [--only PREFIX]
//
// Best configuration on this machine: torch::set_num_threads(T) and OpenBLAS
// at one thread (OPENBLAS_NUM_THREADS=1, set here by re-executing when unset;
// see bench/README.md).
#include <torch/torch.h>
#include <torch/version.h>

#include <cstdio>
#include <cstdlib>

#include "bench_common.h"

namespace {

// Square matmul: a [n, n] x b [n, n], forward only.
double matmul_gflops(int n, double min_time) {
  torch::NoGradGuard no_grad;
  auto a = torch::randn({n, n}), b = torch::randn({n, n});
  const double s = bench::median_seconds([] {}, [&] { auto c = torch::mm(a, b); }, 21, min_time);
  return 2.0 * n * n * n / s * 1e-9;
}

double linear_gflops(const bench::LinearCase& c, double min_time) {
  torch::NoGradGuard no_grad;
  auto x = torch::randn({c.N, c.IN}), w = torch::randn({c.OUT, c.IN}), b = torch::randn({c.OUT});
  const double s =
      bench::median_seconds([] {}, [&] { auto y = torch::linear(x, w, b); }, 21, min_time);
  return c.flops() / s * 1e-9;
}

// conv2d with bias, forward only (no graph) or backward only (input, weight
// and bias gradients; the forward that builds the graph is not timed).
double conv_gflops(const bench::ConvCase& c, bool backward, double min_time) {
  auto x = torch::randn({c.N, c.C, c.H, c.W});
  auto w = torch::randn({c.OC, c.C / c.groups, c.K, c.K}), b = torch::randn({c.OC});
  auto conv = [&] {
    return torch::conv2d(x, w, b, /*stride=*/c.stride, /*padding=*/c.pad, /*dilation=*/1, c.groups);
  };
  if (!backward) {
    torch::NoGradGuard no_grad;
    const double s = bench::median_seconds([] {}, [&] { auto y = conv(); }, 21, min_time);
    return c.forward_flops() / s * 1e-9;
  }
  for (auto* t : {&x, &w, &b}) t->requires_grad_(true);
  auto gy = torch::randn({c.N, c.OC, c.OH(), c.OW()});
  torch::Tensor y;
  auto setup = [&] {
    for (auto* t : {&x, &w, &b}) t->mutable_grad() = torch::Tensor();
    y = conv();
  };
  const double s = bench::median_seconds(setup, [&] { y.backward(gy); }, 21, min_time);
  return 2 * c.forward_flops() / s * 1e-9;
}

// ---- batch norm (issue 23): bench_ops' cases ----
// BatchNorm2d(C) in training mode: forward, then backward of gy, timed together -> G elements/s
double batch_norm_gelems(const bench::NormCase& c, double min_time) {
  torch::nn::BatchNorm2d bn(c.C);
  bn->train();
  auto x = torch::randn({c.N, c.C, c.H, c.W}).requires_grad_(true);
  auto gy = torch::randn({c.N, c.C, c.H, c.W});
  auto setup = [&] {
    for (auto* t : {&x, &bn->weight, &bn->bias}) t->mutable_grad() = torch::Tensor();
  };
  const double s = bench::median_seconds(setup, [&] { bn(x).backward(gy); }, 21, min_time);
  std::printf("# %s forward+backward %.3f ms\n", c.name, s * 1e3);
  return c.elements() / s * 1e-9;
}

// ---- the text models' pieces: forward and backward together ----
double layer_norm_gelems(const bench::LayerNormCase& c, double min_time) {
  auto x = torch::randn({c.N, c.C}).requires_grad_(true), gy = torch::randn({c.N, c.C});
  auto w = torch::randn({c.C}).requires_grad_(true), b = torch::randn({c.C}).requires_grad_(true);
  const double s = bench::median_seconds(
      [&] { for (auto* t : {&x, &w, &b}) t->mutable_grad() = torch::Tensor(); },
      [&] { torch::layer_norm(x, {c.C}, w, b).backward(gy); }, 21, min_time);
  return c.elements() / s * 1e-9;
}

double lstm_gflops(const bench::LstmCase& c, double min_time) {
  torch::nn::LSTMCell cell(c.I, c.H);
  auto x = torch::randn({c.B, c.I}), h = torch::randn({c.B, c.H}), cs = torch::randn({c.B, c.H});
  auto gh = torch::randn({c.B, c.H}), gc = torch::randn({c.B, c.H});
  const double s = bench::median_seconds([&] { cell->zero_grad(); },
                                         [&] {
                                           auto [h2, c2] = cell(x, std::make_tuple(h, cs));
                                           ((h2 * gh).sum() + (c2 * gc).sum()).backward();
                                         },
                                         21, min_time);
  return c.flops() / s * 1e-9;
}

// nanoGPT's attention as written on PyTorch 1.13 (no scaled_dot_product_attention)
double attention_gflops(const bench::AttentionCase& c, double min_time) {
  const std::vector<int64_t> shape{c.B, c.heads, c.T, c.hd};
  auto q = torch::randn(shape).requires_grad_(true), k = torch::randn(shape).requires_grad_(true);
  auto v = torch::randn(shape).requires_grad_(true), gy = torch::randn(shape);
  auto mask = torch::ones({c.T, c.T}).tril().eq(0);
  const double scale = 1.0 / std::sqrt(double(c.hd));
  const double s = bench::median_seconds(
      [&] { for (auto* t : {&q, &k, &v}) t->mutable_grad() = torch::Tensor(); },
      [&] {
        auto att = torch::matmul(q, k.transpose(-2, -1)) * scale;
        att = torch::softmax(att.masked_fill(mask, -INFINITY), -1);
        torch::matmul(att, v).backward(gy);
      },
      21, min_time);
  return c.flops() / s * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  bench::reexec_with_env_default(argv, "OPENBLAS_NUM_THREADS", "1");
  bench::Flags flags(argc, argv, {{"threads", "1"}, {"min-time", "0.3"}, {"only", ""}},
                     "[--threads T] [--min-time SECONDS] [--only PREFIX]");
  const std::string only = flags.str("only");
  auto want = [&](const std::string& name) { return name.rfind(only, 0) == 0; };
  const int threads = static_cast<int>(flags.integer("threads"));
  const double min_time = flags.real("min-time");
  if (threads < 1) {
    std::fprintf(stderr, "--threads: expected >= 1, got %d\n", threads);
    return 2;
  }
  torch::manual_seed(0);
  torch::set_num_threads(threads);
  const char* blas_threads = std::getenv("OPENBLAS_NUM_THREADS");
  std::printf("# libtorch %s threads=%d OPENBLAS_NUM_THREADS=%s\n", TORCH_VERSION, threads,
              blas_threads ? blas_threads : "unset");
  bench::print_load_note();
  for (int n : bench::kMatmulSizes) {
    if (!want("matmul_" + std::to_string(n))) continue;
    std::printf("matmul_%d %.3f\n", n, matmul_gflops(n, min_time));
    std::fflush(stdout);
  }
  for (const auto& c : bench::kLinearCases) {
    if (!want(c.name)) continue;
    std::printf("%s %.3f\n", c.name, linear_gflops(c, min_time));
    std::fflush(stdout);
  }
  for (const auto& c : bench::kConvCases) {
    if (want(std::string(c.name) + "_fwd"))
      std::printf("%s_fwd %.3f\n", c.name, conv_gflops(c, /*backward=*/false, min_time));
    if (want(std::string(c.name) + "_bwd"))
      std::printf("%s_bwd %.3f\n", c.name, conv_gflops(c, /*backward=*/true, min_time));
    std::fflush(stdout);
  }
  for (const auto& c : bench::kBatchNormCases) {
    if (!want(c.name)) continue;
    std::printf("%s %.3f\n", c.name, batch_norm_gelems(c, min_time));
    std::fflush(stdout);
  }
  auto emit = [&](const char* name, auto figure) {
    if (!want(name)) return;
    std::printf("%s %.3f\n", name, figure());
    std::fflush(stdout);
  };
  for (const auto& c : bench::kLayerNormCases) emit(c.name, [&] { return layer_norm_gelems(c, min_time); });
  for (const auto& c : bench::kLstmCases) emit(c.name, [&] { return lstm_gflops(c, min_time); });
  for (const auto& c : bench::kAttentionCases) emit(c.name, [&] { return attention_gflops(c, min_time); });
  return 0;
}
