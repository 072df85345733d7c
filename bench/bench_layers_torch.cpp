// bench_layers_torch: libtorch's twin of bench_layers (the same cases and
// shapes). Prints one `name milliseconds` line per case (lines starting with
// '#' are comments), which bench_layers parses.
//
//   bench_layers_torch [--threads T] [--min-time S] [--only PREFIX]
//
// torch::set_num_threads(T), OpenBLAS at one thread (bench/README.md).
#include <torch/torch.h>
#include <torch/version.h>

#include <cstdio>
#include <functional>
#include <string>

#include "bench_common.h"

namespace {

torch::Tensor input(std::vector<int64_t> s) { return torch::randn(s).requires_grad_(true); }

using Case = std::function<std::function<torch::Tensor()>()>;

std::vector<std::pair<std::string, Case>> cases() {
  namespace F = torch::nn::functional;
  std::vector<std::pair<std::string, Case>> c;
  auto add = [&](const std::string& name, Case make) { c.emplace_back(name, std::move(make)); };
  add("maxpool3x3s2", [] {
    auto x = input({32, 64, 56, 56});
    return [=] { return torch::max_pool2d(x, 3, 2, 1); };
  });
  add("maxpool2x2", [] {
    auto x = input({128, 64, 28, 28});
    return [=] { return torch::max_pool2d(x, 2); };
  });
  add("avgpool2x2", [] {
    auto x = input({128, 64, 28, 28});
    return [=] { return torch::avg_pool2d(x, 2); };
  });
  add("avgpool3x3s1", [] {
    auto x = input({128, 64, 28, 28});
    return [=] { return torch::avg_pool2d(x, 3, 1, 1); };
  });
  add("global_avgpool", [] {
    auto x = input({128, 512, 7, 7});
    return [=] { return torch::adaptive_avg_pool2d(x, {1, 1}); };
  });
  add("mean_hw", [] {
    auto x = input({128, 512, 7, 7});
    return [=] { return x.mean({2, 3}); };
  });
  add("mean_nhwc_c", [] {
    auto x = input({32, 256, 28, 28});
    return [=] { return x.permute({0, 2, 3, 1}).mean({-1}); };
  });
  add("softmax", [] {
    auto x = input({4096, 1000});
    return [=] { return torch::softmax(x, -1); };
  });
  add("softmax_dim0", [] {
    auto x = input({4096, 1000});
    return [=] { return torch::softmax(x, 0); };
  });
  add("softmax_d16", [] {
    auto x = input({65536, 16});
    return [=] { return torch::softmax(x, -1); };
  });
  add("log_softmax", [] {
    auto x = input({4096, 1000});
    return [=] { return torch::log_softmax(x, -1); };
  });
  add("cross_entropy", [] {
    auto x = input({4096, 1000}), l = torch::randint(0, 1000, {4096});
    return [=] { return F::cross_entropy(x, l); };
  });
  add("cross_entropy_c10", [] {
    auto x = input({16384, 10}), l = torch::randint(0, 10, {16384});
    return [=] { return F::cross_entropy(x, l); };
  });
  add("cross_entropy_seg", [] {
    auto x = input({16, 21, 64, 64}), l = torch::randint(0, 21, {16, 64, 64});
    return [=] { return F::cross_entropy(x, l); };
  });
  add("sum_dim1", [] {
    auto x = input({4096, 1000});
    return [=] { return x.sum({1}); };
  });
  add("sum_dim0", [] {
    auto x = input({4096, 1000});
    return [=] { return x.sum({0}); };
  });
  add("var_dim1", [] {
    auto x = input({4096, 1000});
    return [=] { return x.var({1}); };
  });
  add("gelu", [] {
    auto x = input({1024, 3072});
    return [=] { return torch::gelu(x); };
  });
  add("gelu_tanh", [] {
    auto x = input({1024, 3072});
    return [=] { return torch::gelu(x, "tanh"); };
  });
  add("silu", [] {
    auto x = input({1024, 3072});
    return [=] { return torch::silu(x); };
  });
  add("sigmoid", [] {
    auto x = input({1024, 3072});
    return [=] { return torch::sigmoid(x); };
  });
  add("tanh", [] {
    auto x = input({1024, 3072});
    return [=] { return torch::tanh(x); };
  });
  add("relu", [] {
    auto x = input({1024, 3072});
    return [=] { return torch::relu(x); };
  });
  add("dropout", [] {
    auto x = input({1024, 3072});
    return [=] { return torch::dropout(x, 0.1, true); };
  });
  // small_*: [64, 256], 16,384 elements
  add("small_gelu", [] {
    auto x = input({64, 256});
    return [=] { return torch::gelu(x); };
  });
  add("small_relu", [] {
    auto x = input({64, 256});
    return [=] { return torch::relu(x); };
  });
  add("small_mul", [] {
    auto a = input({64, 256}), b = input({64, 256});
    return [=] { return a * b; };
  });
  add("mul", [] {
    auto a = input({1024, 3072}), b = input({1024, 3072});
    return [=] { return a * b; };
  });
  add("add_bias", [] {
    auto a = input({1024, 3072}), b = input({3072});
    return [=] { return a + b; };
  });
  add("transpose", [] {
    auto x = input({1024, 3072});
    return [=] { return x.transpose(0, 1).contiguous(); };
  });
  add("permute0213", [] {
    auto x = input({64, 128, 12, 64});
    return [=] { return x.permute({0, 2, 1, 3}).contiguous(); };
  });
  add("permute0231", [] {
    auto x = input({32, 256, 28, 28});
    return [=] { return x.permute({0, 2, 3, 1}).contiguous(); };
  });
  add("cat_dim1", [] {
    auto a = input({64, 256, 14, 14}), b = input({64, 256, 14, 14});
    return [=] { return torch::cat({a, b}, 1); };
  });
  add("upsample2x", [] {
    auto x = input({64, 128, 14, 14});
    return [=] {
      return torch::upsample_nearest2d(x, std::vector<int64_t>{28, 28}, c10::nullopt, c10::nullopt);
    };
  });
  add("bilinear2x", [] {
    auto x = input({16, 64, 32, 32});
    return [=] {
      return torch::upsample_bilinear2d(x, std::vector<int64_t>{64, 64}, false, c10::nullopt,
                                        c10::nullopt);
    };
  });
  add("layer_norm768", [] {
    torch::nn::LayerNorm ln(torch::nn::LayerNormOptions({768}));
    auto x = input({8192, 768});
    return [=]() mutable { return ln->forward(x); };
  });
  add("batch_norm1d", [] {
    torch::nn::BatchNorm1d bn(1024);
    auto x = input({4096, 1024});
    return [=]() mutable { return bn->forward(x); };
  });
  add("group_norm", [] {
    torch::nn::GroupNorm gn(32, 256);
    auto x = input({32, 256, 14, 14});
    return [=]() mutable { return gn->forward(x); };
  });
  add("embedding", [] {
    torch::nn::Embedding e(50000, 256);
    auto i = torch::randint(0, 50000, {64, 128});
    return [=]() mutable { return e->forward(i); };
  });
  add("index_select", [] {
    auto x = input({100000, 64}), i = torch::randint(0, 100000, {4096});
    return [=] { return torch::index_select(x, 0, i); };
  });
  add("bmm", [] {
    auto a = input({64, 128, 64}), b = input({64, 64, 128});
    return [=] { return torch::matmul(a, b); };
  });
  add("conv1d", [] {
    auto x = input({32, 64, 1000}), w = input({64, 64, 3}), b = input({64});
    return [=] { return torch::conv1d(x, w, b, 1, 1); };
  });
  add("lstm512", [] {
    torch::nn::LSTM lstm(256, 512);
    auto x = input({50, 32, 256});
    return [=]() mutable { return std::get<0>(lstm->forward(x)); };
  });
  add("gru512", [] {
    torch::nn::GRU gru(256, 512);
    auto x = input({50, 32, 256});
    return [=]() mutable { return std::get<0>(gru->forward(x)); };
  });
  add("leaky_relu", [] {
    auto x = input({1024, 3072});
    return [=] { return torch::leaky_relu(x, 0.01); };
  });
  add("elu", [] {
    auto x = input({1024, 3072});
    return [=] { return torch::elu(x); };
  });
  add("softplus", [] {
    auto x = input({1024, 3072});
    return [=] { return torch::softplus(x); };
  });
  add("exp", [] {
    auto x = input({1024, 3072});
    return [=] { return torch::exp(x); };
  });
  add("pow2", [] {
    auto x = input({1024, 3072});
    return [=] { return x.pow(2); };
  });
  add("clamp", [] {
    auto x = input({1024, 3072});
    return [=] { return x.clamp(-1.0, 1.0); };
  });
  add("div", [] {
    auto a = input({1024, 3072}), b = input({1024, 3072});
    return [=] { return a / b; };
  });
  add("where", [] {
    auto a = input({1024, 3072}), b = input({1024, 3072});
    return [=] { return torch::where(a > 0, a, b); };
  });
  add("masked_fill", [] {
    auto x = input({32, 12, 128, 128});
    auto m = torch::ones({128, 128}).triu(1).eq(1);
    return [=] { return x.masked_fill(m, -1e9); };
  });
  add("max_dim1", [] {
    auto x = input({4096, 1000});
    return [=] { return std::get<0>(x.max(1)); };
  });
  add("mean_dim0", [] {
    auto x = input({4096, 1000});
    return [=] { return x.mean({0}); };
  });
  add("logsumexp", [] {
    auto x = input({4096, 1000});
    return [=] { return torch::logsumexp(x, {1}); };
  });
  add("mse_loss", [] {
    auto x = input({4096, 1000}), y = torch::randn({4096, 1000});
    return [=] { return F::mse_loss(x, y); };
  });
  add("bce_logits", [] {
    auto x = input({4096, 1000}), y = torch::rand({4096, 1000});
    return [=] { return F::binary_cross_entropy_with_logits(x, y); };
  });
  add("smooth_l1", [] {
    auto x = input({4096, 1000}), y = torch::randn({4096, 1000});
    return [=] { return F::smooth_l1_loss(x, y); };
  });
  add("pad2d", [] {
    auto x = input({64, 128, 28, 28});
    return [=] { return F::pad(x, F::PadFuncOptions({1, 1, 1, 1})); };
  });
  add("norm", [] {
    auto x = input({1024, 3072});
    return [=] { return x.norm(); };
  });
  add("log", [] {
    auto x = (torch::rand({1024, 3072}) + 0.1).requires_grad_(true);
    return [=] { return torch::log(x); };
  });
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  bench::reexec_with_env_default(argv, "OPENBLAS_NUM_THREADS", "1");
  bench::Flags flags(argc, argv, {{"threads", "1"}, {"min-time", "0.3"}, {"only", ""}},
                     "[--threads T] [--min-time SECONDS] [--only PREFIX]");
  const std::string only = flags.str("only");
  const int threads = static_cast<int>(flags.integer("threads"));
  if (threads < 1) {
    std::fprintf(stderr, "--threads: expected >= 1, got %d\n", threads);
    return 2;
  }
  torch::manual_seed(0);
  torch::set_num_threads(threads);
  std::printf("# libtorch %s threads=%d\n", TORCH_VERSION, threads);
  for (const auto& [name, make] : cases()) {
    if (name.rfind(only, 0) != 0) continue;
    const std::function<torch::Tensor()> f = make();
    const torch::Tensor gy = torch::randn(f().sizes());
    const double s =
        bench::median_seconds([] {}, [&] { f().backward(gy); }, 11, flags.real("min-time"));
    std::printf("%s %.4f\n", name.c_str(), s * 1e3);
    std::fflush(stdout);
  }
}
