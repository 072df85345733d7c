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

// The shared flags adasum honours; the others (--save-every, --keep-last,
// --resume: no resumable state in this loop; --parallel: always data-parallel;
// --bucket-kb: AdaSum packs all gradients into one vector; --cuda-graph) are
// refused by name.
constexpr uint64_t kHonours = example::kAllFlags & ~(example::kSaveEvery | example::kKeepLast |
    example::kResume | example::kParallel | example::kBucketKb | example::kCudaGraph);

// The program; main() turns an error into one line "error: ..." and exit status 1.
void program(int argc, char** argv) {
  parallel::launch_if_requested(argc, argv);  // --nprocs N: rerun under mpirun
  parallel::init();
  example::Flags flags;
  flags.parallel = "data";  // the ranks always train one model
  std::string reduce = "adasum";
  CLI::App app{"Train LeNet-5 on MNIST with AdaSum over a power-of-two number of ranks"};
  example::add_flags(app, flags, "adasum", kHonours);
  app.add_option("--reduce", reduce, "adasum, or mean: average the gradients instead")
      ->check(CLI::IsMember({"adasum", "mean"}));
  example::parse(app, argc, argv, flags);
  const Device device = example::prepare(flags);  // output paths, --threads, --device
  const int rank = parallel::rank(), ranks = parallel::world_size();

  manual_seed(flags.seed);  // the same initial weights on every rank
  example::LeNet5 net;
  example::load_init(flags, net);
  net.to(device);  // before the optimizer, which keeps its state beside the parameters
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
  train_set = example::augment(flags, train_set);  // --augment: data::RandomShift
  auto train = train_set.shard(rank, ranks).batch(flags.batch);  // this rank's samples
  auto test = example::load(flags, data::Usage::Test).batch(1000);
  example::print_batch(flags, cat(", ", reduce));
  if (rank == 0)
    std::printf("%s: %lld training images, %s, %d threads per rank, device %s\n",
                flags.dataset.c_str(), (long long)train_set.size(), reduce.c_str(),
                num_threads(), device_name(device));

  // The callbacks Model::train would run (--lr-scaling and --warmup's lr,
  // loss, progress, times, --history, --check-replicas), told by hand what it
  // tells them.
  Model model(net, loss_fn, *opt);  // for eval: every rank scores the whole test set
  CallbackList callbacks(example::callbacks(flags, *opt));
  callbacks.train_begin({.epochs = flags.epochs, .steps_per_epoch = train.num_batches(),
                         .batch_size = flags.batch, .rank = rank, .world_size = ranks,
                         .network = &net});
  example::start_timeline(flags);
  int64_t steps = 0;
  for (int64_t epoch = 1; epoch <= flags.epochs && steps != flags.steps; ++epoch) {
    example::EpochClock clock;
    for (auto& batch : train.epoch(epoch - 1)) {
      parallel::Timeline::set_step(steps + 1);
      const Tensor labels = batch.labels.to(device);
      Tensor logits, loss;
      {
        parallel::TimelineScope scope("forward", "compute");
        logits = net(batch.data.to(device));
        loss = loss_fn(logits, labels);
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
      callbacks.step_end(clock.step(epoch, ++steps, train.num_batches(), loss, logits, labels,
                                    opt->lr()));
      if (steps == flags.steps) break;
    }
    callbacks.epoch_end(clock.end(epoch, flags.history.empty() ? nullptr : &model, test));
  }
  callbacks.train_end();
  example::finish_timeline(flags);

  // Every rank holds the same weights; each scores the whole test set.
  example::report(flags, model.eval(test), net);
}

int main(int argc, char** argv) {
  return example::run_main([&] { program(argc, argv); });
}
