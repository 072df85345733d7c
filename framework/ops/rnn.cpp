// The LSTM cell's pointwise part as one op (issue 23): one kernel for both
// outputs where the composed step took ten ops, and one per output backward,
// which reads the activations the forward kept.
#include "framework/ops.h"
#include "framework/ops/util.h"

namespace minidl {

// gates [B, 4H], c [B, H] -> {h, c'} [B, H]
std::pair<Tensor, Tensor> lstm_cell_pointwise(const Tensor& gates, const Tensor& c) {
  require_f32("lstm_cell_pointwise", gates, "gates");
  require_f32("lstm_cell_pointwise", c, "c");
  MINIDL_CHECK(gates.dim() == 2 && c.dim() == 2 && gates.size(0) == c.size(0) &&
                   gates.size(1) == 4 * c.size(1),
               "lstm_cell_pointwise: expected gates [B, 4H] and c [B, H], got ", gates.shape(),
               " and ", c.shape());
  const int64_t B = c.size(0), H = c.size(1);
  const Kernels& kern = kernels_for("lstm_cell_pointwise", gates, {&c});
  Tensor act = empty_like(c, {B, 5 * H});  // the activations, for the backward (kernels.h)
  Tensor c_out = empty_like(c, {B, H}), h_out = empty_like(c, {B, H});
  kern.lstm_cell_forward(B, H, gates.data_ptr<float>(), c.data_ptr<float>(),
                         act.data_ptr<float>(), c_out.data_ptr<float>(), h_out.data_ptr<float>());
  // of_h: the output's backward (kernels.h), with c for c''s; the inputs'
  // requires_grad read when recorded, so that the closures hold no gates
  auto backward = [act, B, H](bool of_h, bool want_ga, bool want_gc, const Tensor& c) {
    return [of_h, want_ga, want_gc, act, c, B, H](const Tensor& g) {
      Tensor ga = empty_like(g, {B, 4 * H});
      Tensor gc = want_gc ? empty_like(g, {B, H}) : Tensor();
      kernels(g.device())
          .lstm_cell_backward(of_h, B, H, act.data_ptr<float>(),
                              c.defined() ? c.data_ptr<float>() : nullptr, g.data_ptr<float>(),
                              ga.data_ptr<float>(), want_gc ? gc.data_ptr<float>() : nullptr);
      return std::vector<Tensor>{want_ga ? ga : Tensor(), gc};
    };
  };
  const bool ga = gates.requires_grad();
  c_out = record(c_out, "lstm_cell_c", {gates, c}, backward(false, ga, c.requires_grad(), c));
  h_out = record(h_out, "lstm_cell_h", {gates, c_out},
                 backward(true, ga, c_out.requires_grad(), Tensor()));
  return {h_out, c_out};
}

}  // namespace minidl
