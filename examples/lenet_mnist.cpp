// LeNet-5 on MNIST, top to bottom: the model, the data pipeline, the loss and
// optimizer in a Model, training, evaluation. (The flags, and the small
// helpers marked example::, are shared with mlp_mnist: common.h.)
//
//   build/bin/lenet_mnist                      # 10 epochs, Momentum 0.9, lr 0.01, batch 64
//   build/bin/lenet_mnist --model lenet-bn     # with batch normalization after each conv
//   build/bin/lenet_mnist --dataset fashion    # Fashion-MNIST from dataset-fashion-mnist
//   build/bin/lenet_mnist --augment shift:2    # random shifts of up to 2 pixels each epoch
//   build/bin/lenet_mnist --parallel data --nprocs 2   # data parallel on 2 ranks (or under mpirun)
//   build/bin/lenet_mnist --micro-size 4       # each batch as 4 micro batches (GradAccumulation)
#include <memory>

#include "common.h"
#include "models.h"

using namespace minidl;

// The program; main() turns an error into one line "error: ..." and exit status 1.
void program(int argc, char** argv) {
  parallel::launch_if_requested(argc, argv);  // --nprocs N: rerun under mpirun
  parallel::init();                           // a world of one when started alone
  example::Flags flags;
  std::string model_name = "lenet";
  CLI::App app{"Train LeNet-5 on MNIST"};
  example::add_flags(app, flags, "lenet_mnist");
  example::Accumulation acc;
  example::add_accumulation_flags(app, acc);  // --micro-size, --sum-loss
  app.add_option("--model", model_name,
                 "lenet, or lenet-bn (BatchNorm2d after each conv; SyncBatchNorm with "
                 "--parallel data unless --norm batch)")
      ->check(CLI::IsMember({"lenet", "lenet-bn"}));
  std::string norm_kind = "sync";
  auto* norm_flag = app.add_option("--norm", norm_kind,
                                   "with --model lenet-bn and --parallel data: sync (statistics "
                                   "over all ranks' samples, SyncBatchNorm) or batch (each rank's own)")
                        ->check(CLI::IsMember({"batch", "sync"}));
  example::parse(app, argc, argv, flags);
  example::check_accumulation(flags, acc);
  MINIDL_CHECK(norm_flag->count() == 0 || model_name == "lenet-bn",
               "--norm: needs --model lenet-bn (plain LeNet-5 has no normalization), got --model ",
               model_name);
  const Device device = example::prepare(flags);  // output paths, --threads, --device
  const bool data_parallel = flags.parallel == "data";

  // 1. The model: the same seed gives every rank the same initial weights.
  manual_seed(flags.seed);
  std::unique_ptr<nn::Cell> net;
  if (model_name == "lenet-bn")
    net = std::make_unique<example::LeNet5BN>(/*sync=*/data_parallel && norm_kind == "sync");
  else
    net = std::make_unique<example::LeNet5>();
  example::load_init(flags, *net);  // a --save file, or a checkpoint's weights
  net->to(device);  // before the optimizer, which keeps its state beside the parameters

  // 2. The data: pixels to [0, 1], normalized with the data set's own mean
  //    and std (MNIST 0.1307/0.3081, Fashion-MNIST 0.2860/0.3530), shuffled
  //    each epoch, with --augment shift:K moved by up to K pixels (a new draw
  //    per image and epoch, made on the prefetch thread), in batches (Model
  //    gives each rank its shard; with micro batches, each rank takes its own).
  const example::Normalization norm = example::normalization(flags);
  data::Dataset train_set = data::MnistDataset(example::data_dir(flags), data::Usage::Train)
                                .map(data::Rescale(1.0 / 255, 0))
                                .map(data::Normalize(norm.mean, norm.std));
  if (!flags.no_shuffle) train_set = train_set.shuffle(flags.seed);
  train_set = example::augment(flags, train_set);  // --augment: data::RandomShift
  example::Accumulator wrapped = example::accumulator(flags, acc, *net);  // --micro-size
  data::BatchDataset train =
      (wrapped.ga && data_parallel ? train_set.shard(parallel::rank(), parallel::world_size())
                                   : train_set)
          .batch(flags.batch);
  data::BatchDataset test = data::MnistDataset(example::data_dir(flags), data::Usage::Test)
                                .map(data::Rescale(1.0 / 255, 0))
                                .map(data::Normalize(norm.mean, norm.std))
                                .batch(1000);
  // LeNet-5's Dense layers fix the image size: refuse others naming the data's.
  for (const Shape& images : {train_set.data().shape(), test.dataset().data().shape()})
    example::check_image_size(flags, images, "lenet_mnist", "LeNet-5");
  example::print_setup(flags, train_set.size(), test.size(), device);

  // 3. Loss, optimizer (sgd, momentum or adam), and the Model that drives them;
  //    with --parallel data it wraps the net in DataParallel. With micro
  //    batches Model drives GradAccumulation instead, around the net or its
  //    DataParallel (which then communicates once per batch).
  nn::CrossEntropyLoss loss;
  std::unique_ptr<optim::Optimizer> opt = example::make_optimizer(flags, *net);
  Model model(wrapped.ga ? static_cast<nn::Cell&>(*wrapped.ga) : *net, loss, *opt,
              {.metrics = {"accuracy"},
               .parallel = data_parallel && !wrapped.ga ? ParallelMode::DataParallel
                                                        : ParallelMode::StandAlone,
               .bucket_bytes = static_cast<size_t>(flags.bucket_kb) << 10,
               .cuda_graph = flags.cuda_graph});

  // 4. Train: the callbacks print the loss, a progress bar and timings
  //    (example::train: Model::train, continuing where --resume's run stood).
  example::start_timeline(flags);
  example::train(flags, model, train, test);
  example::finish_timeline(flags);

  // 5. Evaluate (summed over ranks) and save the weights (--save).
  std::map<std::string, double> metrics = model.eval(test);
  example::report(flags, metrics, *net);
}

int main(int argc, char** argv) {
  return example::run_main([&] { program(argc, argv); });
}
