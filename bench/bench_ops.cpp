// bench_ops: GFLOP/s of minidl's matmul (n = 64, 256, 1024), linear forward
// (the MLP's fc1 at batch 32 and 256), conv2d forward and backward at
// LeNet-5's, ResNet-8's and DCGAN's shapes, BatchNorm2d, LayerNorm, an LSTM
// cell step and causal attention, each the median over repeated runs. When
// bench_ops_torch sits in the same folder, it also runs it as a separate
// process with the same flags (for T > 1 twice: OpenBLAS at 1 and at T
// threads, keeping libtorch's faster figure per case), then bench_ops_dnnl
// (oneDNN, the convolution cases only) the same way once. minidl's cases run
// once before each of these runs and keep their fastest figure, as the peers
// do. It prints the libraries side by side with minidl's ratio to the faster
// peer. Prints figures only;
// asserts nothing. The batch norm cases (bn2d_*: BatchNorm2d in training mode,
// one forward and one backward) give G elements/s (N*C*H*W over the seconds)
// in the GFLOP/s column, and their milliseconds on '#' lines.
//
//   bench_ops [--threads T] [--min-time S] [--twin on|off] [--only PREFIX] [--conv auto|im2col]
//             [--gemm auto|openblas]
// --only runs the cases whose names start with PREFIX (here and in the twins).
// --conv im2col keeps minidl's strided convolutions off oneDNN (im2col + GEMM).
// --gemm openblas keeps every product on OpenBLAS (auto: oneDNN's sgemm where it fits).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench_common.h"
#include "framework/backend/cpu/cpu.h"  // set_dnnl_conv, set_dnnl_gemm
#include "minidl/minidl.h"

using namespace minidl;

namespace {

// Square matmul: a [n, n] x b [n, n], forward only.
double matmul_gflops(int n, double min_time) {
  NoGradGuard no_grad;
  Tensor a = Tensor::randn({n, n}), b = Tensor::randn({n, n});
  const double s = bench::median_seconds([] {}, [&] { Tensor c = matmul(a, b); }, 21, min_time);
  return 2.0 * n * n * n / s * 1e-9;
}

double linear_gflops(const bench::LinearCase& c, double min_time) {
  NoGradGuard no_grad;
  Tensor x = Tensor::randn({c.N, c.IN}), w = Tensor::randn({c.OUT, c.IN}), b = Tensor::randn({c.OUT});
  const double s = bench::median_seconds([] {}, [&] { Tensor y = linear(x, w, b); }, 21, min_time);
  return c.flops() / s * 1e-9;
}

// conv2d with bias, forward only (no graph) or backward only (input, weight
// and bias gradients; the forward that builds the graph is not timed).
double conv_gflops(const bench::ConvCase& c, bool backward, double min_time) {
  Tensor x = Tensor::randn({c.N, c.C, c.H, c.W});
  Tensor w = Tensor::randn({c.OC, c.C / c.groups, c.K, c.K}), b = Tensor::randn({c.OC});
  auto conv = [&] {
    return conv2d(x, w, b, {.stride = c.stride, .padding = c.pad, .groups = c.groups});
  };
  if (!backward) {
    NoGradGuard no_grad;
    const double s = bench::median_seconds([] {}, [&] { Tensor y = conv(); }, 21, min_time);
    return c.forward_flops() / s * 1e-9;
  }
  for (Tensor* t : {&x, &w, &b}) t->requires_grad_(true);
  Tensor gy = Tensor::randn({c.N, c.OC, c.OH(), c.OW()});
  Tensor y;
  auto setup = [&] {
    for (Tensor* t : {&x, &w, &b}) t->zero_grad();
    y = conv();
  };
  const double s = bench::median_seconds(setup, [&] { y.backward(gy); }, 21, min_time);
  return 2 * c.forward_flops() / s * 1e-9;
}

// ---- batch norm (issue 23) ----
// BatchNorm2d(C) in training mode: forward, then backward of gy (x, weight
// and bias gradients), timed together -> G elements/s
double batch_norm_gelems(const bench::NormCase& c, double min_time) {
  nn::BatchNorm2d bn(c.C);
  Tensor x = Tensor::randn({c.N, c.C, c.H, c.W}).requires_grad_(true);
  Tensor gy = Tensor::randn({c.N, c.C, c.H, c.W});
  auto setup = [&] {
    for (Tensor* t : {&x, &bn.weight, &bn.bias}) t->zero_grad();
  };
  const double s = bench::median_seconds(setup, [&] { bn(x).backward(gy); }, 21, min_time);
  std::printf("# %s forward+backward %.3f ms\n", c.name, s * 1e3);
  return c.elements() / s * 1e-9;
}

// ---- the text models' pieces (issue 23): forward and backward together ----
// median seconds of body() after setup() (both run per sample)
template <class Setup, class Body>
double timed(Setup setup, Body body, double min_time) {
  return bench::median_seconds(setup, body, 21, min_time);
}

double layer_norm_gelems(const bench::LayerNormCase& c, double min_time) {
  Tensor x = Tensor::randn({c.N, c.C}).requires_grad_(true), gy = Tensor::randn({c.N, c.C});
  Tensor w = Tensor::randn({c.C}).requires_grad_(true), b = Tensor::randn({c.C}).requires_grad_(true);
  const double s = timed([&] { for (Tensor* t : {&x, &w, &b}) t->zero_grad(); },
                         [&] { layer_norm(x, {c.C}, w, b).backward(gy); }, min_time);
  return c.elements() / s * 1e-9;
}

double lstm_gflops(const bench::LstmCase& c, double min_time) {
  nn::LSTMCell cell(c.I, c.H);
  Tensor x = Tensor::randn({c.B, c.I}), h = Tensor::randn({c.B, c.H}), cs = Tensor::randn({c.B, c.H});
  Tensor gh = Tensor::randn({c.B, c.H}), gc = Tensor::randn({c.B, c.H});
  const double s = timed([&] { cell.zero_grad(); },
                         [&] {
                           auto [h2, c2] = cell(x, {h, cs});
                           ((h2 * gh).sum() + (c2 * gc).sum()).backward();
                         },
                         min_time);
  return c.flops() / s * 1e-9;
}

double attention_gflops(const bench::AttentionCase& c, double min_time) {
  const Shape shape{c.B, c.heads, c.T, c.hd};
  Tensor q = Tensor::randn(shape).requires_grad_(true), k = Tensor::randn(shape).requires_grad_(true);
  Tensor v = Tensor::randn(shape).requires_grad_(true), gy = Tensor::randn(shape);
  const double s = timed([&] { for (Tensor* t : {&q, &k, &v}) t->zero_grad(); },
                         [&] { scaled_dot_product_attention(q, k, v, {}, 0, true).backward(gy); },
                         min_time);
  return c.flops() / s * 1e-9;
}

// Runs the cases in order whose names start with `only`, calling emit(name,
// GFLOP/s) after each.
template <class Emit>
void run_cases(double min_time, const std::string& only, Emit emit) {
  auto run = [&](const std::string& name, auto figure) {
    if (name.rfind(only, 0) == 0) emit(name, figure());
  };
  for (int n : bench::kMatmulSizes)
    run("matmul_" + std::to_string(n), [&] { return matmul_gflops(n, min_time); });
  for (const auto& c : bench::kLinearCases) run(c.name, [&] { return linear_gflops(c, min_time); });
  for (const auto& c : bench::kConvCases) {
    run(std::string(c.name) + "_fwd", [&] { return conv_gflops(c, /*backward=*/false, min_time); });
    run(std::string(c.name) + "_bwd", [&] { return conv_gflops(c, /*backward=*/true, min_time); });
  }
  for (const auto& c : bench::kBatchNormCases) run(c.name, [&] { return batch_norm_gelems(c, min_time); });
  for (const auto& c : bench::kLayerNormCases) run(c.name, [&] { return layer_norm_gelems(c, min_time); });
  for (const auto& c : bench::kLstmCases) run(c.name, [&] { return lstm_gflops(c, min_time); });
  for (const auto& c : bench::kAttentionCases) run(c.name, [&] { return attention_gflops(c, min_time); });
}

// A twin's figures: case -> (GFLOP/s, OpenBLAS threads of the run that gave it).
using Figures = std::map<std::string, std::pair<double, long>>;

// One run of a twin: bench_ops_torch at an OpenBLAS thread count, or bench_ops_dnnl.
struct PeerRun {
  std::filesystem::path twin;
  const char* library;
  long blas_threads;
  Figures* best;
};

// Runs the twin, echoes its lines as comments and keeps each case's fastest
// figure in run.best. False when it fails.
bool run_peer(const PeerRun& run, long threads, const std::string& min_time,
              const std::string& only) {
  const std::string command = "OPENBLAS_NUM_THREADS=" + std::to_string(run.blas_threads) + " " +
                              bench::shell_quote(run.twin.string()) + " --threads " +
                              std::to_string(threads) + " --min-time " + min_time +
                              (only.empty() ? "" : " --only " + bench::shell_quote(only));
  std::vector<std::pair<std::string, double>> figures;
  std::vector<std::string> notes;
  if (!bench::run_twin(command, figures, notes)) {
    std::printf("# the %s twin failed: %s\n", run.library, command.c_str());
    return false;
  }
  for (const auto& note : notes) std::printf("%s\n", note.c_str());
  Figures& best = *run.best;
  for (const auto& [name, gflops] : figures) {
    std::printf("#   %s %.3f\n", name.c_str(), gflops);
    if (gflops > best[name].first) best[name] = {gflops, run.blas_threads};
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  bench::Flags flags(argc, argv,
                     {{"threads", "1"}, {"min-time", "0.3"}, {"twin", "on"}, {"only", ""},
                      {"conv", "auto"}, {"gemm", "auto"}},
                     "[--threads T] [--min-time SECONDS] [--twin on|off] [--only PREFIX] "
                     "[--conv auto|im2col] [--gemm auto|openblas]");
  const std::string only = flags.str("only");
  const long threads = flags.integer("threads");
  const double min_time = flags.real("min-time");
  const std::string twin_flag = flags.str("twin");
  const std::string conv = flags.str("conv"), gemm = flags.str("gemm");
  if (threads < 1 || (twin_flag != "on" && twin_flag != "off") ||
      (conv != "auto" && conv != "im2col") || (gemm != "auto" && gemm != "openblas")) {
    std::fprintf(stderr,
                 "expected --threads >= 1, --twin on or off, --conv auto or im2col and "
                 "--gemm auto or openblas, got %ld, '%s', '%s' and '%s'\n",
                 threads, twin_flag.c_str(), conv.c_str(), gemm.c_str());
    return 2;
  }
  cpu::set_dnnl_conv(conv == "auto");
  cpu::set_dnnl_gemm(gemm == "auto");
  manual_seed(0);
  set_num_threads(static_cast<int>(threads));

  // libtorch at its best: its own pool at T threads and OpenBLAS at 1 thread
  // (best for convolutions and training), or, for T > 1, OpenBLAS at T threads
  // too (best for a lone large matmul); then oneDNN on its own OpenMP pool at
  // T threads (it calls no BLAS for these cases). Each case keeps each
  // library's fastest figure. minidl runs before each of these peer runs, never
  // beside one, and keeps its own fastest too: on this noisy machine the best
  // of three runs beats one run by itself, so each side gets as many.
  const auto folder = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  Figures torch, dnnl;
  std::vector<PeerRun> peers;
  if (twin_flag == "on") {
    for (long bt : threads > 1 ? std::vector<long>{1, threads} : std::vector<long>{1})
      peers.push_back({folder / "bench_ops_torch", "libtorch", bt, &torch});
    peers.push_back({folder / "bench_ops_dnnl", "oneDNN", 1, &dnnl});
    std::erase_if(peers, [](const PeerRun& p) {
      if (std::filesystem::exists(p.twin)) return false;
      std::printf("# no %s twin: %s was not built\n", p.library, p.twin.c_str());
      return true;
    });
  }
  std::vector<std::pair<std::string, double>> ours;  // each case's fastest, in order
  for (size_t run = 0; run < std::max<size_t>(peers.size(), 1); ++run) {
    std::printf("# minidl threads=%ld, run %zu\n", threads, run + 1);
    bench::print_load_note();
    size_t i = 0;
    run_cases(min_time, only, [&](const std::string& name, double gflops) {
      if (run == 0) ours.emplace_back(name, gflops);
      ours[i].second = std::max(ours[i].second, gflops);
      ++i;
      std::printf(peers.empty() ? "%s %.3f\n" : "#   %s %.3f\n", name.c_str(), gflops);
      std::fflush(stdout);
    });
    if (run < peers.size() && !run_peer(peers[run], threads, flags.str("min-time"), only))
      return 1;
  }
  if (peers.empty()) return 0;

  std::printf("\n%-12s %16s %18s %16s %16s %14s\n", "case", "minidl GFLOP/s", "libtorch GFLOP/s",
              "oneDNN GFLOP/s", "minidl/best", "libtorch BLAS");
  auto cell = [](const Figures& f, const std::string& name) {
    auto it = f.find(name);
    return it == f.end() || it->second.first <= 0 ? std::string("-")
                                                   : std::to_string(it->second.first).substr(0, 7);
  };
  for (const auto& [name, gflops] : ours) {
    double best = 0;
    for (const Figures* f : {&torch, &dnnl})
      if (f->count(name)) best = std::max(best, f->at(name).first);
    const std::string blas =
        torch.count(name) ? "OPENBLAS=" + std::to_string(torch.at(name).second) : "-";
    std::printf("%-12s %16.2f %18s %16s %16s %14s\n", name.c_str(), gflops,
                cell(torch, name).c_str(), cell(dnnl, name).c_str(),
                best > 0 ? std::to_string(gflops / best).substr(0, 4).c_str() : "-", blas.c_str());
  }
  return 0;
}
