// MNIST with the training loop written by hand, as in PyTorch's C++ MNIST
// example: constants, the Net, train(), test(), main(). lenet_mnist.cpp lets
// Model run this loop; here every step is in view: forward, loss, backward
// (where DataParallel averages the gradients over ranks), the optimizer step,
// and an evaluation whose sums are added over ranks. Model's callbacks run
// here too, driven by the loop through a CallbackList: LossMonitor prints the
// loss, and with --checkpoint ModelCheckpoint saves the weights each epoch.
// The flags are the examples' shared set (common.h): --batch is per rank.
//
//   build/bin/mnist_train_loop                     # one process
//   build/bin/mnist_train_loop --nprocs 2          # two ranks, started through mpirun
//   mpirun -np 2 build/bin/mnist_train_loop        # the same, launched by hand
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common.h"

using namespace minidl;

// The flags are the examples' shared set (common.h); these are its defaults,
// and --dropout and --checkpoint its own.
constexpr int64_t kEpochs = 2;
constexpr int64_t kTrainBatch = 64;  // samples per step per rank
constexpr int64_t kTestBatch = 1000;
constexpr double kLearningRate = 0.01, kDropout = 0.5;  // Momentum 0.9 (--optimizer)
constexpr int64_t kLogInterval = 25;  // steps

// The shared flags this loop honours; refused: --save-every, --keep-last and
// --resume (it keeps no resumable training state; --checkpoint saves weights),
// --parallel (always data-parallel over the job's ranks), --cuda-graph.
constexpr uint64_t kHonours = example::kAllFlags & ~(example::kSaveEvery | example::kKeepLast |
    example::kResume | example::kParallel | example::kCudaGraph);
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
// Stops at `max_steps` steps of the whole run (-1: none).
void train(int64_t epoch, int64_t max_steps, parallel::DataParallel& model,
           optim::Optimizer& optimizer, const data::BatchDataset& batches, Device device,
           CallbackList& callbacks, int64_t& global_step) {
  model.train();  // dropout on
  example::EpochClock clock;  // the figures Model::train would give the callbacks
  for (data::Batch& batch : batches.epoch(epoch)) {
    if (global_step == max_steps) break;
    const Tensor labels = batch.labels.to(device);
    Tensor logits = model(batch.data.to(device));
    Tensor loss = cross_entropy(logits, labels);  // this rank's mean loss
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    // summed over ranks: the loss (as the mean), correct predictions and rows
    callbacks.step_end(clock.step(epoch + 1, ++global_step, batches.num_batches(), loss, logits,
                                  labels, optimizer.lr()));
  }
  callbacks.epoch_end(clock.end(epoch + 1, nullptr, batches));
}

// Mean loss and accuracy over the test set: each rank evaluates its shard,
// then one allreduce adds up the sums of every rank.
void test(nn::Cell& net, const data::BatchDataset& batches, Device device) {
  NoGradGuard no_grad;
  net.eval();  // dropout off
  double sums[3] = {0, 0, 0};  // loss x rows, correct predictions, rows
  for (data::Batch& batch : batches.epoch(0)) {
    const int64_t rows = batch.labels.size(0);
    Tensor logits = net(batch.data.to(device));
    sums[0] += cross_entropy(logits, batch.labels.to(device)).item() * rows;
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
  example::Flags flags;  // the shared flags, with this loop's defaults
  flags.parallel = "data";
  flags.epochs = kEpochs, flags.batch = kTrainBatch, flags.lr = kLearningRate;
  flags.log_every = kLogInterval;
  std::string checkpoint;
  double p = kDropout;
  CLI::App app{"MNIST with a hand-written training loop"};
  example::add_flags(app, flags, "mnist_train_loop", kHonours);
  app.add_option("--dropout", p, "dropout probability after fc1")->check(example::in_range(0.0, 0.99));
  app.add_option("--checkpoint", checkpoint,
                 "save the weights at each epoch's end as PREFIX-<epoch>_<step>.safetensors");
  example::parse(app, argc, argv, flags);
  const Device device = example::prepare(flags);  // output paths, --threads, --device
  const int rank = parallel::rank(), ranks = parallel::world_size();

  // The data: pixels to [0, 1], normalized; the training set shuffled per
  // epoch (--augment: moved by up to K pixels); each rank takes its shard of
  // both, in batches of --batch (per rank).
  data::Dataset train_data = example::load(flags, data::Usage::Train);
  if (!flags.no_shuffle) train_data = train_data.shuffle(flags.seed);
  train_data = example::augment(flags, train_data);
  data::BatchDataset train_set = train_data.shard(rank, ranks).batch(flags.batch);
  data::BatchDataset test_set =
      example::load(flags, data::Usage::Test).shard(rank, ranks).batch(kTestBatch);
  example::print_batch(flags);

  // The model, wrapped for data parallelism (it copies rank 0's weights to every rank).
  manual_seed(flags.seed);
  Net net(p);
  example::load_init(flags, net);
  net.to(device);  // before the optimizer, which keeps its state beside the parameters
  parallel::DataParallel model(net, {.bucket_bytes = static_cast<size_t>(flags.bucket_kb) << 10});
  std::unique_ptr<optim::Optimizer> optimizer = example::make_optimizer(flags, model);

  // The callbacks Model::train would run, told by hand what it tells them:
  // --lr-scaling and --warmup's lr, LossMonitor, --history, --check-replicas,
  // and --checkpoint.
  std::vector<CallbackRef> list = example::callbacks(flags, *optimizer, /*progress=*/false);
  if (!checkpoint.empty()) list.push_back(ModelCheckpoint(checkpoint));
  CallbackList callbacks(list);
  callbacks.train_begin({.epochs = flags.epochs, .steps_per_epoch = train_set.num_batches(),
                         .batch_size = flags.batch, .rank = rank, .world_size = ranks,
                         .network = &net});
  example::start_timeline(flags);
  int64_t global_step = 0;
  for (int64_t epoch = 0; epoch < flags.epochs && global_step != flags.steps; ++epoch) {
    train(epoch, flags.steps, model, *optimizer, train_set, device, callbacks, global_step);
    test(net, test_set, device);
  }
  callbacks.train_end();
  example::finish_timeline(flags);
  if (!flags.save.empty() && rank == 0) net.save(flags.save);
}

int main(int argc, char** argv) {
  return example::run_main([&] { program(argc, argv); });
}
