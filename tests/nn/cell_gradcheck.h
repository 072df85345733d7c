// Finite-difference check of a cell's parameter gradients, the companion of
// testing::gradcheck (which covers a function's inputs).
//
// cell_param_gradcheck(cell, f) compares the autograd gradient of
// sum(f() * R) with respect to every parameter of `cell` (R a fixed random
// projection) with central differences, perturbing each parameter element in
// place. f() runs the cell on fixed inputs.
#pragma once
#include <functional>

#include "gradcheck.h"

namespace minidl::testing {

inline GradcheckResult cell_param_gradcheck(nn::Cell& cell, const std::function<Tensor()>& f,
                                            GradcheckOptions opt = {}) {
  cell.zero_grad();
  Tensor probe = f();
  RandomGenerator gen(4321);
  Tensor r = Tensor::empty(probe.shape());
  for (int64_t i = 0; i < r.numel(); ++i)
    r.data<float>()[i] = static_cast<float>(gen.uniform() + 0.5);
  auto objective = [&] {
    NoGradGuard ng;
    Tensor y = f();
    double s = 0;
    for (int64_t i = 0; i < y.numel(); ++i) s += double(y.data<float>()[i]) * r.data<float>()[i];
    return s;
  };
  (probe * r).sum().backward();
  GradcheckResult res;
  for (const auto& [name, p] : cell.named_parameters()) {
    Tensor g = p.grad().defined() ? p.grad() : Tensor::zeros(p.shape());
    float* data = p.data<float>();
    for (int64_t i = 0; i < p.numel(); ++i) {
      const float v = data[i];
      data[i] = v + static_cast<float>(opt.eps);
      const double plus = objective();
      data[i] = v - static_cast<float>(opt.eps);
      const double minus = objective();
      data[i] = v;
      const double numeric = (plus - minus) / (2 * opt.eps), analytic = g.data<float>()[i];
      const double err = std::abs(analytic - numeric);
      res.max_abs_error = std::max(res.max_abs_error, err);
      if (err > opt.atol + opt.rtol * std::abs(numeric) && res.ok) {
        res.ok = false;
        res.first_failure =
            cat(name, " element ", i, ": analytic ", analytic, " numeric ", numeric);
      }
    }
  }
  cell.zero_grad();
  return res;
}

}  // namespace minidl::testing
