// LeNet-5 on MNIST (the network is in models.h).
//
//   build/bin/lenet_mnist                      # 10 epochs, Momentum 0.9, lr 0.01, batch 64
//   build/bin/lenet_mnist --dataset fashion    # Fashion-MNIST from dataset-fashion-mnist
//   build/bin/lenet_mnist --parallel data --nprocs 2   # data parallel on 2 ranks (or under mpirun)
#include "common.h"
#include "models.h"

// The program; main() turns an error into one line "error: ..." and exit status 1.
void program(int argc, char** argv) {
  minidl::parallel::launch_if_requested(argc, argv);  // --nprocs N: rerun under mpirun
  minidl::parallel::init();                           // a world of one when started alone
  example::Flags flags;
  CLI::App app{"Train LeNet-5 on MNIST"};
  example::add_flags(app, flags);
  example::parse(app, argc, argv);

  minidl::manual_seed(flags.seed);
  example::LeNet5 net;
  example::run(flags, net);
}

int main(int argc, char** argv) {
  return example::run_main([&] { program(argc, argv); });
}
