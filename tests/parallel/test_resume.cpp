// Exact resume: a run that saves a checkpoint, and a fresh network, optimizer
// and Model that load it and train on, end with the same parameter bytes as
// one run straight through: with shuffling, dropout (the generator), an
// epoch- or step-interval schedule, for SGD, Momentum and Adam, alone and
// data-parallel on every rank count of the suite.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstring>
#include <span>
#include <filesystem>
#include <minidl/minidl.h>

#include "nets.h"

using namespace minidl;
using namespace minidl::testing;
namespace fs = std::filesystem;

namespace {

// x [B, 4] -> fc1 [B, 8] -> relu -> dropout(0.25) -> fc2 [B, 4]
struct DropNet : nn::Cell {
  nn::Dense fc1{4, 8}, fc2{8, 4};
  nn::Dropout drop{0.25};
  DropNet() { register_cells({{"fc1", fc1}, {"drop", drop}, {"fc2", fc2}}); }
  Tensor forward(const Tensor& x) override { return fc2(drop(relu(fc1(x)))); }
};

// 48 samples of 4 normals; the class is the largest feature's index.
data::Dataset toy() {
  RandomGenerator g(7);
  Tensor x = Tensor::empty({48, 4}), y = Tensor::empty({48}, kInt64);
  for (int64_t i = 0; i < 48; ++i) {
    float* row = x.data<float>() + i * 4;
    for (int64_t j = 0; j < 4; ++j) row[j] = static_cast<float>(g.normal());
    y.data<int64_t>()[i] = std::max_element(row, row + 4) - row;
  }
  return data::Dataset(x, y).shuffle(/*seed=*/11);
}

// Per-batch augmentation for toy(): each row [4] seen as a 2x2 image, moved
// by up to one pixel, a new draw per sample and epoch (data::RandomShift).
data::Dataset augmented(data::Dataset ds) {
  return ds.augment([](Tensor x, int64_t epoch, std::span<const int64_t> index) {
    const int64_t b = x.size(0);
    return data::RandomShift(/*max_shift=*/1, /*seed=*/3)(x.reshape({b, 2, 2}), epoch, index)
        .reshape({b, 4});
  });
}

// Every parameter's bytes, in named_parameters() order.
std::vector<char> bytes_of(const nn::Cell& net) {
  std::vector<char> out;
  for (const auto& [name, t] : net.named_parameters()) {
    const char* p = static_cast<const char*>(t.raw_data());
    out.insert(out.end(), p, p + t.nbytes());
  }
  return out;
}

std::unique_ptr<optim::Optimizer> make(const std::string& kind, nn::Cell& net) {
  if (kind == "sgd") return std::make_unique<optim::SGD>(net.trainable_params(), 0.1);
  if (kind == "momentum") return std::make_unique<optim::Momentum>(net.trainable_params(), 0.1, 0.9);
  if (kind == "rmsprop groups") {  // fc1's and fc2's parameters in two groups (drop has none)
    auto* cells = dynamic_cast<DropNet*>(&net);
    return std::make_unique<optim::RMSprop>(
        std::vector<optim::ParamGroup>{
            {cells->fc1.trainable_params()},
            {cells->fc2.trainable_params(), {.lr = 0.003, .momentum = 0.5, .centered = true}}},
        optim::GroupOptions{.lr = 0.01});
  }
  return std::make_unique<optim::Adam>(net.trainable_params(), 0.01);
}

// One training setup: a network seeded like every other (then the generator
// is moved on, so only a restored state can reproduce the dropout masks), its
// optimizer, a schedule (StepLR per epoch; for Adam cosine per step) and a
// Model, data-parallel when there are several ranks. The batch is 4 per rank.
struct Run {
  DropNet net;
  std::unique_ptr<optim::Optimizer> opt;
  std::unique_ptr<optim::LRScheduler> sched;
  nn::CrossEntropyLoss loss;
  std::unique_ptr<Model> model;
  data::BatchDataset train;

  Run(const std::string& kind, uint64_t rng_skip, bool augment = false)
      : train((augment ? augmented(toy()) : toy()).batch(4)) {
    opt = make(kind, net);
    if (kind == "adam")
      sched = std::make_unique<optim::CosineAnnealingLR>(
          *opt, /*T_max=*/20, /*eta_min=*/0.0, optim::SchedulerOptions{.interval = optim::Interval::Step});
    else
      sched = std::make_unique<optim::StepLR>(*opt, /*step_size=*/1, /*gamma=*/0.5);
    model = std::make_unique<Model>(
        net, loss, *opt,
        ModelOptions{.parallel = N() > 1 ? ParallelMode::DataParallel : ParallelMode::StandAlone});
    for (uint64_t i = 0; i < rng_skip; ++i) default_generator().next_u64();
  }
  int64_t fit(int64_t epochs, int64_t max_steps = -1) {
    return model->train(epochs, train, {}, {.max_steps = max_steps, .scheduler = sched.get()});
  }
};

// A path every rank agrees on (rank 0's pid).
std::string shared_path(const std::string& name) {
  std::string dir = parallel::world().broadcast(
      (fs::temp_directory_path() / cat("minidl_resume_", getpid())).string(), 0);
  if (R() == 0) fs::create_directories(dir);
  parallel::world().barrier();
  return dir + "/" + name;
}

void remove_shared(const std::string& path) {
  parallel::world().barrier();
  if (R() == 0) fs::remove_all(fs::path(path).parent_path());
}

// Straight: `epochs` epochs. Resumed: `first` steps (max_steps), save, then a
// fresh Run loads the file and trains the rest. Returns both runs' bytes.
void check_resume(const std::string& kind, int64_t first_steps, bool augment = false) {
  const int64_t steps_per_epoch = 48 / N() / 4, epochs = 2;
  manual_seed(5);
  Run straight(kind, 0, augment);
  CHECK(straight.fit(epochs) == epochs * steps_per_epoch);

  manual_seed(5);
  Run before(kind, 0, augment);
  CHECK(before.fit(epochs, first_steps) == first_steps);
  CHECK(before.model->position().global_step == first_steps);
  CHECK(before.model->position().epoch == first_steps / steps_per_epoch);
  CHECK(before.model->position().step == first_steps % steps_per_epoch);
  const std::string path = shared_path(kind + ".safetensors");
  if (R() == 0) before.model->save_checkpoint(path);
  parallel::world().barrier();

  manual_seed(99);  // other initial weights and generator: the checkpoint must restore them
  Run after(kind, 3, augment);
  const TrainPosition& pos = after.model->load_checkpoint(path, after.sched.get());
  CHECK(pos.global_step == first_steps);
  CHECK(after.opt->lr() == before.opt->lr());
  CHECK(after.sched->last_epoch() == before.sched->last_epoch());
  CHECK(bytes_of(after.net) == bytes_of(before.net));
  // the epoch in progress counts as one of the remaining epochs
  const int64_t left = epochs - pos.epoch;
  CHECK(after.fit(left) == epochs * steps_per_epoch - first_steps);
  CHECK(after.model->position().global_step == epochs * steps_per_epoch);
  CHECK(after.opt->lr() == straight.opt->lr());
  CHECK(bytes_of(after.net) == bytes_of(straight.net));
  CHECK(same_on_every_rank(after.net.parameters()));
  remove_shared(path);
}

}  // namespace

TEST_CASE("1 epoch + save + resume + 1 epoch equals 2 epochs bit for bit") {
  for (const char* kind : {"sgd", "momentum", "adam", "rmsprop groups"}) {
    CAPTURE(kind);
    check_resume(kind, /*first_steps=*/48 / N() / 4);
  }
}

TEST_CASE("a checkpoint saved mid-epoch resumes the same epoch's order at the next batch") {
  for (const char* kind : {"sgd", "momentum", "adam", "rmsprop groups"}) {
    CAPTURE(kind);
    check_resume(kind, /*first_steps=*/48 / N() / 4 + 1);
  }
}

TEST_CASE("with random shifts drawn per sample and epoch, a mid-epoch checkpoint resumes bit for bit") {
  for (const char* kind : {"sgd", "adam"}) {
    CAPTURE(kind);
    check_resume(kind, /*first_steps=*/48 / N() / 4 + 1, /*augment=*/true);
  }
  // The shifts do change the training.
  manual_seed(5);
  Run plain("momentum", 0);
  manual_seed(5);
  Run shifted("momentum", 0, /*augment=*/true);
  CHECK(bytes_of(plain.net) == bytes_of(shifted.net));
  plain.fit(1);
  shifted.fit(1);
  CHECK(bytes_of(plain.net) != bytes_of(shifted.net));
}

TEST_CASE("a checkpoint saved at an epoch's last step resumes with the epoch's end to come") {
  const int64_t steps_per_epoch = 48 / N() / 4;
  manual_seed(5);
  Run straight("momentum", 0);
  straight.fit(2);
  manual_seed(5);
  Run before("momentum", 0);
  const std::string prefix = shared_path("end");
  auto ckpt = std::make_shared<ModelCheckpoint>(prefix, steps_per_epoch, /*training_state=*/true);
  before.model->train(1, before.train, {ckpt}, {.scheduler = before.sched.get()});
  parallel::world().barrier();
  manual_seed(99);
  Run after("momentum", 3);
  const TrainPosition pos =
      after.model->load_checkpoint(cat(prefix, "-1_", steps_per_epoch, ".safetensors"), after.sched.get());
  CHECK(pos.epoch == 0);  // saved in on_step_end: the StepLR had not stepped for epoch 1
  CHECK(pos.step == steps_per_epoch);
  CHECK(after.sched->last_epoch() == 0);
  CHECK(after.fit(2) == steps_per_epoch);
  CHECK(after.sched->last_epoch() == 2);
  CHECK(bytes_of(after.net) == bytes_of(straight.net));
  remove_shared(prefix);
}

TEST_CASE("Model::train called twice continues with the next epoch's data order") {
  manual_seed(5);
  Run straight("momentum", 0);
  straight.fit(2);
  manual_seed(5);
  Run twice("momentum", 0);
  twice.fit(1);
  CHECK(twice.model->position().epoch == 1);
  CHECK(twice.model->position().step == 0);
  twice.fit(1);
  CHECK(bytes_of(twice.net) == bytes_of(straight.net));
  // A start given in TrainOptions overrides the Model's position: epoch 0's
  // order again gives other weights.
  manual_seed(5);
  Run again("momentum", 0);
  again.fit(1);
  again.model->train(1, again.train, {}, {.scheduler = again.sched.get(), .start = TrainPosition{}});
  CHECK(bytes_of(again.net) != bytes_of(straight.net));
}

TEST_CASE("the optimizers' state_dict holds their steps and per-parameter state") {
  manual_seed(1);
  DropNet net;
  optim::Adam adam(net.trainable_params(), 0.01);
  StateDict empty = adam.state_dict();
  CHECK(empty.values.at("name") == "Adam");
  CHECK(empty.tensors.size() == 1);  // steps only: no moments before the first update
  CHECK(empty.tensors.at("steps").to_vector<int64_t>() == std::vector<int64_t>(4, 0));
  nn::CrossEntropyLoss loss;
  Tensor x = Tensor::randn({4, 4}), y = Tensor::of_ints({0, 1, 2, 3});
  for (int i = 0; i < 3; ++i) {
    adam.zero_grad();
    loss(net(x), y).backward();
    adam.step();
  }
  StateDict s = adam.state_dict();
  CHECK(s.values.at("param_groups.0.lr") == "0.01");
  CHECK(s.tensors.at("steps").to_vector<int64_t>() == std::vector<int64_t>(4, 3));
  CHECK(s.tensors.at("exp_avg.0").to_float_vector() == adam.exp_avg(0).to_float_vector());
  CHECK(s.tensors.at("exp_avg_sq.3").to_float_vector() == adam.exp_avg_sq(3).to_float_vector());

  DropNet other;
  optim::Adam restored(other.trainable_params(), 0.5);
  restored.load_state_dict(s);
  CHECK(restored.lr() == 0.01);
  CHECK(restored.step_count(2) == 3);
  CHECK(restored.exp_avg_sq(1).to_float_vector() == adam.exp_avg_sq(1).to_float_vector());

  optim::Momentum momentum(other.trainable_params(), 0.1, 0.9);
  CHECK_THROWS_WITH_AS(momentum.load_state_dict(s),
                       "Momentum::load_state_dict: the state is a Adam's, expected a Momentum's",
                       Error);
  optim::Adam fewer({other.fc1.weight}, 0.1);
  CHECK_THROWS_WITH_AS(fewer.load_state_dict(s),
                       "Adam::load_state_dict: parameter group 0 holds 4 parameter(s) in the "
                       "state, 1 in this Adam",
                       Error);
}

TEST_CASE("RandomGenerator::state continues the stream bit for bit, the Box-Muller spare included") {
  RandomGenerator g(3);
  g.normal();  // leaves a spare
  const std::string state = g.state();
  const double a = g.normal(), b = g.normal();
  RandomGenerator h(0);
  h.set_state(state);
  CHECK(h.normal() == a);
  CHECK(h.normal() == b);
  CHECK(h.next_u64() == g.next_u64());
  CHECK_THROWS_AS(h.set_state("1 2 3"), Error);
}

TEST_CASE("resuming with another batch size or shuffle seed throws naming both") {
  manual_seed(5);
  Run before("sgd", 0);
  before.fit(1, /*max_steps=*/2);
  const std::string path = shared_path("order.safetensors");
  if (R() == 0) before.model->save_checkpoint(path);
  parallel::world().barrier();
  for (const auto& other : std::vector<std::pair<data::BatchDataset, std::string>>{
           {toy().batch(8), "saved training with batch size 4, this run has 8"},
           {toy().shuffle(12).batch(4), "saved training with shuffle seed 11, this run has 12"}}) {
    const std::string message = other.second;  // clang 14 cannot capture a binding
    CAPTURE(message);
    Run after("sgd", 0);
    after.train = other.first;
    after.model->load_checkpoint(path, after.sched.get());
    CHECK_THROWS_WITH_AS(after.fit(1), doctest::Contains(message.c_str()), Error);
  }
  Run same("sgd", 0);  // the same order resumes
  same.model->load_checkpoint(path, same.sched.get());
  CHECK(same.fit(1) == 48 / N() / 4 - 2);
  remove_shared(path);
}

TEST_CASE("load_checkpoint names the file and what does not fit") {
  manual_seed(5);
  Run run("sgd", 0);
  const std::string weights = shared_path("weights.safetensors");
  const std::string ckpt = fs::path(weights).parent_path() / "ckpt.safetensors";
  if (R() == 0) {
    run.net.save(weights);
    run.model->save_checkpoint(ckpt);
  }
  parallel::world().barrier();
  CHECK_THROWS_WITH_AS(run.model->load_checkpoint(weights, run.sched.get()),
                       doctest::Contains((weights + " is not a training checkpoint").c_str()), Error);
  // saved outside train(): no schedule in the file
  CHECK_THROWS_WITH_AS(run.model->load_checkpoint(ckpt, run.sched.get()),
                       doctest::Contains("has no learning-rate schedule's state but a scheduler "
                                         "was given"),
                       Error);
  Run adam("adam", 0);
  CHECK_THROWS_WITH_AS(adam.model->load_checkpoint(ckpt),
                       doctest::Contains("Adam::load_state_dict: the state is a SGD's"), Error);
  // parameter groups: another structure is refused, naming both
  Run groups("rmsprop groups", 0);
  const std::string grouped = fs::path(weights).parent_path() / "groups.safetensors";
  if (R() == 0) groups.model->save_checkpoint(grouped);
  parallel::world().barrier();
  DropNet net;
  optim::RMSprop one(net.trainable_params());
  nn::CrossEntropyLoss loss;
  Model flat(net, loss, one);
  CHECK_THROWS_WITH_AS(flat.load_checkpoint(grouped),
                       doctest::Contains("RMSprop::load_state_dict: the state holds 2 parameter "
                                         "group(s), this RMSprop has 1"),
                       Error);
  remove_shared(weights);
}

TEST_CASE("load_checkpoint refuses a checkpoint inconsistent with itself, naming file and entry") {
  manual_seed(5);
  Run run("momentum", 0);
  run.fit(1, /*max_steps=*/2);
  const std::string good = shared_path("good.safetensors");
  if (R() == 0) run.model->save_checkpoint(good);
  parallel::world().barrier();
  std::map<std::string, std::string> meta;
  const TensorDict tensors = load_safetensors(good, &meta);
  // Writes the checkpoint with `name` replaced (removed when `value` is
  // undefined) and metadata `key` set to `text` (when key is not empty),
  // then returns what load_checkpoint throws.
  const std::string bad = fs::path(good).parent_path() / "bad.safetensors";
  auto error_of = [&](const std::string& name, const Tensor& value, const std::string& key = "",
                      const std::string& text = "") {
    TensorDict edited;
    for (const auto& [n, t] : tensors)
      if (n != name) edited.insert(n, t);
    if (value.defined()) edited.insert(name, value);
    std::map<std::string, std::string> values = meta;
    if (!key.empty()) values[key] = text;
    parallel::world().barrier();
    if (R() == 0) save_safetensors(bad, edited, values);
    parallel::world().barrier();
    Run other("momentum", 0);
    try {
      other.model->load_checkpoint(bad, other.sched.get());
    } catch (const Error& e) {
      return std::string(e.what());
    } catch (const std::exception& e) {
      return std::string("not a minidl::Error: ") + e.what();
    }
    return std::string();
  };
  const std::string file = "Model::load_checkpoint: " + bad + ": ";
  const std::string momentum = file + "Momentum::load_state_dict: ";
  CHECK(error_of("optimizer.momentum_buffer.1", Tensor()) ==
        momentum + "'momentum_buffer.1' is missing, but parameter 1 [8] has taken 2 step(s) "
                   "(expected its momentum_buffer, float32 [8])");
  CHECK(error_of("optimizer.steps", Tensor::of_ints({2, -1, 2, 2})) ==
        momentum + "'steps' entry 1 is -1, expected 0 to 2^53 (the updates parameter 1 [8] "
                   "has taken)");
  CHECK(error_of("", Tensor(), "optimizer.param_groups.0.lr", "nan") ==
        momentum + "'param_groups.0.lr' is nan, expected a finite number >= 0");
  CHECK(error_of("", Tensor(), "optimizer.param_groups.0.lr", "-1") ==
        momentum + "'param_groups.0.lr' is -1, expected a finite number >= 0");
  CHECK(error_of("", Tensor(), "optimizer.param_groups.0.momentum", "-0.5") ==
        momentum + "parameter group 0: Momentum: invalid momentum -0.5 (expected momentum >= 0)");
  CHECK(error_of("", Tensor(), "optimizer.param_groups", "2") ==
        momentum + "the state holds 2 parameter group(s), this Momentum has 1");
  CHECK(error_of("", Tensor(), "epoch", "9223372036854775807") ==
        file + "'epoch' is 9223372036854775807, expected 0 to 2^53");
  CHECK(error_of("", Tensor(), "global_step", "9223372036854775807") ==
        file + "'global_step' is 9223372036854775807, expected 0 to 2^53");
  CHECK(error_of("", Tensor(), "step", "3") ==
        file + "'step' is 3 but 'global_step' 2, expected step <= global_step (the steps of the "
               "epoch in progress are counted in both)");
  CHECK(error_of("", Tensor(), "scheduler.base_lr", "inf") ==
        file + "LRScheduler::load_state_dict: 'base_lr' is inf, expected a finite number >= 0");
  std::vector<float> w = tensors.at("model.fc2.bias").to_float_vector();
  w[3] = INFINITY;
  CHECK(error_of("model.fc2.bias", Tensor::from_vector(w)) ==
        file + "'model.fc2.bias' [4] element 3 is inf, expected a finite number");
  CHECK(error_of("", Tensor()) == "");  // the same file unedited loads
  remove_shared(good);
}
