// Paddle's DataParallel example in C++: LinearNet (Linear 10->10->1) trained
// with MSE and Adam (lr 0.001) in the explicit style: scale_loss, backward,
// apply_collective_grads. Each rank draws its own random batch (--batch rows
// per rank, from --seed + rank); rank 0 prints the loss averaged over ranks
// every --log-every steps.
//
//   build/bin/data_parallel --nprocs 2        # re-launches itself under mpirun
//   mpirun -np 2 build/bin/data_parallel --steps 20
//   build/bin/data_parallel --nprocs 2 --device auto --check-replicas 5
#include <cstdio>
#include <vector>

#include "common.h"

using namespace minidl;

struct LinearNet : nn::Cell {
  nn::Dense linear1{10, 10}, linear2{10, 1};
  LinearNet() { register_cells({{"_linear1", linear1}, {"_linear2", linear2}}); }
  Tensor forward(const Tensor& x) override { return linear2(linear1(x)); }
};

// The shared flags it honours (the others name data sets, files, epochs or
// Model's features this program has none of, and are refused by name).
constexpr uint64_t kHonours = example::kBatch | example::kLr | example::kOptimizer |
    example::kSeed | example::kThreads | example::kSteps | example::kLogEvery |
    example::kDetectAnomaly | example::kDevice | example::kNprocs | example::kCheckReplicas |
    example::kWarmup | example::kLrScaling;

// The program; main() turns an error into one line "error: ..." and exit status 1.
void program(int argc, char** argv) {
  parallel::launch_if_requested(argc, argv);  // --nprocs N: N ranks through mpirun
  example::Flags flags;  // the shared flags, with Paddle's example's defaults
  flags.parallel = "data";
  flags.steps = 10, flags.batch = 10, flags.lr = 0.001, flags.optimizer = "adam";
  flags.log_every = 1;
  CLI::App app{"Paddle's DataParallel example: LinearNet, MSE, Adam, scale_loss"};
  example::add_flags(app, flags, "data_parallel", kHonours);
  example::parse(app, argc, argv, flags);

  // 1. initialize the parallel environment
  parallel::init();
  const int rank = parallel::rank();
  const Device device = example::prepare(flags);  // --threads, --device, ...

  // 2. create the data-parallel layer (rank 0's weights everywhere) and the optimizer
  manual_seed(flags.seed + rank);
  LinearNet layer;
  layer.to(device);  // before the optimizer, which keeps its state beside the parameters
  parallel::DataParallel dp_layer(layer);
  nn::MSELoss loss_fn;
  std::unique_ptr<optim::Optimizer> optimizer = example::make_optimizer(flags, dp_layer);  // Adam
  std::vector<CallbackRef> list;  // --lr-scaling and --warmup's lr, --check-replicas N
  const example::LrSchedule schedule = example::lr_schedule(flags);
  if (schedule.active()) list.push_back(example::LrWarmup(*optimizer, schedule));
  if (flags.check_replicas > 0) list.push_back(ReplicaCheck(flags.check_replicas));
  CallbackList callbacks(list);
  callbacks.train_begin({.epochs = 1, .steps_per_epoch = flags.steps, .batch_size = flags.batch,
                         .rank = rank, .world_size = parallel::world_size(), .network = &layer});

  // 3. run the layer on this rank's batch
  example::print_batch(flags);
  Tensor inputs = Tensor::randn({flags.batch, 10}).to(device);
  Tensor labels = Tensor::randn({flags.batch, 1}).to(device);
  for (int64_t step = 1; step <= flags.steps; ++step) {
    Tensor outputs = dp_layer(inputs);
    Tensor loss = loss_fn(outputs, labels);
    loss = dp_layer.scale_loss(loss);  // loss / nranks
    loss.backward();
    dp_layer.apply_collective_grads();  // sum of loss / nranks gradients: the mean
    const double lr = optimizer->lr();  // this step's (--lr-scaling, --warmup)
    optimizer->step();
    optimizer->zero_grad();

    float mean_loss = static_cast<float>(loss.item());  // summed over ranks: the mean loss
    parallel::world().allreduce(&mean_loss, 1);
    if (rank == 0 && step % flags.log_every == 0)
      std::printf("step %lld, loss %.6f%s\n", (long long)step, mean_loss,
                  schedule.active() ? cat(", lr ", lr).c_str() : "");
    callbacks.step_end({.epoch = 1, .step = step, .global_step = step,
                        .steps_per_epoch = flags.steps, .loss = mean_loss, .lr = lr});
  }
  callbacks.train_end();
}

int main(int argc, char** argv) {
  return example::run_main([&] { program(argc, argv); });
}
