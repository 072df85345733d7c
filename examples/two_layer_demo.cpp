// A two-layer net learns a noisy linear map on synthetic data, with nothing
// but framework ops: linear, relu, mean squared error and a hand-written SGD
// step. It prints the loss as it falls.
#include <cstdio>

#include "cli.h"

using namespace minidl;

// The program; main() turns an error into one line "error: ..." and exit status 1.
void program() {
  manual_seed(0);
  const int64_t n = 256, in = 8, hidden = 32;
  Tensor x = Tensor::randn({n, in});
  Tensor true_w = Tensor::randn({1, in});
  Tensor y = linear(x, true_w, Tensor()) + Tensor::randn({n, 1}, 0, 0.1);

  Tensor w1 = (Tensor::randn({hidden, in}) * 0.3).detach().requires_grad_();
  Tensor b1 = Tensor::zeros({hidden}).requires_grad_();
  Tensor w2 = (Tensor::randn({1, hidden}) * 0.3).detach().requires_grad_();
  Tensor b2 = Tensor::zeros({1}).requires_grad_();
  const float lr = 0.05f;

  for (int step = 0; step <= 200; ++step) {
    Tensor pred = linear(relu(linear(x, w1, b1)), w2, b2);
    Tensor loss = (pred - y).pow(2).mean();
    loss.backward();
    {
      NoGradGuard no_grad;
      for (Tensor* p : {&w1, &b1, &w2, &b2}) {
        float *v = p->data<float>(), *g = p->grad().data<float>();
        for (int64_t i = 0; i < p->numel(); ++i) v[i] -= lr * g[i];
        p->zero_grad();
      }
    }
    if (step % 20 == 0) std::printf("step %3d  loss %.6f\n", step, loss.item());
  }
}

int main() { return example::run_main(program); }
