// RMSprop's update kernel and optimizers with parameter groups (one launch per
// group) on CUDA against the CPU (issue 22's optim group).
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <functional>
#include <memory>

#include "cuda/check_cuda.h"

using namespace minidl;
using namespace minidl::cuda_suite;

TEST_CASE("cuda: RMSprop, plain, centered and with momentum, takes the CPU's steps") {
  manual_seed(31);
  for (const optim::RMSpropOptions o :
       {optim::RMSpropOptions{}, optim::RMSpropOptions{.weight_decay = 0.01, .momentum = 0.9},
        optim::RMSpropOptions{.alpha = 0.9, .centered = true},
        optim::RMSpropOptions{.eps = 1e-6, .momentum = 0.5, .centered = true}}) {
    CAPTURE(o.momentum);
    CAPTURE(o.centered);
    check_optimizer_steps([o](std::vector<Tensor> p) {
      return std::make_unique<optim::RMSprop>(std::move(p), 0.01, o);
    });
  }
}

TEST_CASE("cuda: parameter groups with their own options take the CPU's steps") {
  manual_seed(32);
  check_optimizer_steps([](std::vector<Tensor> p) {
    return std::make_unique<optim::RMSprop>(
        std::vector<optim::ParamGroup>{{{p[0], p[2]}}, {{p[1]}, {.lr = 0.05, .momentum = 0.9, .centered = true}}},
        optim::GroupOptions{.lr = 0.01});
  });
  check_optimizer_steps([](std::vector<Tensor> p) {
    return std::make_unique<optim::Momentum>(
        std::vector<optim::ParamGroup>{{{p[0]}}, {{p[1], p[2]}, {.lr = 0.01, .weight_decay = 0.1, .momentum = 0}}},
        optim::GroupOptions{.lr = 0.1, .momentum = 0.9});
  });
  check_optimizer_steps([](std::vector<Tensor> p) {
    return std::make_unique<optim::Adam>(
        std::vector<optim::ParamGroup>{{{p[0], p[1]}}, {{p[2]}, {.lr = 0.03, .betas = std::pair{0.8, 0.99}}}},
        optim::GroupOptions{.lr = 0.01});
  });
}
