// Issue 22's losses against PyTorch 1.13: values and gradients (inputs and,
// where PyTorch has them, targets) from tests/reference/loss.json
// (make_loss.py), within 1e-5; probabilities at 0 and 1, logits of 1e4, ties
// at beta and delta, ignored targets and label smoothing included.
#include "torch_reference.h"

using namespace minidl;
using namespace minidl::testing;

namespace {
std::string red(const Attrs& a) { return a["reduction"]; }
}  // namespace

TEST_CASE("PyTorch reference: losses") {
  check_torch_reference(
      "loss",
      {
          {"bce",
           [](const Inputs& x, const Attrs& a) {
             return Outputs{binary_cross_entropy(x[0], x[1], {}, red(a))};
           }},
          {"bce_weight",
           [](const Inputs& x, const Attrs& a) {
             return Outputs{binary_cross_entropy(x[0], x[1], x[2], red(a))};
           }},
          {"bce_logits",
           [](const Inputs& x, const Attrs& a) {
             return Outputs{binary_cross_entropy_with_logits(x[0], x[1], {}, {}, red(a))};
           }},
          {"bce_logits_pw",
           [](const Inputs& x, const Attrs& a) {
             return Outputs{binary_cross_entropy_with_logits(x[0], x[1], x[2], x[3], red(a))};
           }},
          {"nll",
           [](const Inputs& x, const Attrs& a) {
             return Outputs{nll_loss(log_softmax(x[0], 1), x[1], x[2], a["ignore_index"], red(a))};
           }},
          {"ce",
           [](const Inputs& x, const Attrs& a) {
             Tensor w = a["weighted"].get<bool>() ? x[2] : Tensor();
             return Outputs{
                 cross_entropy(x[0], x[1], w, a["ignore_index"], red(a), a["label_smoothing"])};
           }},
          {"l1",
           [](const Inputs& x, const Attrs& a) { return Outputs{l1_loss(x[0], x[1], red(a))}; }},
          {"smooth_l1",
           [](const Inputs& x, const Attrs& a) {
             return Outputs{smooth_l1_loss(x[0], x[1], red(a), a["beta"])};
           }},
          {"huber",
           [](const Inputs& x, const Attrs& a) {
             return Outputs{huber_loss(x[0], x[1], red(a), a["delta"])};
           }},
          {"kl_div",
           [](const Inputs& x, const Attrs& a) {
             return Outputs{kl_div(x[0], x[1], red(a), a["log_target"])};
           }},
      });
}
