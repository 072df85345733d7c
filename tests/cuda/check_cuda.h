// Helpers shared by the CUDA suite's files (tests/cuda/*.cpp): a CUDA result
// against its CPU twin. float32 results must agree to a relative error of
// 1e-5 (TF32 off): the largest |cuda - cpu| over the largest |cpu| of the
// tensor, so elements near zero are judged at the tensor's scale.
#pragma once
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace minidl::cuda_suite {

constexpr Device kCuda = Device::CUDA;

// max |got - want| / max |want| over two same-shaped tensors on any devices;
// NaNs must sit at the same places and count as equal.
inline double rel_error(const Tensor& got, const Tensor& want) {
  REQUIRE(got.shape() == want.shape());
  const std::vector<float> g = got.to_float_vector(), w = want.to_float_vector();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i]) || std::isnan(g[i])) {
      if (std::isnan(w[i]) != std::isnan(g[i])) return INFINITY;
      continue;
    }
    diff = std::max(diff, std::abs(static_cast<double>(g[i]) - w[i]));
    scale = std::max(scale, std::abs(static_cast<double>(w[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// A CUDA tensor matches its CPU twin: same shape and dtype, relative error <= tol.
inline void check_match(const Tensor& on_cuda, const Tensor& on_cpu, const char* what, double tol = 1e-5) {
  REQUIRE(on_cuda.defined());
  REQUIRE(on_cpu.defined());
  CHECK(on_cuda.device() == kCuda);
  CHECK(on_cuda.dtype() == on_cpu.dtype());
  const double err = rel_error(on_cuda, on_cpu);
  INFO(std::string(what) << " " << on_cpu.shape() << ": max relative error " << err);
  CHECK(err <= tol);
}

using Op = std::function<Tensor(const std::vector<Tensor>&)>;

// Runs op on CPU inputs and on CUDA copies of them and compares the outputs,
// then backpropagates sum(out * r) (r random, the same on both) and compares
// the gradients of every float32 input.
inline void check_op(const std::string& name, const Op& op, const std::vector<Tensor>& inputs,
              double tol = 1e-5) {
  CAPTURE(name);
  std::vector<Tensor> on_cpu, on_cuda;
  for (const Tensor& x : inputs) {
    Tensor c = x.detach().clone(), g = x.detach().cuda();
    if (x.dtype() == kFloat32) {
      c.requires_grad_();
      g.requires_grad_();
    }
    on_cpu.push_back(c);
    on_cuda.push_back(g);
  }
  Tensor want = op(on_cpu), got = op(on_cuda);
  check_match(got, want, "output", tol);
  if (!want.requires_grad()) return;
  Tensor r = Tensor::randn(want.shape());
  (want * r).sum().backward();
  (got * r.cuda()).sum().backward();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype() != kFloat32) continue;
    CAPTURE(i);
    REQUIRE(on_cuda[i].grad().defined());
    check_match(on_cuda[i].grad(), on_cpu[i].grad(), "gradient", tol);
  }
}

// Values in [lo, hi), away from zero when lo > 0 (for log, sqrt, pow, div).
inline Tensor uniform(const Shape& shape, double lo, double hi) { return Tensor::rand(shape, lo, hi); }

// ---- optim (issue 22) ----
using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

// An optimizer's five steps on CUDA against the CPU, from the same parameters
// [5, 4], [7], [3000] (the last spans several blocks) and gradients, parameter
// 1 skipping step 2 (so its own step count lags); every parameter compared
// after every step.
inline void check_optimizer_steps(const MakeOptimizer& make) {
  const std::vector<Shape> shapes{{5, 4}, {7}, {3000}};
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

}  // namespace minidl::cuda_suite
