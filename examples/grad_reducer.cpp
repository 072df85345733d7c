// MindSpore's DistributedGradReducer example (the TrainingWrapper) in C++:
// one training step of x [16, 16] times a [16, 10] weight of ones, MSE against
// zeros, Momentum (lr 0.1, momentum 0.9), with the gradients averaged over
// ranks between backward and the update. Prints the step's loss, 256.0, on
// any number of ranks (rank 0 prints, after the batch line of every example):
//
//   build/bin/grad_reducer
//   mpirun -np 4 build/bin/grad_reducer [--device cpu|cuda|auto]
//   build/bin/grad_reducer --nprocs 4 --batch 8   # the loss is 256.0 at any batch
#include <charconv>
#include <cstdio>
#include <string>

#include "common.h"

using namespace minidl;

// y = x W; W [in, out] starts as ones.
struct Net : nn::Cell {
  nn::MatMul matmul;
  Tensor weight;
  Net(int64_t in_features, int64_t out_features) {
    weight = register_parameter("weight", Tensor::ones({in_features, out_features}));
    register_cell("matmul", matmul);
  }
  Tensor forward(const Tensor& x) override { return matmul(x, weight); }
};

// One step: loss = network(data, label); backward; reduce the gradients; update.
struct TrainingWrapper : nn::Cell {
  nn::Cell& network;
  optim::Optimizer& optimizer;
  parallel::DistributedGradReducer grad_reducer;
  TrainingWrapper(nn::Cell& net, optim::Optimizer& opt)
      : network(net),
        optimizer(opt),
        grad_reducer(opt.parameters(), /*mean=*/true, /*degree=*/parallel::world_size()) {}
  Tensor forward(const Tensor& data, const Tensor& label) override {
    Tensor loss = network(data, label);
    loss.backward();
    grad_reducer.reduce_grads();  // every rank's gradients become the mean
    optimizer.step();
    optimizer.zero_grad();
    return loss;
  }
};

// Python's repr of a float: the shortest digits that read back, with ".0" when integral.
std::string python_repr(float value) {
  char buf[32];
  std::string s(buf, std::to_chars(buf, buf + sizeof buf, value).ptr);
  return s.find_first_of(".en") == std::string::npos ? s + ".0" : s;
}

// The shared flags it honours (one fixed step on ones: no data, seed, steps
// or files; the others are refused by name).
constexpr uint64_t kHonours = example::kBatch | example::kLr | example::kOptimizer |
    example::kThreads | example::kDetectAnomaly | example::kDevice | example::kNprocs;

// The program; main() turns an error into one line "error: ..." and exit status 1.
void program(int argc, char** argv) {
  parallel::launch_if_requested(argc, argv);  // --nprocs N: N ranks through mpirun
  example::Flags flags;  // the shared flags, with MindSpore's example's defaults
  flags.parallel = "data";
  flags.batch = 16, flags.lr = 0.1, flags.optimizer = "momentum";  // Momentum 0.9
  CLI::App app{"MindSpore's DistributedGradReducer example: one step, the loss on rank 0"};
  example::add_flags(app, flags, "grad_reducer", kHonours);
  example::parse(app, argc, argv, flags);
  parallel::init();
  const Device device = example::prepare(flags);  // --threads, --device, ...
  const int64_t in_features = 16, out_features = 10;
  Net network(in_features, out_features);
  network.to(device);  // before the optimizer, which keeps its state beside the parameters
  nn::MSELoss loss;
  nn::WithLossCell net_with_loss(network, loss);
  std::unique_ptr<optim::Optimizer> optimizer = example::make_optimizer(flags, net_with_loss);
  TrainingWrapper train_cell(net_with_loss, *optimizer);

  example::print_batch(flags);
  Tensor inputs = Tensor::ones({flags.batch, in_features}, kFloat32, device);
  Tensor label = Tensor::zeros({flags.batch, out_features}, kFloat32, device);
  Tensor out = train_cell(inputs, label);
  if (parallel::rank() == 0)
    std::printf("%s\n", python_repr(static_cast<float>(out.item())).c_str());
}

int main(int argc, char** argv) {
  return example::run_main([&] { program(argc, argv); });
}
