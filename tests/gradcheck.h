// Finite-difference gradient check shared by the test suites.
//
// gradcheck(f, inputs) compares the autograd gradient of sum(f(inputs) * R),
// R a fixed random projection so non-scalar outputs are covered, with central
// differences computed in double precision from float32 evaluations. The
// default tolerances (step 1e-2 for O(1) inputs, 2% relative + 2e-3 absolute)
// are loose enough for float32 round-off and tight enough that a gradient
// that is off by a factor, a sign or a missing term fails (tests show one).
#pragma once
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <minidl/minidl.h>

namespace minidl::testing {

struct GradcheckResult {
  bool ok = true;
  double max_abs_error = 0;
  std::string first_failure;  // "input 0 element 3: analytic 1.5 numeric 3.0"
};

struct GradcheckOptions {
  double eps = 1e-2;
  double rtol = 2e-2;
  double atol = 2e-3;
};

inline GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                 std::vector<Tensor> inputs, GradcheckOptions opt = {}) {
  for (auto& x : inputs) x = x.detach().clone().requires_grad_();
  Tensor probe = f(inputs);
  RandomGenerator gen(1234);
  Tensor r = Tensor::empty(probe.shape());
  for (int64_t i = 0; i < r.numel(); ++i) r.data<float>()[i] = static_cast<float>(gen.uniform() + 0.5);
  auto objective = [&](const std::vector<Tensor>& xs) {  // double-precision sum(f * R)
    NoGradGuard ng;
    Tensor y = f(xs).to(kFloat32).contiguous();  // a view op's result too
    double s = 0;
    const float *yp = y.data<float>(), *rp = r.data<float>();
    for (int64_t i = 0; i < y.numel(); ++i) s += double(yp[i]) * rp[i];
    return s;
  };
  (probe.to(kFloat32) * r).sum().backward();
  GradcheckResult res;
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor x = inputs[k];
    Tensor g = x.grad().defined() ? x.grad().to(kFloat32) : Tensor::zeros(x.shape());
    for (int64_t i = 0; i < x.numel(); ++i) {
      std::vector<Tensor> plus, minus;
      for (auto& in : inputs) {
        plus.push_back(in.detach().clone());
        minus.push_back(in.detach().clone());
      }
      float v = x.to(kFloat32).data<float>()[i];
      auto put = [&](Tensor& t, float value) {
        Tensor f32 = t.to(kFloat32);
        f32.data<float>()[i] = value;
        t = f32.to(t.dtype());
      };
      put(plus[k], v + static_cast<float>(opt.eps));
      put(minus[k], v - static_cast<float>(opt.eps));
      double numeric = (objective(plus) - objective(minus)) / (2 * opt.eps);
      double analytic = g.data<float>()[i];
      double err = std::abs(analytic - numeric);
      res.max_abs_error = std::max(res.max_abs_error, err);
      if (err > opt.atol + opt.rtol * std::abs(numeric) && res.ok) {
        res.ok = false;
        res.first_failure = cat("input ", k, " element ", i, ": analytic ", analytic,
                                " numeric ", numeric);
      }
    }
  }
  return res;
}

}  // namespace minidl::testing
