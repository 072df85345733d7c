// LeNet-5 on MNIST with AdaSum (MindSpore's AdaSumByGradWrapCell) over 2, 4,
// 8, ... ranks: each rank trains on its shard of every epoch; after backward
// the ranks' gradients are combined by AdaSum and the wrapped optimizer steps.
// `--reduce mean` averages them instead (DistributedGradReducer), to compare.
//
//   build/bin/adasum --nprocs 2 --epochs 2         # re-launches itself under mpirun
//   mpirun -np 4 build/bin/adasum
//   build/bin/adasum --nprocs 2 --reduce mean      # plain averaging
#include "common.h"
#include "models.h"

using namespace minidl;

// The program; main() turns an error into one line "error: ..." and exit status 1.
void program(int argc, char** argv) {
  parallel::launch_if_requested(argc, argv);  // --nprocs N: rerun under mpirun
  parallel::init();
  example::Flags flags;
  std::string reduce = "adasum";
  CLI::App app{"Train LeNet-5 on MNIST with AdaSum over a power-of-two number of ranks"};
  example::add_flags(app, flags);
  app.add_option("--reduce", reduce, "adasum, or mean: average the gradients instead")
      ->check(CLI::IsMember({"adasum", "mean"}));
  example::parse(app, argc, argv);
  example::check_outputs(flags);
  if (flags.threads > 0) set_num_threads(static_cast<int>(flags.threads));
  const int rank = parallel::rank(), ranks = parallel::world_size();

  manual_seed(flags.seed);  // the same initial weights on every rank
  example::LeNet5 net;
  if (!flags.init.empty()) net.load(flags.init);
  nn::CrossEntropyLoss loss_fn;
  auto opt = example::make_optimizer(flags, net);
  std::unique_ptr<parallel::AdaSumByGradWrapCell> adasum;  // throws alone, or on 3 ranks
  std::unique_ptr<parallel::DistributedGradReducer> mean;
  if (reduce == "adasum")
    adasum = std::make_unique<parallel::AdaSumByGradWrapCell>(*opt);
  else
    mean = std::make_unique<parallel::DistributedGradReducer>(opt->parameters());

  data::Dataset train_set = example::load(flags, data::Usage::Train);
  if (!flags.no_shuffle) train_set = train_set.shuffle(flags.seed);
  auto train = train_set.shard(rank, ranks).batch(flags.batch);  // this rank's samples
  auto test = example::load(flags, data::Usage::Test).batch(1000);
  if (rank == 0)
    std::printf("%s: %lld training images, %d ranks x %lld per batch, %s, %d threads per rank\n",
                flags.dataset.c_str(), (long long)train_set.size(), ranks,
                (long long)flags.batch, reduce.c_str(), num_threads());

  LossMonitor monitor(flags.log_every);
  if (!flags.timeline.empty()) parallel::Timeline::enable();
  int64_t steps = 0;
  for (int64_t epoch = 1; epoch <= flags.epochs && steps != flags.steps; ++epoch) {
    int64_t step = 0;
    for (auto& batch : train.epoch(epoch - 1)) {
      parallel::Timeline::set_step(steps + 1);
      Tensor loss;
      {
        parallel::TimelineScope scope("forward", "compute");
        loss = loss_fn(net(batch.data), batch.labels);
      }
      {
        parallel::TimelineScope scope("backward", "compute");
        loss.backward();
      }
      {
        parallel::TimelineScope scope("reduce and optimizer step", "compute");
        if (adasum) {
          adasum->step();  // gradients combined across ranks, then the optimizer steps
        } else {
          mean->reduce_grads();
          opt->step();
        }
      }
      opt->zero_grad();
      double mean_loss = loss.item() / ranks;
      parallel::world().allreduce(&mean_loss, 1);
      ++step;
      if (rank == 0) monitor.on_step_end({.epoch = epoch, .step = step, .loss = mean_loss});
      if (flags.check_replicas > 0 && (steps + 1) % flags.check_replicas == 0)
        parallel::check_replicas(net, parallel::world(), cat("step ", steps + 1));
      if (++steps == flags.steps) break;
    }
  }
  if (!flags.timeline.empty()) {
    parallel::Timeline::disable();
    parallel::Timeline::write(flags.timeline);  // every rank: rank 0 gathers and writes
  }

  // Every rank holds the same weights; each scores the whole test set.
  Model model(net, loss_fn, *opt);
  auto metrics = model.eval(test);
  if (rank == 0)
    std::printf("test accuracy: %.4f  test loss: %.4f\n", metrics["accuracy"], metrics["loss"]);
  if (rank == 0 && !flags.save.empty()) net.save(flags.save);
}

int main(int argc, char** argv) {
  return example::run_main([&] { program(argc, argv); });
}
