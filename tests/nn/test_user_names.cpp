// A user's program with only <minidl/minidl.h> and `using namespace minidl;`:
// a class of its own called Generator (a GAN's) compiles, since minidl's
// random generator is RandomGenerator, and `std::cout << tensor` needs no
// other include.
#include <doctest/doctest.h>
#include <minidl/minidl.h>  // first and alone: it must bring std::cout itself

using namespace minidl;

struct Generator : nn::Cell {
  nn::Dense fc{2, 3};
  Generator() { register_cell("fc", fc); }
  Tensor forward(const Tensor& z) override { return tanh(fc(z)); }
};

TEST_CASE("a user's Generator class and std::cout with only <minidl/minidl.h>") {
  Generator g;
  Tensor y = g(Tensor::zeros({1, 2}));
  CHECK(y.shape() == Shape{1, 3});
  std::cout << "a tensor printed with only <minidl/minidl.h>: " << y << std::endl;
  RandomGenerator rng(5);  // minidl's, by its own name
  CHECK(rng.uniform() < 1);
  const Tensor w = g.fc.weight;  // set_grad is a handle method: it works on a const handle
  w.set_grad(Tensor::ones(w.shape()));
  CHECK(w.grad().sum().item() == 6);
}
