// The GradAccumulation tutorial's 784-512-512-10 MLP on MNIST: SGD lr 0.01,
// batch 32 (the network is in models.h).
//
//   build/bin/mlp_mnist                    # plain training
//   build/bin/mlp_mnist --micro-size 4     # the tutorial: 4 micro batches of 8 per update
//   build/bin/mlp_mnist --micro-size 4 --sum-loss   # MindSpore's summed loss (and gradients)
#include "common.h"
#include "models.h"

// The program; main() turns an error into one line "error: ..." and exit status 1.
void program(int argc, char** argv) {
  minidl::parallel::launch_if_requested(argc, argv);  // --nprocs N: rerun under mpirun
  minidl::parallel::init();                           // a world of one when started alone
  example::Flags flags;
  flags.optimizer = "sgd";
  flags.batch = 32;
  example::Accumulation acc;
  CLI::App app{"Train the 784-512-512-10 MLP on MNIST"};
  example::add_flags(app, flags, "mlp_mnist");
  example::add_accumulation_flags(app, acc);  // --micro-size, --sum-loss
  example::parse(app, argc, argv, flags);
  example::check_accumulation(flags, acc);

  minidl::manual_seed(flags.seed);
  example::MLP net;
  example::Accumulator wrapped = example::accumulator(flags, acc, net);  // --micro-size
  example::run(flags, net, wrapped.ga.get());
}

int main(int argc, char** argv) {
  return example::run_main([&] { program(argc, argv); });
}
