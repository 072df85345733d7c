// RMSprop's update kernel and optimizers with parameter groups (one launch per
// group) on CUDA against the CPU (issue 22's optim group).
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <functional>
#include <memory>

#include "cuda/check_cuda.h"

using namespace minidl;
using namespace minidl::cuda_suite;

namespace {

using Make = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

// Five steps from the same parameters and gradients on both devices, parameter
// 1 skipping step 2; every parameter compared after every step.
void check_steps(const Make& make) {
  const std::vector<Shape> shapes{{5, 4}, {7}, {3000}};  // the last spans several blocks
  std::vector<Tensor> on_cpu, on_cuda;
  for (const Shape& s : shapes) {
    Tensor p = Tensor::randn(s);
    on_cpu.push_back(p.clone().requires_grad_());
    on_cuda.push_back(p.cuda().requires_grad_());
  }
  auto cpu_opt = make(on_cpu), cuda_opt = make(on_cuda);
  for (int step = 0; step < 5; ++step) {
    CAPTURE(step);
    for (size_t i = 0; i < shapes.size(); ++i) {
      if (i == 1 && step == 2) {
        on_cpu[i].zero_grad();
        on_cuda[i].zero_grad();
        continue;
      }
      Tensor g = Tensor::randn(shapes[i]);
      on_cpu[i].set_grad(g);
      on_cuda[i].set_grad(g.cuda());
    }
    cpu_opt->step();
    cuda_opt->step();
    for (size_t i = 0; i < shapes.size(); ++i) check_match(on_cuda[i], on_cpu[i], "parameter");
  }
}

}  // namespace

TEST_CASE("cuda: RMSprop, plain, centered and with momentum, takes the CPU's steps") {
  manual_seed(31);
  for (const optim::RMSpropOptions o :
       {optim::RMSpropOptions{}, optim::RMSpropOptions{.weight_decay = 0.01, .momentum = 0.9},
        optim::RMSpropOptions{.alpha = 0.9, .centered = true},
        optim::RMSpropOptions{.eps = 1e-6, .momentum = 0.5, .centered = true}}) {
    CAPTURE(o.momentum);
    CAPTURE(o.centered);
    check_steps([o](std::vector<Tensor> p) {
      return std::make_unique<optim::RMSprop>(std::move(p), 0.01, o);
    });
  }
}

TEST_CASE("cuda: parameter groups with their own options take the CPU's steps") {
  manual_seed(32);
  check_steps([](std::vector<Tensor> p) {
    return std::make_unique<optim::RMSprop>(
        std::vector<optim::ParamGroup>{{{p[0], p[2]}}, {{p[1]}, {.lr = 0.05, .momentum = 0.9, .centered = true}}},
        optim::GroupOptions{.lr = 0.01});
  });
  check_steps([](std::vector<Tensor> p) {
    return std::make_unique<optim::Momentum>(
        std::vector<optim::ParamGroup>{{{p[0]}}, {{p[1], p[2]}, {.lr = 0.01, .weight_decay = 0.1, .momentum = 0}}},
        optim::GroupOptions{.lr = 0.1, .momentum = 0.9});
  });
  check_steps([](std::vector<Tensor> p) {
    return std::make_unique<optim::Adam>(
        std::vector<optim::ParamGroup>{{{p[0], p[1]}}, {{p[2]}, {.lr = 0.03, .betas = std::pair{0.8, 0.99}}}},
        optim::GroupOptions{.lr = 0.01});
  });
}
