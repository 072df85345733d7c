// Issue 23's fused batch_norm op and nn::BatchNorm2d against PyTorch 1.13:
// outputs, gradients of x, weight and bias, and the running estimates after
// each step, from tests/reference/norm.json (make_norm.py), within 1e-5;
// training and evaluation, with and without affine and running estimates,
// [N, C], [N, C, L], [N, C, H, W] and 5-D inputs.
#include "torch_reference.h"

using namespace minidl;
using namespace minidl::testing;

TEST_CASE("PyTorch reference: batch norm") {
  check_torch_reference(
      "norm",
      {
          {"batch_norm",
           [](const Inputs& x, const Attrs& a) {
             const bool affine = a["affine"], running = a["running"];
             Tensor rm = running ? x[3].clone() : Tensor(), rv = running ? x[4].clone() : Tensor();
             Tensor y = batch_norm(x[0], affine ? x[1] : Tensor(), affine ? x[2] : Tensor(), rm, rv,
                                   a["training"], a["momentum"], a["eps"]);
             return running ? Outputs{y, rm, rv} : Outputs{y};
           }},
          {"batchnorm2d_module",
           [](const Inputs& x, const Attrs& a) {
             nn::BatchNorm2d bn(3, {.momentum = a["momentum"]});
             bn.to(x[0].device());
             bn.weight.copy_(x[2]);
             bn.bias.copy_(x[3]);
             Tensor y1 = bn(x[0]), y2 = bn(x[1]);
             bn.eval();
             Tensor y3 = bn(x[1]);
             return Outputs{y1, y2, y3, bn.running_mean, bn.running_var, bn.num_batches_tracked};
           }},
      });
}
