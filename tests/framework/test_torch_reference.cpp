// The ops minidl had before issue 22 against PyTorch 1.13: values and
// gradients from tests/reference/core.json (make_core.py), within 1e-5.
#include "torch_reference.h"

using namespace minidl;
using namespace minidl::testing;

TEST_CASE("PyTorch reference: elementwise, softmax, matmul, linear, conv, pooling, cross entropy") {
  check_torch_reference("core", {
      {"add", [](const Inputs& x, const Attrs&) { return Outputs{add(x[0], x[1])}; }},
      {"mul", [](const Inputs& x, const Attrs&) { return Outputs{mul(x[0], x[1])}; }},
      {"div", [](const Inputs& x, const Attrs&) { return Outputs{div(x[0], x[1])}; }},
      {"exp", [](const Inputs& x, const Attrs&) { return Outputs{exp(x[0])}; }},
      {"log", [](const Inputs& x, const Attrs&) { return Outputs{log(x[0])}; }},
      {"sigmoid", [](const Inputs& x, const Attrs&) { return Outputs{sigmoid(x[0])}; }},
      {"tanh", [](const Inputs& x, const Attrs&) { return Outputs{tanh(x[0])}; }},
      {"softmax", [](const Inputs& x, const Attrs& a) { return Outputs{softmax(x[0], a["dim"])}; }},
      {"log_softmax",
       [](const Inputs& x, const Attrs& a) { return Outputs{log_softmax(x[0], a["dim"])}; }},
      {"matmul", [](const Inputs& x, const Attrs&) { return Outputs{matmul(x[0], x[1])}; }},
      {"linear", [](const Inputs& x, const Attrs&) { return Outputs{linear(x[0], x[1], x[2])}; }},
      {"conv2d",
       [](const Inputs& x, const Attrs& a) {
         return Outputs{conv2d(x[0], x[1], x[2], {.stride = a["stride"], .padding = a["padding"]})};
       }},
      {"max_pool2d",
       [](const Inputs& x, const Attrs& a) {
         return Outputs{max_pool2d(x[0], a["kernel"], a["stride"], a["padding"])};
       }},
      {"avg_pool2d", [](const Inputs& x, const Attrs& a) { return Outputs{avg_pool2d(x[0], a["kernel"])}; }},
      {"cross_entropy",
       [](const Inputs& x, const Attrs&) { return Outputs{cross_entropy(x[0], x[1])}; }},
  });
}
