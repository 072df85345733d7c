// Training throughput of minidl against its libtorch twin (bench_train_torch):
// the same model, batch, optimizer (Momentum 0.9, lr 0.01), cross entropy and
// synthetic data, on the same thread count, each in its best configuration;
// or one of the model zoo's (bench/zoo_models.h: resnet, dcgan, char_lstm,
// tiny_gpt), each with its example's optimizer and step, or of a user's
// models (bench/user_models.h: vgg, mobilenet, unet, encoder, gru), each on
// one fixed random batch (one rank, --parallel none).
//
//   bench_train [--model M] [--batch B] [--steps N]   (M: bench_common.h's kTrainModels)
//               [--warmup W] [--threads T|auto] [--load K] [--twin on|off]
//               [--parallel none|auto|explicit|both] [--bucket-kb K] [--device cpu|cuda]
//               [--graph off|on|both] [--conv auto|im2col|cudnn] [--gemm auto|openblas]
//
// --threads auto leaves each library's default (minidl: follow the load, at
// most one thread per core; libtorch: one per core), printing minidl's count
// at the end as `threads_end`. --load K starts K busy processes (spin loops)
// before the run and stops them after the twin's, so both train beside them.
//
// --batch, --steps and --warmup default to the model's (bench_common.h's
// kTrainModels: resnet batch 128, dcgan 64, char_lstm 20, tiny_gpt 16).
// --device cuda trains on the GPU (the timed chunks end with a device
// synchronisation; the ceiling is then a 4096^3 sgemm there; no twin).
// Prints minidl's `samples/s=R` (the text models: `sequences/s=R`),
// `peak_rss_mb=M` (and on a GPU `peak_device_mb`, the live tensors' peak after
// the warm-up, and `graph_pool_mb`, what graph replays held) and
// `gflops=G` (samples/s times the model's FLOPs per training sample), then,
// in a single process,
// `sgemm_ceiling_gflops=S` (a 2048^3 matmul on the same threads, measured right
// after training), `ceiling_share=G/S`, and `floor_step_us` (a step's FLOPs
// at that rate) beside `step_us`; then runs the twin after it (never
// beside it) and prints its figures and the ratios. Under mpirun
// with --parallel auto (DataParallel's overlapped allreduce during backward) or
// explicit (scale_loss + apply_collective_grads after backward), every rank
// trains on its own batch B and samples/s counts all ranks' samples;
// --parallel both times the two styles in turns, chunk by chunk, and prints
// each (samples/s is then the automatic one's) and auto/explicit, the median
// over chunks of the ratio of the two chunks timed side by side;
// --bucket-kb sets DataParallel's bucket size (default 25 MiB).
// --graph on (CUDA only, one rank) captures the step as a CUDA graph
// (parallel::GraphedStep; a zoo model's whole step, its optimizers' included,
// with cuda::Graph) after the warm-up's first step and replays it, and
// prints `kernels_per_step=K`, the launches an eager step makes one by one;
// --graph both times eager and captured steps in turns, as --parallel both
// does, and prints each and graph/eager.
// --conv auto|im2col|direct|cudnn (CUDA): how convolutions run (cuda::set_conv_algorithm);
// each choice made is printed as a `conv_choice:` line.
// --gemm openblas (CPU) keeps minidl's products on OpenBLAS (cpu::set_dnnl_gemm;
// auto: oneDNN's sgemm where it measured faster).
// --tf32 on (CUDA): float32 GEMMs and convolutions may use TF32 tensor cores
// (cuda::set_allow_tf32; off by default), for bench_train_torch.py --tf32.
#include <cstdio>
#include <filesystem>
#include <string>

#include "../examples/models.h"
#include "bench_common.h"
#include "framework/backend/backend.h"
#include "framework/backend/cpu/cpu.h"  // set_dnnl_gemm
#include "framework/cuda.h"
#include "user_models.h"

using namespace minidl;

namespace {

// Samples/s of each style ("none", "auto", "explicit" or "graph") in each of
// about ten chunks: rates[style][chunk], step(style) a training step of
// `batch` samples a rank. Several styles take turns chunk by chunk, in
// reversed order every other chunk, so a slow spell of the machine falls on
// all of them alike.
template <class Step>
std::vector<std::vector<double>> time_chunks(const std::vector<std::string>& styles, Step step,
                                             int64_t batch, Device device, long warmup,
                                             long steps) {
  const Allocator& alloc = allocator(device);  // its synchronize() ends a timed chunk
  for (const std::string& style : styles)
    for (long i = 0; i < warmup; ++i) step(style);
  alloc.synchronize();
  reset_peak_memory(device);  // the steady state's peak, as the Python twin's
  const long chunk = std::max(1L, steps / 10);
  std::vector<std::vector<double>> rates(styles.size());
  for (long done = 0; done < steps; done += chunk) {
    const long n = std::min(chunk, steps - done);
    for (size_t k = 0; k < styles.size(); ++k) {
      const size_t s = (done / chunk) % 2 ? styles.size() - 1 - k : k;
      parallel::barrier();
      const auto t0 = bench::Clock::now();
      for (long i = 0; i < n; ++i) step(styles[s]);
      alloc.synchronize();
      parallel::barrier();
      rates[s].push_back(n * static_cast<double>(batch) * parallel::world_size() /
                         bench::seconds_since(t0));
    }
  }
  return rates;
}

// LeNet-5 or the MLP with Momentum (lr 0.01, 0.9) on cross entropy, in each style.
std::vector<std::vector<double>> train(nn::Cell& net, const Tensor& x, const Tensor& labels,
                                       long warmup, long steps,
                                       const std::vector<std::string>& styles, size_t bucket_bytes,
                                       int64_t* kernels_per_step) {
  optim::Momentum opt(net.trainable_params(), /*lr=*/0.01, /*momentum=*/0.9);
  nn::CrossEntropyLoss loss_fn;
  std::unique_ptr<parallel::DataParallel> dp;
  if (styles[0] == "auto" || styles[0] == "explicit")
    dp = std::make_unique<parallel::DataParallel>(
        net, parallel::DataParallelOptions{.bucket_bytes = bucket_bytes});
  std::unique_ptr<parallel::GraphedStep> graphed;
  const bool graph = styles.back() == "graph";
  if (graph) graphed = std::make_unique<parallel::GraphedStep>(net, loss_fn, opt);
  auto step = [&](const std::string& style) {
    if (style == "graph") return (void)(*graphed)(x, labels);
    opt.zero_grad(/*set_to_none=*/!graph);  // eager steps beside a graph keep its gradients
    if (style == "explicit") {
      dp->scale_loss(loss_fn((*dp)(x), labels)).backward();
      dp->apply_collective_grads();
    } else {
      loss_fn(dp ? (*dp)(x) : net(x), labels).backward();
    }
    opt.step();
  };
  auto rates = time_chunks(styles, step, x.size(0), x.device(), warmup, steps);
  if (graph) *kernels_per_step = graphed->kernels_per_step();
  return rates;
}

// The median over chunks of rates[num][c] / rates[den][c]: two styles, each
// chunk of one timed beside the same chunk of the other.
double paired_ratio(const std::vector<std::vector<double>>& rates, size_t num, size_t den) {
  std::vector<double> ratios;
  for (size_t c = 0; c < rates[num].size(); ++c) ratios.push_back(rates[num][c] / rates[den][c]);
  return bench::median(ratios);
}

// Multiply-adds times two per training sample (an image; for the text models
// a sequence): forward, and backward's input and weight gradients (each as
// many as the forward's), except the input gradient of the first layer where
// its input is data (it needs none). Only the GEMM-shaped work counts:
// convolutions, transposed convolutions, dense layers, LSTM gate GEMMs and
// attention's two batched matmuls; normalisation, activations, pooling,
// embeddings, losses and optimizer updates are left out (memory-bound work,
// not measured here), so the figure understates the work done, the same for
// both libraries.
//   conv(OC, C, K, L): a KxK convolution C -> OC at L output pixels; a
//   transposed one costs the same with L its *input* pixels.
//   LeNet-5: conv1 0.47M (forward + weight gradient), conv2 1.44M, the dense
//   layers 0.35M: 2.26M in all. The MLP: 3.21M.
//   resnet: forward 18.7M (stage1's two 3x3 at 28x28 7.2M, stage2 5.6M,
//   stage3 5.6M, stem 0.23M), times 3 less the stem's input gradient: 55.8M.
//   dcgan, per real image (a step also makes one fake): the generator
//   (forward 23.5M) runs forward once and backward once (its weight and input
//   gradients but conv1's, the noise's); the discriminator (forward 22.7M)
//   runs three times with weight gradients each (real, fake detached, and
//   the generator's pass, whose input gradient goes on to the generator), the
//   first two without conv1's input gradient: 3 G + 9 D - 2 d1 - g1 = 273M.
//   char_lstm, per sequence of T = 35 characters: per character the LSTM's
//   gate GEMMs 2 * 4H * (I + H) (layer 0: I = 64, layer 1: I = H = 128) and
//   the decoder 128 -> 62, all three times (the embedding takes an input
//   gradient): 3 * 35 * 0.475M = 49.8M.
//   tiny_gpt, per sequence of T = 64 tokens, C = 64: per token and layer
//   c_attn 2*C*3C, scores q k^T and att v 2 * 2*T*C (all T x T counted, the
//   masked half too: PyTorch's hand-written attention computes it), c_proj
//   2*C*C, the MLP 2 * 2*C*4C; lm_head 2*C*62; all three times: 45.6M.
double flops_per_sample(const std::string& model) {
  auto conv = [](double oc, double c, double k, double l) { return 2 * oc * c * k * k * l; };
  auto dense = [](double in, double out) { return 2 * in * out; };
  if (model == "lenet")
    return 2 * conv(6, 1, 5, 28 * 28) + 3 * conv(16, 6, 5, 10 * 10) +
           3 * (dense(400, 120) + dense(120, 84) + dense(84, 10));
  if (model == "mlp") return 2 * dense(784, 512) + 3 * (dense(512, 512) + dense(512, 10));
  if (model == "resnet") {
    const double stem = conv(16, 1, 3, 28 * 28);
    const double stage1 = 2 * conv(16, 16, 3, 28 * 28);
    const double stage2 =
        conv(32, 16, 3, 14 * 14) + conv(32, 32, 3, 14 * 14) + conv(32, 16, 1, 14 * 14);
    const double stage3 = conv(64, 32, 3, 7 * 7) + conv(64, 64, 3, 7 * 7) + conv(64, 32, 1, 7 * 7);
    return 3 * (stem + stage1 + stage2 + stage3 + dense(64, 10)) - stem;
  }
  if (model == "dcgan") {
    const double g1 = conv(256, 100, 4, 1), d1 = conv(64, 1, 4, 14 * 14);
    const double g =
        g1 + conv(128, 256, 3, 4 * 4) + conv(64, 128, 4, 7 * 7) + conv(1, 64, 4, 14 * 14);
    const double d = d1 + conv(128, 64, 4, 7 * 7) + conv(256, 128, 4, 3 * 3) + conv(1, 256, 3, 1);
    return 3 * g - g1 + 9 * d - 2 * d1;
  }
  if (model == "char_lstm") {
    const double per_char = dense(64 + 128, 4 * 128) + dense(128 + 128, 4 * 128) + dense(128, 62);
    return 3 * 35 * per_char;
  }
  if (model == "tiny_gpt") {
    const double t = 64, c = 64;
    const double layer = dense(c, 3 * c) + 2 * (2 * t * c) + dense(c, c) + 2 * dense(c, 4 * c);
    return 3 * t * (2 * layer + dense(c, 62));
  }
  // user_models.h's: depthwise layers count 2 * C * K^2 * L (conv with one
  // input channel); each step three passes less the first layer's input
  // gradient (the embeddings' is a gather's, no FLOPs)
  if (model == "vgg") {
    const double c1 = conv(32, 3, 3, 32 * 32);
    const double rest = conv(32, 32, 3, 32 * 32) + conv(64, 32, 3, 16 * 16) +
                        conv(64, 64, 3, 16 * 16) + conv(128, 64, 3, 8 * 8) + dense(2048, 256) +
                        dense(256, 10);
    return 2 * c1 + 3 * rest;
  }
  if (model == "mobilenet") {
    const double c0 = conv(32, 3, 3, 16 * 16);
    const double rest = conv(32, 1, 3, 16 * 16) + conv(64, 32, 1, 16 * 16) + conv(64, 1, 3, 8 * 8) +
                        conv(128, 64, 1, 8 * 8) + conv(128, 1, 3, 8 * 8) +
                        conv(128, 128, 1, 8 * 8) + dense(128, 10);
    return 2 * c0 + 3 * rest;
  }
  if (model == "unet") {
    const double in = conv(32, 3, 3, 32 * 32);
    const double rest = conv(64, 32, 3, 16 * 16) + conv(64, 64, 3, 16 * 16) +
                        conv(32, 96, 3, 32 * 32) + conv(3, 32, 1, 32 * 32);
    return 2 * in + 3 * rest;
  }
  if (model == "encoder") {  // per token and layer as tiny_gpt's, T = 128, E = 128
    const double t = 128, e = 128;
    const double layer = dense(e, 3 * e) + 2 * (2 * t * e) + dense(e, e) + 2 * dense(e, 4 * e);
    return 3 * (t * 2 * layer + dense(e, 2));
  }
  return 3 * (64 * (dense(64, 3 * 128) + dense(128, 3 * 128)) + dense(128, 4));  // gru
}

// GFLOP/s of a 2048^3 sgemm through minidl's matmul (OpenBLAS on minidl's
// threads; on CUDA 4096^3 through cuBLAS), the median of 5 calls: this
// machine's ceiling for GEMM-bound work.
double sgemm_ceiling_gflops(Device d) {
  NoGradGuard no_grad;
  const int n = d == Device::CPU ? 2048 : 4096;
  Tensor a = Tensor::randn({n, n}).to(d), b = Tensor::randn({n, n}).to(d);
  const Allocator& k = allocator(d);
  const double s = bench::median_seconds([&] { k.synchronize(); }, [&] {
    Tensor c = matmul(a, b);
    k.synchronize();
  }, 5, 0);
  return 2.0 * n * n * n / s * 1e-9;
}

// Runs a command and returns the value of its `key=value` line (or -1).
std::map<std::string, double> run_twin(const std::string& command) {
  std::map<std::string, double> out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  char line[512];
  while (std::fgets(line, sizeof line, pipe)) {
    std::string text = line;
    auto eq = text.find('=');
    if (text[0] != '#' && eq != std::string::npos && text.find(' ') == std::string::npos)
      out[text.substr(0, eq)] = std::atof(text.c_str() + eq + 1);
    else if (text[0] == '#')
      std::printf("%s", text.c_str());
  }
  if (pclose(pipe) != 0) out.clear();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = std::string("[--model ") + bench::kTrainModelNames +
                            "] [--batch B] [--steps N] [--warmup W] [--threads T|auto] "
                            "[--load K] [--twin on|off] [--parallel none|auto|explicit|both] "
                            "[--bucket-kb K] [--device cpu|cuda] [--graph off|on|both] "
                            "[--conv auto|im2col|cudnn] [--gemm auto|openblas]";
  bench::Flags flags(argc, argv,
                     {{"model", "lenet"},
                      {"batch", "0"},
                      {"steps", "0"},
                      {"warmup", "-1"},
                      {"threads", "1"},
                      {"load", "0"},
                      {"twin", "on"},
                      {"parallel", "none"},
                      {"bucket-kb", "25600"},
                      {"device", "cpu"},
                      {"graph", "off"},
                      {"conv", "auto"},
                      {"tf32", "off"},
                      {"gemm", "auto"}},
                     usage.c_str());
  const bench::BusyLoad load(static_cast<int>(flags.integer("load")), 1800);
  parallel::init();
  const std::string mode = flags.str("parallel");
  if (mode != "none" && mode != "auto" && mode != "explicit" && mode != "both") {
    std::fprintf(stderr, "bench_train: --parallel expects none, auto, explicit or both, got %s\n",
                 mode.c_str());
    return 2;
  }
  const std::string graph = flags.str("graph");
  if ((graph != "off" && graph != "on" && graph != "both") || (graph != "off" && mode != "none")) {
    std::fprintf(stderr, "bench_train: --graph expects off, on or both (with --parallel none), "
                 "got %s\n", graph.c_str());
    return 2;
  }
  const std::vector<std::string> styles =
      graph == "on"     ? std::vector<std::string>{"graph"}
      : graph == "both" ? std::vector<std::string>{"none", "graph"}
      : mode == "both"  ? std::vector<std::string>{"auto", "explicit"}
                        : std::vector<std::string>{mode};
  const std::string model = flags.str("model");
  if (!bench::kTrainModels.count(model)) {
    std::fprintf(stderr, "bench_train: --model expects %s, got %s\n", bench::kTrainModelNames,
                 model.c_str());
    return 2;
  }
  const bench::TrainModel defaults = bench::kTrainModels.at(model);
  const std::string unit = defaults.unit;  // samples/s or sequences/s
  const bool zoo_model = model != "lenet" && model != "mlp";
  auto or_default = [&](const char* flag, long fallback, long unset) {
    return flags.integer(flag) == unset ? fallback : flags.integer(flag);
  };
  const long batch = or_default("batch", defaults.batch, 0);
  const long steps = or_default("steps", defaults.steps, 0);
  const long warmup = or_default("warmup", defaults.warmup, -1);
  const int threads = bench::threads_flag(flags);  // 0: auto
  const size_t bucket_bytes = static_cast<size_t>(flags.integer("bucket-kb")) << 10;
  if (batch < 1 || steps < 1 || warmup < 0) {
    std::fprintf(stderr, "bench_train: expected positive --batch and --steps and --warmup >= 0\n");
    return 2;
  }
  if (zoo_model && (mode != "none" || parallel::world_size() > 1)) {
    std::fprintf(stderr, "bench_train: --model %s runs on one rank with --parallel none\n",
                 model.c_str());
    return 2;
  }
  const std::string device_flag = flags.str("device");
  if (device_flag != "cpu" && (device_flag != "cuda" || !device_available(Device::CUDA))) {
    std::fprintf(stderr, "bench_train: --device expects cpu or cuda (with a GPU present), got %s\n",
                 device_flag.c_str());
    return 2;
  }
  const Device device = device_flag == "cpu" ? Device::CPU : Device::CUDA;
  const std::string conv = flags.str("conv");
  if (conv != "auto" && conv != "im2col" && conv != "direct" && conv != "cudnn") {
    std::fprintf(stderr, "bench_train: --conv expects auto, im2col, direct or cudnn, got %s\n",
                 conv.c_str());
    return 2;
  }
  cuda::set_conv_algorithm(conv == "auto"     ? cuda::ConvAlgorithm::Auto
                           : conv == "im2col" ? cuda::ConvAlgorithm::Im2col
                           : conv == "direct" ? cuda::ConvAlgorithm::Direct
                                              : cuda::ConvAlgorithm::Cudnn);
  const std::string gemm = flags.str("gemm");
  if (gemm != "auto" && gemm != "openblas") {
    std::fprintf(stderr, "bench_train: --gemm expects auto or openblas, got %s\n", gemm.c_str());
    return 2;
  }
  cpu::set_dnnl_gemm(gemm == "auto");
  const std::string tf32 = flags.str("tf32");
  if (tf32 != "on" && tf32 != "off") {
    std::fprintf(stderr, "bench_train: --tf32 expects on or off, got %s\n", tf32.c_str());
    return 2;
  }
  cuda::set_allow_tf32(tf32 == "on");
  if (graph != "off" && (device == Device::CPU || parallel::world_size() > 1)) {
    std::fprintf(stderr, "bench_train: --graph needs --device cuda and one rank\n");
    return 2;
  }
  if (threads > 0) set_num_threads(threads);
  const std::string threads_name = threads > 0 ? std::to_string(threads) : "auto";
  manual_seed(0);
  const bool root = parallel::rank() == 0;
  if (root) {
    std::printf(
        "# minidl model=%s batch=%ld steps=%ld warmup=%ld threads=%s ranks=%d parallel=%s "
        "device=%s tf32=%s\n",
        model.c_str(), batch, steps, warmup, threads_name.c_str(), parallel::world_size(), mode.c_str(),
        device_name(device), tf32.c_str());
    bench::print_load_note();
  }
  Tensor x = Tensor::randn({batch, 1, 28, 28}).to(device);
  Tensor labels = Tensor::randint(0, 10, {batch}).to(device);
  std::vector<std::vector<double>> rates;
  int64_t kernels_per_step = 0;
  if (zoo_model) {
    std::unique_ptr<zoo::Workload> work = zoo::make_workload(model, batch, device);
    if (!work) work = zoo::make_user_workload(model, batch, device);
    int64_t count = 0;
    for (const Tensor& p : work->params) count += p.numel();
    std::printf("# parameters %lld\n", static_cast<long long>(count));
    work->set_to_none = styles.back() != "graph";  // eager steps beside a graph keep its gradients
    const double first = work->step().item();     // the first warm-up step, as the twin's
    Tensor last;  // detached, so that each step's graph goes with it
    cuda::Graph captured;
    Tensor graph_loss;  // the graph's output, made before its capture
    auto step = [&](const std::string& style) {
      if (style != "graph") return (void)(last = work->step().detach());
      if (!captured.captured()) {
        graph_loss = Tensor::empty({}, kFloat32, device);
        captured.capture([&] { graph_loss.copy_(work->step()); });  // replayed below
      } else {
        captured.feed([&] { work->feed(); });
      }
      captured.replay();
    };
    rates = time_chunks(styles, step, batch, device, std::max(0L, warmup - 1), steps);
    kernels_per_step = captured.kernel_launches();
    std::printf("# loss first=%.4f last=%.4f\n", first,
                (styles.back() == "graph" ? graph_loss : last).item());
  } else if (model == "lenet") {
    example::LeNet5 net;
    net.to(device);
    rates = train(net, x, labels, warmup, steps, styles, bucket_bytes, &kernels_per_step);
  } else {
    example::MLP net;
    net.to(device);
    rates = train(net, x, labels, warmup, steps, styles, bucket_bytes, &kernels_per_step);
  }
  const double ours = bench::median(rates[0]), our_rss = bench::peak_rss_mb();
  if (!root) return 0;
  std::printf("%s=%.1f\npeak_rss_mb=%.1f\nthreads_end=%d\n", unit.c_str(), ours, our_rss,
              num_threads());
  if (device != Device::CPU) {  // tensors' bytes at their peak (the allocator's pool holds more)
    const MemoryStats used = memory_stats(device);
    std::printf("peak_device_mb=%.1f\ngraph_pool_mb=%.1f\n", used.peak_bytes / 1048576.0,
                used.graph_bytes / 1048576.0);
  }
  // Achieved GFLOP/s against the sgemm ceiling measured now, on the same threads
  // (one process; under mpirun the ranks share the cores, so no ceiling there).
  const double gflops = ours * flops_per_sample(model) * 1e-9;
  std::printf("gflops=%.1f\n", gflops);
  if (parallel::world_size() == 1) {
    const double ceiling = sgemm_ceiling_gflops(device);
    std::printf("sgemm_ceiling_gflops=%.1f\nceiling_share=%.3f\n", ceiling, gflops / ceiling);
    // The floor: a step's FLOPs at the ceiling's rate, against the step's time
    std::printf("floor_step_us=%.2f\nstep_us=%.2f\n",
                flops_per_sample(model) * batch / (ceiling * 1e9) * 1e6, batch / ours * 1e6);
  }
  if (kernels_per_step) std::printf("kernels_per_step=%ld\n", static_cast<long>(kernels_per_step));
  for (const std::string& line : cuda::conv_choices()) std::printf("conv_choice: %s\n", line.c_str());
  if (graph == "both")
    std::printf("samples/s_eager=%.1f\nsamples/s_graph=%.1f\ngraph/eager=%.3f\n", ours,
                bench::median(rates[1]), paired_ratio(rates, 1, 0));
  if (mode == "both")
    std::printf("samples/s_auto=%.1f\nsamples/s_explicit=%.1f\nauto/explicit=%.3f\n", ours,
                bench::median(rates[1]), paired_ratio(rates, 0, 1));
  // the twin compares single-process runs on the CPU
  if (parallel::world_size() > 1 || device != Device::CPU) return 0;

  const auto twin = std::filesystem::read_symlink("/proc/self/exe").parent_path() / "bench_train_torch";
  if (flags.str("twin") != "on" || !std::filesystem::exists(twin)) {
    std::printf("# no libtorch twin run\n");
    return 0;
  }
  // libtorch at its best here: its pool at T threads, OpenBLAS at 1 (NOTES.md).
  std::string command = "OPENBLAS_NUM_THREADS=1 " + twin.string() + " --model " + model +
                        " --batch " + std::to_string(batch) + " --steps " + std::to_string(steps) +
                        " --warmup " + std::to_string(warmup) + " --threads " + threads_name;
  auto theirs = run_twin(command);
  if (!theirs.count(unit)) {
    std::printf("# the libtorch twin failed: %s\n", command.c_str());
    return 1;
  }
  const double their_rate = theirs[unit];
  std::printf("libtorch_%s=%.1f\nlibtorch_peak_rss_mb=%.1f\nlibtorch_gflops=%.1f\n", unit.c_str(),
              their_rate, theirs["peak_rss_mb"], their_rate * flops_per_sample(model) * 1e-9);
  std::printf(
      "%s batch %ld threads %s: minidl %.0f %s, libtorch %.0f, ratio %.2fx; "
      "peak RSS %.0f MB vs %.0f MB (%.2f)\n",
      model.c_str(), batch, threads_name.c_str(), ours, unit.c_str(), their_rate, ours / their_rate, our_rss,
      theirs["peak_rss_mb"], our_rss / theirs["peak_rss_mb"]);
}
