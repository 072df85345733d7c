// bench_layers: the everyday layers and ops a model brings, beyond the zoo's
// convolutions and GEMMs (bench_ops), each one forward and one backward
// timed together at the shapes below, against libtorch's twin
// (bench_layers_torch, same cases), run afterwards when it was built.
//
//   bench_layers [--threads T] [--min-time S] [--twin on|off] [--only PREFIX]
//
// Prints `name milliseconds` per case, then a table with libtorch's figure
// and the ratio libtorch / minidl (above 1: minidl is faster).
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "bench_common.h"
#include "minidl/minidl.h"

using namespace minidl;

namespace {

Tensor input(const Shape& s) { return Tensor::randn(s).requires_grad_(true); }

// Each case: its inputs, then f() -> the output whose backward (of a fixed
// random gradient) is timed with it.
using Case = std::function<std::function<Tensor()>()>;

std::vector<std::pair<std::string, Case>> cases() {
  std::vector<std::pair<std::string, Case>> c;
  auto add = [&](const std::string& name, Case make) { c.emplace_back(name, std::move(make)); };
  add("maxpool3x3s2", [] {
    Tensor x = input({32, 64, 56, 56});
    return [=] { return max_pool2d(x, 3, 2, 1); };
  });
  add("maxpool2x2", [] {
    Tensor x = input({128, 64, 28, 28});
    return [=] { return max_pool2d(x, 2); };
  });
  add("avgpool2x2", [] {
    Tensor x = input({128, 64, 28, 28});
    return [=] { return avg_pool2d(x, 2); };
  });
  add("avgpool3x3s1", [] {
    Tensor x = input({128, 64, 28, 28});
    return [=] { return avg_pool2d(x, 3, 1, 1); };
  });
  add("global_avgpool", [] {
    Tensor x = input({128, 512, 7, 7});
    return [=] { return adaptive_avg_pool2d(x, 1); };
  });
  add("mean_hw", [] {
    Tensor x = input({128, 512, 7, 7});
    return [=] { return mean(x, {2, 3}); };
  });
  add("mean_nhwc_c", [] {  // the channels' mean of an NCHW tensor seen as NHWC
    Tensor x = input({32, 256, 28, 28});
    return [=] { return mean(permute(x, {0, 2, 3, 1}), {-1}); };
  });
  add("softmax", [] {
    Tensor x = input({4096, 1000});
    return [=] { return softmax(x, -1); };
  });
  add("softmax_dim0", [] {
    Tensor x = input({4096, 1000});
    return [=] { return softmax(x, 0); };
  });
  add("softmax_d16", [] {  // short rows: attention over few keys, few classes
    Tensor x = input({65536, 16});
    return [=] { return softmax(x, -1); };
  });
  add("log_softmax", [] {
    Tensor x = input({4096, 1000});
    return [=] { return log_softmax(x, -1); };
  });
  add("cross_entropy", [] {
    Tensor x = input({4096, 1000}), l = Tensor::randint(0, 1000, {4096});
    return [=] { return cross_entropy(x, l); };
  });
  add("cross_entropy_c10", [] {  // few classes, many rows
    Tensor x = input({16384, 10}), l = Tensor::randint(0, 10, {16384});
    return [=] { return cross_entropy(x, l); };
  });
  add("cross_entropy_seg", [] {  // a class for each pixel: segmentation
    Tensor x = input({16, 21, 64, 64}), l = Tensor::randint(0, 21, {16, 64, 64});
    return [=] { return cross_entropy(x, l); };
  });
  add("sum_dim1", [] {
    Tensor x = input({4096, 1000});
    return [=] { return sum(x, {1}); };
  });
  add("sum_dim0", [] {
    Tensor x = input({4096, 1000});
    return [=] { return sum(x, {0}); };
  });
  add("var_dim1", [] {
    Tensor x = input({4096, 1000});
    return [=] { return var(x, {1}); };
  });
  add("gelu", [] {
    Tensor x = input({1024, 3072});
    return [=] { return gelu(x); };
  });
  add("gelu_tanh", [] {
    Tensor x = input({1024, 3072});
    return [=] { return gelu(x, "tanh"); };
  });
  add("silu", [] {
    Tensor x = input({1024, 3072});
    return [=] { return silu(x); };
  });
  add("sigmoid", [] {
    Tensor x = input({1024, 3072});
    return [=] { return sigmoid(x); };
  });
  add("tanh", [] {
    Tensor x = input({1024, 3072});
    return [=] { return tanh(x); };
  });
  add("relu", [] {
    Tensor x = input({1024, 3072});
    return [=] { return relu(x); };
  });
  add("dropout", [] {
    Tensor x = input({1024, 3072});
    return [=] { return dropout(x, 0.1); };
  });
  // small_*: [64, 256], 16,384 elements, under the 65,536 where loops go parallel
  add("small_gelu", [] {
    Tensor x = input({64, 256});
    return [=] { return gelu(x); };
  });
  add("small_relu", [] {
    Tensor x = input({64, 256});
    return [=] { return relu(x); };
  });
  add("small_mul", [] {
    Tensor a = input({64, 256}), b = input({64, 256});
    return [=] { return mul(a, b); };
  });
  add("mul", [] {
    Tensor a = input({1024, 3072}), b = input({1024, 3072});
    return [=] { return mul(a, b); };
  });
  add("add_bias", [] {
    Tensor a = input({1024, 3072}), b = input({3072});
    return [=] { return minidl::add(a, b); };
  });
  add("transpose", [] {
    Tensor x = input({1024, 3072});
    return [=] { return contiguous(transpose(x, 0, 1)); };
  });
  add("permute0213", [] {
    Tensor x = input({64, 128, 12, 64});
    return [=] { return contiguous(permute(x, {0, 2, 1, 3})); };
  });
  add("permute0231", [] {  // NCHW to NHWC
    Tensor x = input({32, 256, 28, 28});
    return [=] { return contiguous(permute(x, {0, 2, 3, 1})); };
  });
  add("cat_dim1", [] {
    Tensor a = input({64, 256, 14, 14}), b = input({64, 256, 14, 14});
    return [=] { return cat({a, b}, 1); };
  });
  add("upsample2x", [] {
    Tensor x = input({64, 128, 14, 14});
    return [=] { return upsample_nearest2d(x, {28, 28}); };
  });
  add("bilinear2x", [] {
    Tensor x = input({16, 64, 32, 32});
    return [=] { return upsample_bilinear2d(x, {64, 64}); };
  });
  add("layer_norm768", [] {
    auto ln = std::make_shared<nn::LayerNorm>(768);
    Tensor x = input({8192, 768});
    return [=] { return (*ln)(x); };
  });
  add("batch_norm1d", [] {
    auto bn = std::make_shared<nn::BatchNorm1d>(1024);
    Tensor x = input({4096, 1024});
    return [=] { return (*bn)(x); };
  });
  add("group_norm", [] {
    auto gn = std::make_shared<nn::GroupNorm>(32, 256);
    Tensor x = input({32, 256, 14, 14});
    return [=] { return (*gn)(x); };
  });
  add("embedding", [] {
    auto e = std::make_shared<nn::Embedding>(50000, 256);
    Tensor i = Tensor::randint(0, 50000, {64, 128});
    return [=] { return (*e)(i); };
  });
  add("index_select", [] {
    Tensor x = input({100000, 64}), i = Tensor::randint(0, 100000, {4096});
    return [=] { return index_select(x, 0, i); };
  });
  add("bmm", [] {
    Tensor a = input({64, 128, 64}), b = input({64, 64, 128});
    return [=] { return matmul(a, b); };
  });
  add("conv1d", [] {
    Tensor x = input({32, 64, 1000}), w = input({64, 64, 3}), b = input({64});
    return [=] { return conv1d(x, w, b, {.padding = 1}); };
  });
  add("lstm512", [] {
    auto lstm = std::make_shared<nn::LSTM>(256, 512);
    Tensor x = input({50, 32, 256});
    return [=] { return (*lstm)(x).first; };
  });
  add("gru512", [] {
    auto gru = std::make_shared<nn::GRU>(256, 512);
    Tensor x = input({50, 32, 256});
    return [=] { return (*gru)(x).first; };
  });
  add("leaky_relu", [] {
    Tensor x = input({1024, 3072});
    return [=] { return leaky_relu(x, 0.01); };
  });
  add("elu", [] {
    Tensor x = input({1024, 3072});
    return [=] { return elu(x); };
  });
  add("softplus", [] {
    Tensor x = input({1024, 3072});
    return [=] { return softplus(x); };
  });
  add("exp", [] {
    Tensor x = input({1024, 3072});
    return [=] { return exp(x); };
  });
  add("pow2", [] {
    Tensor x = input({1024, 3072});
    return [=] { return pow(x, 2); };
  });
  add("clamp", [] {
    Tensor x = input({1024, 3072});
    return [=] { return clamp(x, -1.0, 1.0); };
  });
  add("div", [] {
    Tensor a = input({1024, 3072}), b = input({1024, 3072});
    return [=] { return div(a, b); };
  });
  add("where", [] {
    Tensor a = input({1024, 3072}), b = input({1024, 3072});
    return [=] { return where(gt(a, 0.0), a, b); };
  });
  add("masked_fill", [] {
    Tensor x = input({32, 12, 128, 128});
    Tensor m = eq(triu(Tensor::ones({128, 128}), 1), 1.0);
    return [=] { return masked_fill(x, m, -1e9); };
  });
  add("max_dim1", [] {
    Tensor x = input({4096, 1000});
    return [=] { return max(x, {1}); };
  });
  add("mean_dim0", [] {
    Tensor x = input({4096, 1000});
    return [=] { return mean(x, {0}); };
  });
  add("logsumexp", [] {
    Tensor x = input({4096, 1000});
    return [=] { return logsumexp(x, {1}); };
  });
  add("mse_loss", [] {
    auto loss = std::make_shared<nn::MSELoss>();
    Tensor x = input({4096, 1000}), y = Tensor::randn({4096, 1000});
    return [=] { return (*loss)(x, y); };
  });
  add("bce_logits", [] {
    Tensor x = input({4096, 1000}), y = Tensor::rand({4096, 1000});
    return [=] { return binary_cross_entropy_with_logits(x, y); };
  });
  add("smooth_l1", [] {
    Tensor x = input({4096, 1000}), y = Tensor::randn({4096, 1000});
    return [=] { return smooth_l1_loss(x, y); };
  });
  add("pad2d", [] {
    Tensor x = input({64, 128, 28, 28});
    return [=] { return pad(x, {1, 1, 1, 1}); };
  });
  add("norm", [] {
    Tensor x = input({1024, 3072});
    return [=] { return norm(x); };
  });
  add("log", [] {
    Tensor x = (Tensor::rand({1024, 3072}) + 0.1).requires_grad_(true);
    return [=] { return log(x); };
  });
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  bench::Flags flags(argc, argv,
                     {{"threads", "1"}, {"min-time", "0.3"}, {"twin", "on"}, {"only", ""}},
                     "[--threads T] [--min-time SECONDS] [--twin on|off] [--only PREFIX]");
  const std::string only = flags.str("only"), twin_flag = flags.str("twin");
  const long threads = flags.integer("threads");
  if (threads < 1 || (twin_flag != "on" && twin_flag != "off")) {
    std::fprintf(stderr, "expected --threads >= 1 and --twin on or off, got %ld and '%s'\n",
                 threads, twin_flag.c_str());
    return 2;
  }
  manual_seed(0);
  set_num_threads(static_cast<int>(threads));
  std::printf("# minidl threads=%ld; milliseconds of one forward and backward\n", threads);
  bench::print_load_note();
  std::vector<std::pair<std::string, double>> ours;
  for (const auto& [name, make] : cases()) {
    if (name.rfind(only, 0) != 0) continue;
    const std::function<Tensor()> f = make();
    const Tensor gy = Tensor::randn(f().shape());
    const double s =
        bench::median_seconds([] {}, [&] { f().backward(gy); }, 11, flags.real("min-time"));
    ours.emplace_back(name, s * 1e3);
    std::printf("%s %.4f\n", name.c_str(), s * 1e3);
    std::fflush(stdout);
  }
  if (twin_flag == "off") return 0;

  const auto twin =
      std::filesystem::read_symlink("/proc/self/exe").parent_path() / "bench_layers_torch";
  if (!std::filesystem::exists(twin)) {
    std::printf("# no libtorch twin: %s was not built\n", twin.c_str());
    return 0;
  }
  const std::string command = bench::shell_quote(twin.string()) + " --threads " +
                              std::to_string(threads) + " --min-time " + flags.str("min-time") +
                              (only.empty() ? "" : " --only " + bench::shell_quote(only));
  std::vector<std::pair<std::string, double>> figures;
  std::vector<std::string> notes;
  if (!bench::run_twin(command, figures, notes)) {
    std::printf("# the libtorch twin failed: %s\n", command.c_str());
    return 1;
  }
  for (const auto& note : notes) std::printf("%s\n", note.c_str());
  std::map<std::string, double> theirs(figures.begin(), figures.end());
  std::printf("\n%-16s %12s %14s %16s\n", "case", "minidl ms", "libtorch ms", "libtorch/minidl");
  for (const auto& [name, ms] : ours) {
    auto it = theirs.find(name);
    if (it == theirs.end())
      std::printf("%-16s %12.3f %14s %16s\n", name.c_str(), ms, "-", "-");
    else
      std::printf("%-16s %12.3f %14.3f %16.2f\n", name.c_str(), ms, it->second, it->second / ms);
  }
}
