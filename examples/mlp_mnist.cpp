// The GradAccumulation tutorial's 784-512-512-10 MLP on MNIST: SGD lr 0.01,
// batch 32 (the network is in models.h).
//
//   build/bin/mlp_mnist
#include "common.h"
#include "models.h"

int main(int argc, char** argv) {
  minidl::parallel::launch_if_requested(argc, argv);  // --nprocs N: rerun under mpirun
  minidl::parallel::init();                           // a world of one when started alone
  example::Flags flags;
  flags.optimizer = "sgd";
  flags.batch = 32;
  CLI::App app{"Train the 784-512-512-10 MLP on MNIST"};
  example::add_flags(app, flags);
  CLI11_PARSE(app, argc, argv);

  minidl::manual_seed(flags.seed);
  example::MLP net;
  example::run(flags, net);
}
