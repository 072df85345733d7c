// Built against the installed library: a forward/backward pass whose gradient
// is checked against the hand-computed value (d/dw sum(x*w) = x), and
// parallel::init() (a world of one here), which links MPI.
#include <minidl/minidl.h>

#include <cmath>
#include <cstdio>

int main() {
  using namespace minidl;
  Tensor x = Tensor::of({1, 2, 3}, {1, 3});
  Tensor w = Tensor::of({0.5, -1, 2}, {1, 3}).requires_grad_();
  Tensor loss = (x * w).sum();
  loss.backward();
  bool ok = std::abs(loss.item() - 4.5) < 1e-6;
  for (int i = 0; i < 3; ++i) ok = ok && std::abs(w.grad().at({0, i}) - (i + 1)) < 1e-6;
  parallel::init();
  ok = ok && parallel::world_size() == 1;
  std::printf("consumer: loss %.3f, grad [%g, %g, %g]: %s\n", loss.item(), w.grad().at({0, 0}),
              w.grad().at({0, 1}), w.grad().at({0, 2}), ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
