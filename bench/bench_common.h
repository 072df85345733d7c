// Shared by the minidl benchmarks and their libtorch twins: the case list,
// flag parsing, a median timer, peak RSS and running a twin. Standard
// library and POSIX only, so a twin can include it without linking minidl.
#pragma once
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace bench {

// ---- the cases bench_ops and bench_ops_torch both run ----

inline const std::vector<int> kMatmulSizes = {64, 256, 1024};  // square n x n x n

// A convolution: x [N, C, H, W], w [OC, C/groups, K, K], bias [OC], padding
// and stride on both dims.
struct ConvCase {
  const char* name;
  int N, C, H, W, OC, K, pad, stride, groups = 1;
  int OH() const { return (H + 2 * pad - K) / stride + 1; }
  int OW() const { return (W + 2 * pad - K) / stride + 1; }
  // Forward multiply-adds times two; the backward pass (input and weight
  // gradients) costs twice this.
  double forward_flops() const { return 2.0 * N * OC * OH() * OW() * C / groups * K * K; }
};

// LeNet-5's two; ResNet-8's 3x3 at stride 1 and 2 and its 1x1 projection
// at stride 2 (batch 128, first stages), its last stage's 3x3 at 64
// channels; the DCGAN discriminator's 4x4 stride-2 middle layer and its first
// (1 channel in: its input gradient is the generator's last layer's forward).
// Beyond the zoo, layers other models are made of: a MobileNet block's
// depthwise 3x3 and its pointwise 1x1, a ConvNeXt depthwise 7x7, a ResNet-50
// bottleneck's 1x1 reduction.
inline const std::vector<ConvCase> kConvCases = {
    {"conv1", /*N=*/64, /*C=*/1, /*H=*/28, /*W=*/28, /*OC=*/6, /*K=*/5, /*pad=*/2, /*stride=*/1},
    {"conv2", /*N=*/64, /*C=*/6, /*H=*/14, /*W=*/14, /*OC=*/16, /*K=*/5, /*pad=*/0, /*stride=*/1},
    {"res3x3", /*N=*/128, /*C=*/16, /*H=*/28, /*W=*/28, /*OC=*/16, /*K=*/3, /*pad=*/1, /*stride=*/1},
    {"res3x3s2", /*N=*/128, /*C=*/16, /*H=*/28, /*W=*/28, /*OC=*/32, /*K=*/3, /*pad=*/1, /*stride=*/2},
    {"res1x1s2", /*N=*/128, /*C=*/16, /*H=*/28, /*W=*/28, /*OC=*/32, /*K=*/1, /*pad=*/0, /*stride=*/2},
    {"res3x3c64", /*N=*/128, /*C=*/64, /*H=*/7, /*W=*/7, /*OC=*/64, /*K=*/3, /*pad=*/1, /*stride=*/1},
    {"dc4x4s2", /*N=*/64, /*C=*/64, /*H=*/14, /*W=*/14, /*OC=*/128, /*K=*/4, /*pad=*/1, /*stride=*/2},
    {"dc4x4s2c1", /*N=*/64, /*C=*/1, /*H=*/28, /*W=*/28, /*OC=*/64, /*K=*/4, /*pad=*/1, /*stride=*/2},
    {"dw3x3", /*N=*/64, /*C=*/64, /*H=*/28, /*W=*/28, /*OC=*/64, /*K=*/3, /*pad=*/1, /*stride=*/1, /*groups=*/64},
    {"pw1x1", /*N=*/64, /*C=*/64, /*H=*/28, /*W=*/28, /*OC=*/128, /*K=*/1, /*pad=*/0, /*stride=*/1},
    {"dw7x7", /*N=*/32, /*C=*/96, /*H=*/28, /*W=*/28, /*OC=*/96, /*K=*/7, /*pad=*/3, /*stride=*/1, /*groups=*/96},
    {"bneck1x1", /*N=*/32, /*C=*/256, /*H=*/14, /*W=*/14, /*OC=*/64, /*K=*/1, /*pad=*/0, /*stride=*/1},
};

// linear (x [N, IN] w [OUT, IN]^T + b), forward only: the MLP's fc1 at two batches.
struct LinearCase {
  const char* name;
  int N, IN, OUT;
  double flops() const { return 2.0 * N * IN * OUT; }
};
inline const std::vector<LinearCase> kLinearCases = {
    {"linear_b32", /*N=*/32, /*IN=*/784, /*OUT=*/512},
    {"linear_b256", /*N=*/256, /*IN=*/784, /*OUT=*/512},
};

// ---- batch norm (issue 23) ----
// BatchNorm2d(C) in training mode on x [N, C, H, W]: one forward and one
// backward (input, weight and bias gradients); figures in G elements/s.
struct NormCase {
  const char* name;
  int64_t N, C, H, W;
  double elements() const { return double(N * C * H * W); }
};
inline const std::vector<NormCase> kBatchNormCases = {
    {"bn2d_128x16x28", /*N=*/128, /*C=*/16, /*H=*/28, /*W=*/28},  // ResNet-8's first stage
    {"bn2d_128x32x14", /*N=*/128, /*C=*/32, /*H=*/14, /*W=*/14},  // its second
};

// The text models' pieces, forward and backward timed together (GFLOP/s of
// their products; LayerNorm in G elements/s): LayerNorm over C on x [N, C]
// (tiny GPT's, 16 x 64 tokens), one LSTM cell step on x [B, I] from (h, c)
// [B, H] (char-LSTM's second layer), causal attention on q, k, v [B, heads,
// T, hd] (tiny GPT's).
struct LayerNormCase {
  const char* name;
  int64_t N, C;
  double elements() const { return double(N * C); }
};
inline const std::vector<LayerNormCase> kLayerNormCases = {{"ln_1024x64", 1024, 64}};
struct LstmCase {
  const char* name;
  int64_t B, I, H;
  double flops() const { return 3 * 2.0 * B * 4 * H * (I + H); }  // gates' GEMMs, fwd + bwd
};
inline const std::vector<LstmCase> kLstmCases = {{"lstm_b20h128", 20, 128, 128}};
struct AttentionCase {
  const char* name;
  int64_t B, heads, T, hd;
  double flops() const { return 3 * 4.0 * B * heads * T * T * hd; }  // q k^T and w v, fwd + bwd
};
inline const std::vector<AttentionCase> kAttentionCases = {{"attn_16x4x64", 16, 4, 64, 16}};

// ---- the models bench_train and bench_train_torch both train ----

// A model's defaults: batch, timed steps and warm-up steps (chosen so one run
// takes seconds here), and what its rate counts: images (samples/s) or
// token sequences (sequences/s, the text models).
struct TrainModel {
  long batch, steps, warmup;
  const char* unit;
};
// lenet, mlp; the zoo at issue 23's shapes: resnet (ResNet-8, Fashion-MNIST
// size), dcgan (width 64, MNIST size), char_lstm (2 x 128, bptt 35) and
// tiny_gpt (2 layers x 4 heads x 64, 64 tokens); a user's models
// (user_models.h): vgg, mobilenet, unet (CIFAR size), encoder (128 tokens), gru
// (64 tokens).
inline const std::map<std::string, TrainModel> kTrainModels = {
    {"lenet", {64, 200, 10, "samples/s"}},      {"mlp", {64, 200, 10, "samples/s"}},
    {"resnet", {128, 30, 3, "samples/s"}},      {"dcgan", {64, 10, 2, "samples/s"}},
    {"char_lstm", {20, 100, 5, "sequences/s"}}, {"tiny_gpt", {16, 100, 5, "sequences/s"}},
    {"vgg", {64, 20, 3, "samples/s"}},          {"mobilenet", {64, 50, 5, "samples/s"}},
    {"unet", {16, 30, 3, "samples/s"}},         {"encoder", {8, 40, 4, "sequences/s"}},
    {"gru", {32, 100, 5, "sequences/s"}},
};
inline const char* kTrainModelNames =
    "lenet|mlp|resnet|dcgan|char_lstm|tiny_gpt|vgg|mobilenet|unet|encoder|gru";

// ---- flags: `--name value` pairs with defaults; anything else is an error ----

class Flags {
 public:
  Flags(int argc, char** argv, std::map<std::string, std::string> defaults, const char* usage)
      : values_(std::move(defaults)) {
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg == "-h" || arg == "--help") {
        std::printf("usage: %s %s\n", argv[0], usage);
        std::exit(0);
      }
      if (arg.rfind("--", 0) != 0 || !values_.count(arg.substr(2)) || i + 1 == argc) {
        std::fprintf(stderr, "%s: unknown flag or missing value at '%s'\nusage: %s %s\n", argv[0],
                     arg.c_str(), argv[0], usage);
        std::exit(2);
      }
      values_[arg.substr(2)] = argv[++i];
    }
  }
  const std::string& str(const std::string& name) const { return values_.at(name); }
  double real(const std::string& name) const {
    const std::string& s = str(name);
    char* end = nullptr;
    const double value = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0') {
      std::fprintf(stderr, "--%s: expected a number, got '%s'\n", name.c_str(), s.c_str());
      std::exit(2);
    }
    return value;
  }
  long integer(const std::string& name) const {
    const double value = real(name);
    if (value != static_cast<long>(value)) {
      std::fprintf(stderr, "--%s: expected an integer, got '%s'\n", name.c_str(), str(name).c_str());
      std::exit(2);
    }
    return static_cast<long>(value);
  }

 private:
  std::map<std::string, std::string> values_;
};

// ---- timing ----

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median seconds of body(): untimed setup() before every run, three warm-up
// runs, then at least min_reps timed runs and at least min_time seconds of
// them (at most 100000 runs).
template <class Setup, class Body>
double median_seconds(Setup setup, Body body, int min_reps = 21, double min_time = 0.3) {
  for (int i = 0; i < 3; ++i) {
    setup();
    body();
  }
  std::vector<double> times;
  double total = 0;
  while ((static_cast<int>(times.size()) < min_reps || total < min_time) && times.size() < 100000) {
    setup();
    const auto t0 = Clock::now();
    body();
    times.push_back(seconds_since(t0));
    total += times.back();
  }
  return median(times);
}

// ---- environment ----

// Comment lines for the output: the 1-minute load average and the CPU count,
// since figures taken beside other work are noisy (and with OpenMP's default
// spin-waiting, multi-threaded figures can collapse), and OPENBLAS_CORETYPE
// when set, since it picks OpenBLAS's kernels (Haswell = AVX2 only).
inline void print_load_note() {
  double load[1] = {0};
  if (getloadavg(load, 1) == 1)
    std::printf("# load average %.2f on %ld CPUs at start\n", load[0], sysconf(_SC_NPROCESSORS_ONLN));
  if (const char* core = std::getenv("OPENBLAS_CORETYPE"); core != nullptr && *core != '\0')
    std::printf("# OPENBLAS_CORETYPE=%s: OpenBLAS kernels chosen by the environment\n", core);
}

// --threads T or auto; auto (returned as 0) leaves the library's own default:
// minidl follows the load below one thread per core, libtorch takes one per core.
inline int threads_flag(const Flags& flags) {
  if (flags.str("threads") == "auto") return 0;
  const long t = flags.integer("threads");
  if (t < 1) {
    std::fprintf(stderr, "--threads: expected auto or a count >= 1, got %ld\n", t);
    std::exit(2);
  }
  return static_cast<int>(t);
}

// --load K: K processes that each keep a core busy (a spin loop), started
// here and killed when this object goes; each also ends with its parent or
// after `limit_s` seconds, so none outlives the benchmark.
class BusyLoad {
 public:
  BusyLoad(int k, unsigned limit_s) {
    for (int i = 0; i < k; ++i) {
      const pid_t pid = fork();
      if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        alarm(limit_s);
        for (;;) __asm__ volatile("");
      }
      if (pid > 0) pids_.push_back(pid);
    }
    if (k > 0) std::printf("# load: %d busy processes beside this one\n", k);
  }
  ~BusyLoad() {
    for (pid_t pid : pids_) kill(pid, SIGKILL);
    for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
  }
  BusyLoad(const BusyLoad&) = delete;
  BusyLoad& operator=(const BusyLoad&) = delete;

 private:
  std::vector<pid_t> pids_;
};

// Peak resident set size of this process in MiB (Linux reports KiB).
inline double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

// Libraries such as OpenBLAS read their environment when they are loaded,
// before main(); a setenv() in main() comes too late. So when `name` is unset,
// set it and re-execute this program (same arguments); if that fails, go on.
inline void reexec_with_env_default(char** argv, const char* name, const char* value) {
  if (std::getenv(name) != nullptr) return;
  setenv(name, value, 1);
  execv("/proc/self/exe", argv);
  std::fprintf(stderr, "warning: could not re-execute with %s=%s; continuing\n", name, value);
}

// ---- twins: another program's `name value` lines ----

// Runs the twin and reads its `name value` lines; '#' lines are kept as notes.
// Returns false (and no figures) when it cannot be run or fails.
inline bool run_twin(const std::string& command,
                     std::vector<std::pair<std::string, double>>& figures,
                     std::vector<std::string>& notes) {
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return false;
  char line[512];
  while (std::fgets(line, sizeof line, pipe)) {
    std::string text = line;
    if (!text.empty() && text.back() == '\n') text.pop_back();
    char name[256];
    double value = 0;
    if (!text.empty() && text[0] == '#')
      notes.push_back(text);
    else if (std::sscanf(text.c_str(), "%255s %lf", name, &value) == 2)
      figures.emplace_back(name, value);
  }
  return pclose(pipe) == 0;
}

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

}  // namespace bench
