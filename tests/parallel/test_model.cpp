// Model.train / eval and the callbacks: an end-to-end LeNet run on a small
// real subset (Fashion-MNIST from Debian's dataset-fashion-mnist, or MNIST
// when present), the exact LossMonitor format, checkpoints and history files;
// under mpirun, data-parallel Model training matches one rank on the full batch.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <minidl/minidl.h>
#include <sstream>

#include "../../examples/models.h"

using namespace minidl;
namespace fs = std::filesystem;

namespace {

// Runs f with stdout redirected to a file and returns what it printed.
template <class F>
std::string capture_stdout(F f) {
  std::fflush(stdout);
  std::string path = cat("/tmp/minidl_model_stdout_", getpid());
  FILE* saved = std::freopen(path.c_str(), "w", stdout);
  REQUIRE(saved != nullptr);
  f();
  std::fflush(stdout);
  std::freopen("/dev/tty", "w", stdout) || std::freopen("/dev/null", "w", stdout);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  fs::remove(path);
  return ss.str();
}

std::string real_data_dir() {
  if (fs::exists(data::default_mnist_dir() + "/train-images-idx3-ubyte.gz")) return data::default_mnist_dir();
  if (fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"))
    return "/usr/share/datasets/fashion-mnist";
  return "";
}

// A tiny synthetic set: class = which quarter of the 4 features is largest.
data::Dataset toy(int64_t n, uint64_t seed) {
  Generator g(seed);
  Tensor x = Tensor::empty({n, 4}), y = Tensor::empty({n}, kInt64);
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    for (int64_t j = 0; j < 4; ++j) {
      x.data<float>()[i * 4 + j] = static_cast<float>(g.normal());
      if (x.data<float>()[i * 4 + j] > x.data<float>()[i * 4 + best]) best = j;
    }
    y.data<int64_t>()[i] = best;
  }
  return data::Dataset(x, y);
}

struct Toy : nn::Cell {
  nn::Dense fc1{4, 16}, fc2{16, 4};
  Toy() { register_cells({{"fc1", fc1}, {"fc2", fc2}}); }
  Tensor forward(const Tensor& x) override { return fc2(relu(fc1(x))); }
};

}  // namespace

TEST_CASE("end to end: LeNet-5 learns a small real subset") {
  if (parallel::world_size() > 1) return;  // one rank is enough
  const std::string dir = real_data_dir();
  if (dir.empty()) {
    MESSAGE("skipped: no MNIST or Fashion-MNIST installed");
    return;
  }
  auto full = data::MnistDataset(dir, data::Usage::Train);
  // The first 2,048 training images and 512 test images, normalised.
  auto subset = [](const data::Dataset& d, int64_t n) {
    return data::Dataset(d.data().slice(0, n).clone(), d.labels().slice(0, n).clone())
        .map(data::Rescale(1.0 / 255, 0))
        .map(data::Normalize(0.1307, 0.3081));
  };
  auto train = subset(full, 2048).shuffle(0).batch(64);
  auto test = subset(data::MnistDataset(dir, data::Usage::Test), 512).batch(256);
  manual_seed(0);
  example::LeNet5 net;
  nn::CrossEntropyLoss loss;
  optim::Momentum opt(net.trainable_params(), 0.01, 0.9);
  Model model(net, loss, opt);
  auto history = std::make_shared<HistoryWriter>("", "");
  auto before = model.eval(test);
  model.train(3, train, {history});
  auto after = model.eval(test);
  const auto& rows = history->rows();
  REQUIRE(rows.size() == 96);
  double first = 0, last = 0;
  for (int i = 0; i < 8; ++i) first += rows[i].loss / 8;
  for (size_t i = rows.size() - 8; i < rows.size(); ++i) last += rows[i].loss / 8;
  MESSAGE(dir, ": loss ", first, " -> ", last, ", test accuracy ", before["accuracy"], " -> ",
          after["accuracy"]);
  CHECK(last < 0.5 * first);
  CHECK(after["accuracy"] > 0.6);  // chance is 0.1
  CHECK(after["loss"] < before["loss"]);
}

TEST_CASE("LossMonitor prints exactly 'epoch: E step: S, loss is L' every n steps") {
  if (parallel::world_size() > 1) return;
  manual_seed(1);
  Toy net;
  nn::CrossEntropyLoss loss;
  optim::SGD opt(net.trainable_params(), 0.1);
  Model model(net, loss, opt);
  auto history = std::make_shared<HistoryWriter>("", "");
  std::string out = capture_stdout([&] { model.train(2, toy(96, 3).batch(16), {LossMonitor(2), history}); });
  // 6 steps per epoch, every second one printed, each loss in shortest round-trip form
  std::istringstream lines(out);
  std::string line;
  std::vector<std::string> got;
  while (std::getline(lines, line)) got.push_back(line);
  REQUIRE(got.size() == 6);
  const auto& rows = history->rows();
  for (int i = 0; i < 6; ++i) {
    const auto& r = rows[2 * i + 1];
    char expect[128];
    std::snprintf(expect, sizeof expect, "epoch: %lld step: %lld, loss is ", (long long)r.epoch,
                  (long long)(r.step - (r.epoch - 1) * 6));
    CHECK(got[i].rfind(expect, 0) == 0);
    CHECK(std::stod(got[i].substr(std::strlen(expect))) == r.loss);  // reads back exactly
  }
  CHECK(got[0].rfind("epoch: 1 step: 2, loss is ", 0) == 0);
  CHECK(got[5].rfind("epoch: 2 step: 6, loss is ", 0) == 0);
}

TEST_CASE("ModelCheckpoint and HistoryWriter write their files; --steps stops early") {
  if (parallel::world_size() > 1) return;
  fs::path dir = fs::temp_directory_path() / cat("minidl_model_", getpid());
  fs::create_directories(dir);
  manual_seed(2);
  Toy net;
  nn::CrossEntropyLoss loss;
  optim::Momentum opt(net.trainable_params(), 0.05, 0.9);
  Model model(net, loss, opt);
  auto ckpt = std::make_shared<ModelCheckpoint>((dir / "toy").string(), /*every_steps=*/4);
  auto hist = std::make_shared<HistoryWriter>((dir / "h.csv").string(), (dir / "h.svg").string());
  int64_t steps = model.train(3, toy(64, 4).batch(16), {ckpt, hist}, {.max_steps = 10});
  CHECK(steps == 10);
  // every 4 global steps (4, 8) and at each epoch's end (epochs 1, 2 end on steps 4, 8; epoch 3 after 2 steps)
  std::vector<std::string> expect = {"toy-1_4.safetensors", "toy-2_4.safetensors", "toy-3_2.safetensors"};
  REQUIRE(ckpt->saved().size() == expect.size());
  for (size_t i = 0; i < expect.size(); ++i) CHECK(fs::path(ckpt->saved()[i]).filename() == expect[i]);
  // the last checkpoint holds the final weights
  Toy restored;
  restored.load(ckpt->saved().back());
  CHECK(restored.fc2.weight.to_float_vector() == net.fc2.weight.to_float_vector());
  for (auto& e : fs::directory_iterator(dir)) CHECK(e.path().string().find(".tmp") == std::string::npos);
  std::ifstream csv(dir / "h.csv");
  std::string header, row;
  std::getline(csv, header);
  CHECK(header == "step,epoch,loss,accuracy");
  int rows = 0;
  while (std::getline(csv, row)) ++rows;
  CHECK(rows == 10);
  std::ifstream svg(dir / "h.svg");
  std::string svg_text((std::istreambuf_iterator<char>(svg)), {});
  CHECK(svg_text.find("<svg") == 0);
  CHECK(svg_text.find("<polyline") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("ModelCheckpoint counts global steps and writes each file once") {
  if (parallel::world_size() > 1) return;
  fs::path dir = fs::temp_directory_path() / cat("minidl_ckpt_", getpid());
  fs::create_directories(dir);
  manual_seed(3);
  Toy net;
  nn::CrossEntropyLoss loss;
  optim::SGD opt(net.trainable_params(), 0.05);
  Model model(net, loss, opt);
  auto ckpt = std::make_shared<ModelCheckpoint>((dir / "toy").string(), /*every_steps=*/4);
  model.train(2, toy(160, 4).batch(16), {ckpt});  // 10 steps per epoch, 20 in all
  // global steps 4, 8 (epoch 1 steps 4, 8), epoch 1's end (10), 12, 16, 20 (epoch 2 steps 2, 6,
  // 10); epoch 2 ends on global step 20, already saved
  const std::vector<std::string> expect = {"toy-1_4.safetensors", "toy-1_8.safetensors",
                                           "toy-1_10.safetensors", "toy-2_2.safetensors",
                                           "toy-2_6.safetensors", "toy-2_10.safetensors"};
  std::vector<std::string> saved, on_disk;
  for (const auto& p : ckpt->saved()) saved.push_back(fs::path(p).filename().string());
  for (auto& e : fs::directory_iterator(dir)) on_disk.push_back(e.path().filename().string());
  CHECK(saved == expect);
  std::sort(on_disk.begin(), on_disk.end());
  std::vector<std::string> sorted = expect;
  std::sort(sorted.begin(), sorted.end());
  CHECK(on_disk == sorted);
  fs::remove_all(dir);
}

TEST_CASE("data-parallel Model: N ranks with batch B/N equal one rank with batch B") {
  const int world = parallel::world_size();
  const int64_t B = 16;
  if (B % world) return;
  auto set = toy(64, 5);
  // the reference: one model, full batch, no communication
  manual_seed(7);
  Toy ref;
  {
    nn::CrossEntropyLoss loss;
    optim::Momentum opt(ref.trainable_params(), 0.05, 0.9);
    for (auto& b : set.batch(B).epoch(0)) {
      opt.zero_grad();
      loss(ref(b.data), b.labels).backward();
      opt.step();
    }
  }
  manual_seed(7);
  Toy net;
  nn::CrossEntropyLoss loss;
  optim::Momentum opt(net.trainable_params(), 0.05, 0.9);
  Model model(net, loss, opt, {.parallel = ParallelMode::DataParallel});
  model.train(1, set.batch(B / world));  // Model shards by rank
  auto a = net.fc1.weight.to_float_vector(), b = ref.fc1.weight.to_float_vector();
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / (std::abs(b[i]) + 1e-6));
  MESSAGE("ranks ", world, ": max relative difference ", worst);
  CHECK(worst <= 1e-5);
}

TEST_CASE("Model::eval: a set split over ranks gives the whole set's figures, as one rank does") {
  const int world = parallel::world_size(), rank = parallel::rank();
  auto set = toy(61, 6);  // 61 = 4 * 15 + 1: the shards of 2 and 4 ranks are padded with repeats
  manual_seed(8);
  Toy net;
  nn::CrossEntropyLoss loss;
  const auto whole = Model(net, loss).eval(set.batch(8));  // on this rank alone, no communication
  Model dp(net, loss, {.parallel = ParallelMode::DataParallel});
  Model plain(net, loss);
  const std::vector<std::pair<std::string, std::map<std::string, double>>> runs = {
      {"DataParallel, sharded by Model", dp.eval(set.batch(8))},
      {"DataParallel, sharded by the caller", dp.eval(set.shard(rank, world).batch(8))},
      {"StandAlone, sharded by the caller", plain.eval(set.shard(rank, world).batch(5))}};
  const double correct = whole.at("accuracy") * 61;
  CHECK(correct == doctest::Approx(std::round(correct)).epsilon(1e-12));  // a count of 61 samples
  for (const auto& [what, m] : runs) {
    INFO(what);
    MESSAGE("ranks ", world, ", ", what, ": accuracy ", m.at("accuracy"), " (one rank ",
            whole.at("accuracy"), "), loss ", m.at("loss"), " (one rank ", whole.at("loss"), ")");
    CHECK(m.at("accuracy") == whole.at("accuracy"));
    CHECK(m.at("loss") == doctest::Approx(whole.at("loss")).epsilon(1e-6));
  }
  CHECK_THROWS_WITH_AS(plain.eval(set.shard(0, world + 1).batch(8)),
                       cat("Model::eval: the dataset has ", world + 1, " shards but the world has ",
                           world, " rank(s); shard it as shard(parallel::rank(), "
                           "parallel::world_size()) or not at all").c_str(),
                       Error);
}

TEST_CASE("Model without an optimizer evaluates a loaded checkpoint and refuses to train") {
  if (parallel::world_size() > 1) return;
  const std::string path = cat(fs::temp_directory_path().string(), "/minidl_eval_only_", getpid(),
                               ".safetensors");
  auto train = toy(64, 9).batch(16), test = toy(40, 10).batch(16);
  manual_seed(9);
  Toy net;
  nn::CrossEntropyLoss loss;
  optim::Momentum opt(net.trainable_params(), 0.05, 0.9);
  Model trainer(net, loss, opt);
  trainer.train(2, train);
  net.save(path);
  Toy restored;  // other initial weights until the load
  restored.load(path);
  fs::remove(path);
  Model evaluator(restored, loss);
  const auto got = evaluator.eval(test), want = trainer.eval(test);
  CHECK(got.at("accuracy") == want.at("accuracy"));
  CHECK(got.at("loss") == want.at("loss"));
  CHECK_THROWS_WITH_AS(evaluator.train(1, train),
                       "Model::train: this Model has no optimizer (Model(network, loss_fn) only "
                       "evaluates); build it as Model(network, loss_fn, optimizer) to train",
                       Error);
}

namespace {
struct LrLog : Callback {  // the rate each step's update used, and the validation figures
  std::vector<double> lrs;
  std::vector<std::map<std::string, double>> valid;
  void on_step_end(const StepEnd& s) override { lrs.push_back(s.lr); }
  void on_epoch_end(const EpochEnd& e) override { valid.push_back(e.valid); }
};
}  // namespace

TEST_CASE("Model steps a learning-rate schedule per step or per epoch, with warm-up") {
  if (parallel::world_size() > 1) return;
  auto train = toy(80, 11).batch(16);  // 5 steps per epoch
  nn::CrossEntropyLoss loss;
  manual_seed(10);
  Toy net;
  {  // per step: warm-up over 2 steps from 0.5, then StepLR halving every 3 steps
    optim::SGD opt(net.trainable_params(), 0.1);
    optim::StepLR sched(opt, /*step_size=*/3, /*gamma=*/0.5,
                        {.interval = optim::Interval::Step, .warmup = 2, .warmup_start = 0.5});
    Model model(net, loss, opt);
    auto log = std::make_shared<LrLog>();
    model.train(2, train, {log}, {.scheduler = &sched});
    // t = 0, 1: 0.1 * (0.5 + 0.5 t / 2) = 0.05, 0.075; t = 2..: 0.1 * 0.5^floor((t - 2) / 3)
    const std::vector<double> want{0.05, 0.075, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025};
    REQUIRE(log->lrs.size() == want.size());
    for (size_t t = 0; t < want.size(); ++t) CHECK(log->lrs[t] == doctest::Approx(want[t]).epsilon(1e-12));
    CHECK(opt.lr() == doctest::Approx(0.025));  // step 10's rate, set after step 9
  }
  {  // per epoch: one warm-up epoch at 0.25, then a cosine over 2 epochs to 0
    optim::SGD opt(net.trainable_params(), 0.1);
    optim::CosineAnnealingLR sched(opt, /*T_max=*/2, /*eta_min=*/0, {.warmup = 1, .warmup_start = 0.25});
    Model model(net, loss, opt);
    auto log = std::make_shared<LrLog>();
    auto test = toy(24, 12).batch(8);
    model.train(3, train, {log}, {.scheduler = &sched, .valid_dataset = &test});
    // epoch 1: 0.1 * 0.25; epoch 2: cosine at 0 = 0.1; epoch 3: at 1, 0.1 * (1 + cos(pi / 2)) / 2
    const std::vector<double> per_epoch{0.025, 0.1, 0.05};
    REQUIRE(log->lrs.size() == 15);
    for (size_t t = 0; t < 15; ++t) CHECK(log->lrs[t] == doctest::Approx(per_epoch[t / 5]).epsilon(1e-12));
    // the validation figures at each epoch's end are eval()'s
    REQUIRE(log->valid.size() == 3);
    CHECK(log->valid.back().at("accuracy") == model.eval(test).at("accuracy"));
    CHECK(log->valid.back().at("loss") == model.eval(test).at("loss"));
    optim::SGD other(net.trainable_params(), 0.1);
    optim::StepLR elsewhere(other, 1);
    CHECK_THROWS_WITH_AS(model.train(1, train, {}, {.scheduler = &elsewhere}),
                         "Model::train: the scheduler drives another SGD than the Model's SGD; "
                         "build it on the optimizer the Model was given", Error);
  }
}
