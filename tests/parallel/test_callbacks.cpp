// Callbacks driven from a hand-written loop through CallbackList: the same
// checkpoints (byte for byte), history CSV and SVG, LossMonitor lines and
// replica checks as under Model::train, alone and under mpirun -np 2.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <minidl/minidl.h>
#include <sstream>

using namespace minidl;
namespace fs = std::filesystem;

namespace {

// 48 samples of 4 features; the label is the largest feature's index.
data::Dataset toy() {
  RandomGenerator g(7);
  std::vector<float> x(48 * 4);
  std::vector<int64_t> y(48);
  for (int64_t i = 0; i < 48; ++i) {
    for (int64_t j = 0; j < 4; ++j) x[i * 4 + j] = static_cast<float>(g.normal());
    y[i] = std::max_element(x.begin() + i * 4, x.begin() + i * 4 + 4) - (x.begin() + i * 4);
  }
  return data::Dataset(Tensor::from_vector(x, {48, 4}), Tensor::from_vector(y, {48}));
}

struct Toy : nn::Cell {
  nn::Dense fc1{4, 16}, fc2{16, 4};
  Toy() { register_cells({{"fc1", fc1}, {"fc2", fc2}}); }
  Tensor forward(const Tensor& x) override { return fc2(relu(fc1(x))); }
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// Runs f with stdout redirected to a file and returns what it printed; then
// stdout is what it was (doctest's report still reaches it).
template <class F>
std::string capture_stdout(F f) {
  const std::string path = cat("/tmp/minidl_callbacks_stdout_", getpid());
  std::fflush(stdout);
  const int saved = dup(STDOUT_FILENO), file = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE((saved >= 0 && file >= 0));
  dup2(file, STDOUT_FILENO);
  close(file);
  f();
  std::fflush(stdout);
  dup2(saved, STDOUT_FILENO);
  close(saved);
  std::string out = read_file(path);
  fs::remove(path);
  return out;
}

// The callbacks under test, writing into `dir` (the same on every rank).
struct Recorders {
  std::shared_ptr<ModelCheckpoint> checkpoint;
  std::shared_ptr<HistoryWriter> history;
  std::shared_ptr<ReplicaCheck> replicas;
  std::vector<CallbackRef> list() const {
    return {LossMonitor(2), checkpoint, history, replicas};
  }
};

Recorders recorders(const fs::path& dir) {
  return {std::make_shared<ModelCheckpoint>((dir / "toy").string(), /*every_steps=*/5),
          std::make_shared<HistoryWriter>((dir / "h.csv").string(), (dir / "h.svg").string()),
          std::make_shared<ReplicaCheck>(3)};
}

// What Model::train puts in StepEnd, computed by the loop: this step's loss
// and batch accuracy over all ranks.
StepEnd step_figures(const Tensor& loss, const Tensor& logits, const Tensor& labels) {
  std::vector<int64_t> predicted = argmax(logits.detach()).to_vector<int64_t>();
  std::vector<int64_t> truth = labels.to_vector<int64_t>();
  double figures[3] = {loss.item(), 0, static_cast<double>(truth.size())};
  for (size_t i = 0; i < truth.size(); ++i) figures[1] += predicted[i] == truth[i];
  parallel::world().allreduce(figures, 3);
  return {.samples = static_cast<int64_t>(figures[2]),
          .loss = figures[0] / parallel::world_size(),
          .accuracy = figures[1] / figures[2]};
}

}  // namespace

TEST_CASE("callbacks in a hand-written loop write what they write under Model::train") {
  const int rank = parallel::rank(), world = parallel::world_size();
  const int64_t batch = 8, epochs = 2;  // over all ranks: 6 steps per epoch
  REQUIRE(batch % world == 0);
  const fs::path root = fs::temp_directory_path() / cat("minidl_callbacks_", getpid());
  // rank 0's process id names the folders of every rank
  const fs::path dir = parallel::world().broadcast(root.string(), 0);
  const fs::path by_model = dir / "model", by_hand = dir / "hand";
  if (rank == 0) fs::create_directories(by_model), fs::create_directories(by_hand);
  parallel::world().barrier();
  nn::CrossEntropyLoss loss_fn;
  auto test = toy().shard(rank, world).batch(16);

  // Model::train
  manual_seed(5);
  Toy net_a;
  optim::Momentum opt_a(net_a.trainable_params(), 0.05, 0.9);
  Model model(net_a, loss_fn, opt_a, {.parallel = ParallelMode::DataParallel});
  Recorders a = recorders(by_model);
  const std::string printed_a = capture_stdout(
      [&] { model.train(epochs, toy().batch(batch / world), a.list(), {.valid_dataset = &test}); });

  // The same training written by hand, the callbacks driven through CallbackList
  manual_seed(5);
  Toy net_b;
  parallel::DataParallel dp(net_b);
  optim::Momentum opt_b(dp.trainable_params(), 0.05, 0.9);
  Model evaluator(net_b, loss_fn);  // eval() of a sharded set sums over ranks
  const auto train = toy().shard(rank, world).batch(batch / world);
  Recorders b = recorders(by_hand);
  CallbackList callbacks(b.list());
  const std::string printed_b = capture_stdout([&] {
    callbacks.train_begin({.epochs = epochs, .steps_per_epoch = train.num_batches(),
                           .batch_size = batch / world, .rank = rank, .world_size = world,
                           .network = &net_b});
    int64_t global_step = 0;
    for (int64_t epoch = 0; epoch < epochs; ++epoch) {
      dp.train();
      int64_t step = 0;
      for (data::Batch& x : train.epoch(epoch)) {
        opt_b.zero_grad();
        Tensor logits = dp(x.data), loss = loss_fn(logits, x.labels);
        loss.backward();
        const double lr = opt_b.lr();
        opt_b.step();
        StepEnd s = step_figures(loss, logits, x.labels);
        s.epoch = epoch + 1;
        s.step = ++step;
        s.global_step = ++global_step;
        s.steps_per_epoch = train.num_batches();
        s.lr = lr;
        callbacks.step_end(s);
      }
      callbacks.epoch_end({.epoch = epoch + 1, .steps = step, .valid = evaluator.eval(test)});
    }
    callbacks.train_end();
  });

  CHECK(b.replicas->checks() == a.replicas->checks());
  CHECK(b.replicas->checks() == (world > 1 ? 4 : 0));  // global steps 3, 6, 9, 12
  CHECK(b.history->rows().size() == 12);
  if (rank == 0) {
    CHECK(printed_b == printed_a);
    CHECK(printed_b.find("epoch: 2 step: 6, loss is ") != std::string::npos);
    // global steps 5, 10 and the epochs' ends (6, 12)
    const std::vector<std::string> expect = {"toy-1_5.safetensors", "toy-1_6.safetensors",
                                             "toy-2_4.safetensors", "toy-2_6.safetensors"};
    REQUIRE(a.checkpoint->saved().size() == expect.size());
    REQUIRE(b.checkpoint->saved().size() == expect.size());
    for (size_t i = 0; i < expect.size(); ++i) {
      CHECK(fs::path(b.checkpoint->saved()[i]).filename() == expect[i]);
      CHECK(read_file(b.checkpoint->saved()[i]) == read_file(a.checkpoint->saved()[i]));
    }
    for (const char* name : {"h.csv", "h.svg"})
      CHECK(read_file(by_hand / name) == read_file(by_model / name));
    CHECK(read_file(by_hand / "h.svg").find("<circle") != std::string::npos);  // test figures
  } else {
    CHECK(printed_b.empty());
    CHECK(b.checkpoint->saved().empty());
  }
  parallel::world().barrier();
  if (rank == 0) fs::remove_all(dir);
}

TEST_CASE("CallbackList: a whole training checkpoint needs a Model") {
  Toy net;
  CallbackList callbacks({ModelCheckpoint("/tmp/unused", 1, /*training_state=*/true)});
  CHECK_THROWS_WITH_AS(
      callbacks.train_begin({.epochs = 1, .steps_per_epoch = 1, .network = &net}),
      "ModelCheckpoint(\"/tmp/unused\"): training_state saves a Model's optimizer and "
      "position, but this loop has no Model (TrainBegin::model is null); in a hand-written "
      "loop save the weights (training_state = false)",
      Error);
}

TEST_CASE("ModelCheckpoint with keep_last keeps the newest files it saved, no others removed") {
  Toy net;
  const fs::path dir = fs::temp_directory_path() / cat("minidl_keep_last_", getpid());
  fs::create_directories(dir);
  std::ofstream(dir / "toy-0_9.safetensors") << "an earlier run's";  // not this callback's: kept
  auto keep = std::make_shared<ModelCheckpoint>((dir / "toy").string(), /*every_steps=*/2,
                                                /*training_state=*/false, /*keep_last=*/2);
  CallbackList callbacks({keep});
  callbacks.train_begin({.epochs = 2, .steps_per_epoch = 3, .network = &net});
  int64_t global_step = 0;
  for (int64_t epoch = 1; epoch <= 2; ++epoch) {  // saves 1_2, 1_3, 2_1, 2_3
    for (int64_t step = 1; step <= 3; ++step)
      callbacks.step_end({.epoch = epoch, .step = step, .global_step = ++global_step,
                          .steps_per_epoch = 3});
    callbacks.epoch_end({.epoch = epoch, .steps = 3});
  }
  callbacks.train_end();
  CHECK(keep->saved() == std::vector<std::string>{(dir / "toy-2_1.safetensors").string(),
                                                  (dir / "toy-2_3.safetensors").string()});
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"toy-0_9.safetensors", "toy-2_1.safetensors",
                                          "toy-2_3.safetensors"});
  fs::remove_all(dir);
  CHECK_THROWS_WITH_AS(ModelCheckpoint("toy", 1, false, /*keep_last=*/-1),
                       "ModelCheckpoint: expected keep_last >= 0 (0: keep all), got -1", Error);
}
