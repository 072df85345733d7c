// Paddle's DataParallel example in C++: LinearNet (Linear 10->10->1) trained
// with MSE and Adam (lr 0.001) in the explicit style: scale_loss, backward,
// apply_collective_grads. Each rank draws its own random batch; rank 0 prints
// the loss averaged over ranks at every step.
//
//   build/bin/data_parallel --nprocs 2        # re-launches itself under mpirun
//   mpirun -np 2 build/bin/data_parallel --steps 20
#include <cstdio>

#include "cli.h"

using namespace minidl;

struct LinearNet : nn::Cell {
  nn::Dense linear1{10, 10}, linear2{10, 1};
  LinearNet() { register_cells({{"_linear1", linear1}, {"_linear2", linear2}}); }
  Tensor forward(const Tensor& x) override { return linear2(linear1(x)); }
};

// The program; main() turns an error into one line "error: ..." and exit status 1.
void program(int argc, char** argv) {
  parallel::launch_if_requested(argc, argv);  // --nprocs N: N ranks through mpirun
  int steps = 10;
  CLI::App app{"Paddle's DataParallel example: LinearNet, MSE, Adam, scale_loss"};
  app.add_option("--steps", steps, "training steps")->check(example::in_range(1, 1'000'000'000));
  example::parse(app, argc, argv);

  // 1. initialize the parallel environment
  parallel::init();
  const int rank = parallel::rank();

  // 2. create the data-parallel layer (rank 0's weights everywhere) and the optimizer
  manual_seed(rank);
  LinearNet layer;
  parallel::DataParallel dp_layer(layer);
  nn::MSELoss loss_fn;
  optim::Adam adam(dp_layer.trainable_params(), /*lr=*/0.001);

  // 3. run the layer on this rank's batch
  Tensor inputs = Tensor::randn({10, 10});
  Tensor labels = Tensor::randn({10, 1});
  for (int step = 1; step <= steps; ++step) {
    Tensor outputs = dp_layer(inputs);
    Tensor loss = loss_fn(outputs, labels);
    loss = dp_layer.scale_loss(loss);  // loss / nranks
    loss.backward();
    dp_layer.apply_collective_grads();  // sum of loss / nranks gradients: the mean
    adam.step();
    adam.zero_grad();

    float mean_loss = static_cast<float>(loss.item());  // summed over ranks: the mean loss
    parallel::world().allreduce(&mean_loss, 1);
    if (rank == 0) std::printf("step %d, loss %.6f\n", step, mean_loss);
  }
}

int main(int argc, char** argv) {
  return example::run_main([&] { program(argc, argv); });
}
