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
#include <regex>
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
  RandomGenerator g(seed);
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
    const std::string label = what;  // clang 14 cannot capture a binding
    INFO(label);
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

namespace {

struct SvgText {
  std::string text, anchor;
  double x, y, size;
  bool rotated;  // rotate(-90) about (x, y)
};

// The <text> elements of an SVG written by write_svg_plot, with the drawing's width and height.
std::vector<SvgText> svg_texts(const std::string& svg, double& width, double& height) {
  std::smatch m;
  REQUIRE(std::regex_search(svg, m, std::regex("<svg [^>]*width='([0-9.]+)' height='([0-9.]+)'")));
  width = std::stod(m[1]);
  height = std::stod(m[2]);
  std::vector<SvgText> out;
  const std::regex text("<text ([^>]*)>(.*?)</text>"), attr("([a-z-]+)='([^']*)'");
  for (std::sregex_iterator it(svg.begin(), svg.end(), text), end; it != end; ++it) {
    SvgText t{std::regex_replace((*it)[2].str(), std::regex("<[^>]*>|&#[0-9]+;|&[a-z]+;"), "_"),
              "start", 0, 0, 12, false};
    const std::string attrs = (*it)[1];
    for (std::sregex_iterator a(attrs.begin(), attrs.end(), attr); a != end; ++a) {
      const std::string name = (*a)[1], value = (*a)[2];
      if (name == "x") t.x = std::stod(value);
      if (name == "y") t.y = std::stod(value);
      if (name == "font-size") t.size = std::stod(value);
      if (name == "text-anchor") t.anchor = value;
      if (name == "transform") {
        REQUIRE(value.rfind("rotate(-90 ", 0) == 0);  // the y-axis title, about its own (x, y)
        t.rotated = true;
      }
    }
    out.push_back(t);
  }
  return out;
}

// Every label lies inside the drawing: its box from the anchor, 0.6 em a
// character wide, 0.8 em above the baseline and 0.25 em below.
void check_labels_inside(const std::string& svg) {
  double width, height;
  const auto texts = svg_texts(svg, width, height);
  REQUIRE(!texts.empty());
  for (const SvgText& t : texts) {
    const double w = 0.6 * t.size * t.text.size();
    double left = t.anchor == "end" ? t.x - w : t.anchor == "middle" ? t.x - w / 2 : t.x;
    double right = left + w, top = t.y - 0.8 * t.size, bottom = t.y + 0.25 * t.size;
    if (t.rotated) {  // the run goes up the page from (x, y)
      const double along_lo = left - t.x, along_hi = right - t.x;
      left = t.x - 0.8 * t.size;
      right = t.x + 0.25 * t.size;
      top = t.y - along_hi;
      bottom = t.y - along_lo;
    }
    INFO("label '" << t.text << "' at (" << t.x << ", " << t.y << "): [" << left << ", " << right
                   << "] x [" << top << ", " << bottom << "] in " << width << " x " << height);
    CHECK(left >= 0);
    CHECK(right <= width);
    CHECK(top >= 0);
    CHECK(bottom <= height);
  }
}

// The y tick labels (right-aligned at x == at_x, each panel's from the bottom
// up) step by 1, 2 or 5 times a power of ten from a multiple of the step.
// Returns the number of panels.
int check_round_ticks(const std::string& svg, double at_x) {
  double width, height;
  std::vector<std::vector<double>> panels;
  double last_y = 1e300;
  for (const SvgText& t : svg_texts(svg, width, height)) {
    if (t.x != at_x || t.anchor != "end") continue;
    if (t.y > last_y || panels.empty()) panels.emplace_back();  // the next panel's bottom tick
    panels.back().push_back(std::stod(t.text));
    last_y = t.y;
  }
  for (const auto& ticks : panels) {
    REQUIRE(ticks.size() >= 3);
    const double step = ticks[1] - ticks[0];
    const double mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
    INFO("ticks from " << ticks.front() << " by " << step);
    CHECK((std::abs(mantissa - 1) < 1e-6 || std::abs(mantissa - 2) < 1e-6 ||
           std::abs(mantissa - 5) < 1e-6));
    for (size_t i = 1; i < ticks.size(); ++i) CHECK(ticks[i] - ticks[i - 1] == doctest::Approx(step));
    CHECK(std::abs(ticks.front() / step - std::round(ticks.front() / step)) < 1e-6);  // a multiple
  }
  return static_cast<int>(panels.size());
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

}  // namespace

TEST_CASE("write_svg_plot: round ticks, axis titles, every label inside the drawing") {
  if (parallel::world_size() > 1) return;
  const fs::path path = fs::temp_directory_path() / cat("minidl_plot_", getpid(), ".svg");
  // A loss between 2.2951 and 2.31524 over 1,250 steps in 10 epochs (labels such as "2.31524"
  // were clipped at the left edge), a panel of large values and one of small negative ones.
  Series narrow{.title = "loss", .y_label = "loss", .line_label = "train", .points_label = "test"};
  Series large{.title = "large", .y_label = "samples"}, small{.title = "small", .y_label = "value"};
  for (int i = 1; i <= 1250; ++i) {
    narrow.x.push_back(i);
    narrow.y.push_back(2.31524 - 0.02014 * i / 1250);
    large.x.push_back(i);
    large.y.push_back(123456.7 * i / 1250);
    small.x.push_back(i);
    small.y.push_back(-0.003 + 0.005 * i / 1250);
  }
  for (int e = 0; e < 10; ++e) narrow.epoch_starts.push_back(e * 125 + 0.5);
  for (int e = 1; e <= 10; ++e) {
    narrow.points_x.push_back(e * 125);
    narrow.points_y.push_back(2.31 - 0.001 * e);
  }
  write_svg_plot(path.string(), "training history", {narrow, large, small});
  const std::string svg = read_text(path);
  fs::remove(path);
  check_labels_inside(svg);
  double width, height;
  std::map<double, int> columns;  // y tick labels share an x: find each panel's column
  for (const SvgText& t : svg_texts(svg, width, height))
    if (t.anchor == "end" && t.x < width / 2) ++columns[t.x];
  REQUIRE(columns.size() == 1);  // one left margin for all panels
  CHECK(check_round_ticks(svg, columns.begin()->first) == 3);
  for (const char* title : {">step<", ">loss<", ">samples<", ">value<", ">epoch 1<", ">epoch 10<"})
    CHECK(svg.find(title) != std::string::npos);
  CHECK(svg.find("2.31524") == std::string::npos);  // round ticks, not the data's digits
}

TEST_CASE("HistoryWriter plots the loss and accuracy with epoch boundaries and test figures") {
  if (parallel::world_size() > 1) return;
  const fs::path svg_path = fs::temp_directory_path() / cat("minidl_history_", getpid(), ".svg");
  manual_seed(12);
  Toy net;
  nn::CrossEntropyLoss loss;
  optim::SGD opt(net.trainable_params(), 0.1);
  Model model(net, loss, opt);
  auto test = toy(40, 13).batch(16);
  auto hist = std::make_shared<HistoryWriter>("", svg_path.string());
  model.train(3, toy(64, 14).batch(16), {hist}, {.valid_dataset = &test});
  const std::string svg = read_text(svg_path);
  fs::remove(svg_path);
  check_labels_inside(svg);
  REQUIRE(hist->tests().size() == 3);  // one per epoch, at its last step
  const auto last = model.eval(test);
  CHECK(hist->tests()[2].step == 12);
  CHECK(hist->tests()[2].accuracy == last.at("accuracy"));
  CHECK(hist->tests()[2].loss == last.at("loss"));
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = svg.find(what); at != std::string::npos; at = svg.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(count("stroke-dasharray") == 2 * 2);  // epochs 2 and 3 start, in both panels
  CHECK(count("<circle") == 2 * 3);           // test loss and accuracy at each epoch's end
  char value[16];
  std::snprintf(value, sizeof value, ">%.4f<", last.at("accuracy"));
  CHECK(svg.find(value) != std::string::npos);  // the last test accuracy, written out
}
