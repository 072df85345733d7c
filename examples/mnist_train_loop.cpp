// MNIST with the training loop written by hand, as in PyTorch's C++ MNIST
// example: constants, the Net, train(), test(), main(). lenet_mnist.cpp lets
// Model run this loop; here every step is in view: forward, loss, backward
// (where DataParallel averages the gradients over ranks), the optimizer step,
// and an evaluation whose sums are added over ranks. Model's callbacks run
// here too, driven by the loop through a CallbackList: LossMonitor prints the
// loss, and with --checkpoint ModelCheckpoint saves the weights each epoch.
//
//   build/bin/mnist_train_loop                     # one process
//   build/bin/mnist_train_loop --nprocs 2          # two ranks, started through mpirun
//   mpirun -np 2 build/bin/mnist_train_loop        # the same, launched by hand
#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"

using namespace minidl;

// The defaults of the flags.
constexpr int64_t kEpochs = 2;
constexpr int64_t kTrainBatch = 64;  // samples per step over all ranks: each rank takes 64 / ranks
constexpr int64_t kTestBatch = 1000;
constexpr double kLearningRate = 0.01, kMomentum = 0.9, kDropout = 0.5;
constexpr int64_t kLogInterval = 25;  // steps

// x [N, 1, 28, 28] -> logits [N, 10]
struct Net : nn::Cell {
  nn::Conv2d conv1{/*in=*/1, /*out=*/10, /*kernel=*/5};  // -> [N, 10, 24, 24], pooled to 12 x 12
  nn::Conv2d conv2{10, 20, 5};                            // -> [N, 20, 8, 8], pooled to 4 x 4
  nn::Dense fc1{320, 50}, fc2{50, 10};
  nn::Dropout dropout;

  explicit Net(double p) : dropout(p) {
    register_cells({{"conv1", conv1}, {"conv2", conv2}, {"fc1", fc1}, {"fc2", fc2},
                    {"dropout", dropout}});
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = relu(max_pool2d(conv1(x), 2));
    h = relu(max_pool2d(conv2(h), 2)).flatten(1);
    return fc2(dropout(relu(fc1(h))));
  }
};

// One epoch over this rank's shard. DataParallel starts allreducing gradients
// during backward, so after loss.backward() every rank holds the mean over
// ranks: the gradient of the whole batch's mean loss. The callbacks hear of
// every step (with the loss averaged over ranks) and of the epoch's end.
void train(int64_t epoch, int64_t max_steps, parallel::DataParallel& model,
           optim::Optimizer& optimizer, const data::BatchDataset& batches,
           CallbackList& callbacks, int64_t& global_step) {
  model.train();  // dropout on
  int64_t step = 0;
  for (data::Batch& batch : batches.epoch(epoch)) {
    Tensor loss = cross_entropy(model(batch.data), batch.labels);  // this rank's mean loss
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    double figures[2] = {loss.item(), static_cast<double>(batch.labels.size(0))};
    parallel::world().allreduce(figures, 2);  // summed over ranks
    callbacks.step_end({.epoch = epoch + 1, .step = ++step, .global_step = ++global_step,
                        .steps_per_epoch = batches.num_batches(),
                        .samples = static_cast<int64_t>(figures[1]),
                        .loss = figures[0] / parallel::world_size()});
    if (step == max_steps) break;
  }
  callbacks.epoch_end({.epoch = epoch + 1, .steps = step});
}

// Mean loss and accuracy over the test set: each rank evaluates its shard,
// then one allreduce adds up the sums of every rank.
void test(nn::Cell& net, const data::BatchDataset& batches) {
  NoGradGuard no_grad;
  net.eval();  // dropout off
  double sums[3] = {0, 0, 0};  // loss x rows, correct predictions, rows
  for (data::Batch& batch : batches.epoch(0)) {
    const int64_t rows = batch.labels.size(0);
    Tensor logits = net(batch.data);
    sums[0] += cross_entropy(logits, batch.labels).item() * rows;
    std::vector<int64_t> predicted = argmax(logits).to_vector<int64_t>();
    std::vector<int64_t> labels = batch.labels.to_vector<int64_t>();
    for (int64_t i = 0; i < rows; ++i) sums[1] += predicted[i] == labels[i];
    sums[2] += rows;
  }
  parallel::world().allreduce(sums, 3);
  if (parallel::rank() == 0)
    std::printf("test loss %.6f, accuracy %.4f (%lld images)\n", sums[0] / sums[2],
                sums[1] / sums[2], (long long)sums[2]);
}

void program(int argc, char** argv) {
  parallel::launch_if_requested(argc, argv);  // --nprocs N: rerun under mpirun
  parallel::init();                           // a world of one when started alone
  std::string dir = data::default_mnist_dir(), save, checkpoint;
  int64_t epochs = kEpochs, batch = kTrainBatch, max_steps = -1;
  double lr = kLearningRate, p = kDropout;
  uint64_t seed = 0;
  CLI::App app{"MNIST with a hand-written training loop"};
  app.add_option("--data", dir, "directory with the four MNIST IDX files");
  app.add_option("--epochs", epochs, "passes over the training set")
      ->check(example::in_range<int64_t>(1, 1000));
  app.add_option("--batch", batch, "samples per step over all ranks")
      ->check(example::in_range<int64_t>(1, 1'000'000));
  app.add_option("--steps", max_steps, "stop each epoch after this many steps")
      ->check(example::in_range<int64_t>(1, 1'000'000'000));
  app.add_option("--lr", lr, "learning rate")->check(example::in_range(0.0, 1e6));
  app.add_option("--dropout", p, "dropout probability after fc1")->check(example::in_range(0.0, 0.99));
  app.add_option("--seed", seed, "initial weights and shuffling");
  app.add_option("--save", save, "save the trained weights as safetensors");
  app.add_option("--checkpoint", checkpoint,
                 "save the weights at each epoch's end as PREFIX-<epoch>_<step>.safetensors");
  int64_t nprocs = 1;  // taken (and checked) by launch_if_requested; listed for --help
  app.add_option("--nprocs", nprocs, "start N ranks through mpirun");
  example::parse(app, argc, argv);
  const int rank = parallel::rank(), ranks = parallel::world_size();
  MINIDL_CHECK(batch % ranks == 0, "--batch ", batch, " must be divisible by the ", ranks, " ranks");

  // The data: pixels to [0, 1], normalized; the training set shuffled per
  // epoch; each rank takes its shard of both.
  auto load = [&](data::Usage usage) {
    return data::MnistDataset(dir, usage)
        .map(data::Rescale(1.0 / 255, 0))
        .map(data::Normalize(0.1307, 0.3081));
  };
  data::BatchDataset train_set =
      load(data::Usage::Train).shuffle(seed).shard(rank, ranks).batch(batch / ranks);
  data::BatchDataset test_set = load(data::Usage::Test).shard(rank, ranks).batch(kTestBatch);

  // The model, wrapped for data parallelism (it copies rank 0's weights to every rank).
  manual_seed(seed);
  Net net(p);
  parallel::DataParallel model(net);
  optim::Momentum optimizer(model.trainable_params(), lr, kMomentum);

  // The callbacks Model::train would run, told by hand what it tells them.
  std::vector<CallbackRef> list = {LossMonitor(kLogInterval)};
  if (!checkpoint.empty()) list.push_back(ModelCheckpoint(checkpoint));
  CallbackList callbacks(list);
  callbacks.train_begin({.epochs = epochs, .steps_per_epoch = train_set.num_batches(),
                         .batch_size = batch / ranks, .rank = rank, .world_size = ranks,
                         .network = &net});
  int64_t global_step = 0;
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    train(epoch, max_steps, model, optimizer, train_set, callbacks, global_step);
    test(net, test_set);
  }
  callbacks.train_end();
  if (!save.empty() && rank == 0) net.save(save);
}

int main(int argc, char** argv) {
  return example::run_main([&] { program(argc, argv); });
}
