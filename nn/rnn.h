// Recurrent layers: RNN (Elman, tanh or relu), LSTM and GRU, as PyTorch's.
//
// Letters: T steps, B batch, I input_size, H hidden_size, L num_layers,
// D directions (2 with bidirectional, else 1), G gates (RNN 1, LSTM 4, GRU 3).
//   input  x [T, B, I]     ([B, T, I] with batch_first; unbatched [T, I])
//   output y [T, B, D*H]   ([B, T, D*H] with batch_first; unbatched [T, D*H]):
//          the last layer's h_t for every t (bidirectional: the forward
//          direction's, then the reverse direction's, which reads t = T-1 .. 0)
//   state  h [D*L, B, H]   (unbatched [D*L, H]; never batch first), and c for
//          LSTM, entry k*D + d for layer k, direction d: given, the initial
//          state; returned, the state after each direction's last step.
//          Not given (undefined): zeros.
// LSTM with proj_size P (0 < P < H; PyTorch's projections): h_t is projected,
// h_t = W_hr (o * tanh(c_t)), so y is [T, B, D*P], h [D*L, B, P] and layer k > 0
// reads D*P features; c stays [D*L, B, H].
//
// Parameters, per layer k and direction (PyTorch's names, shapes, order and
// gate order, so a PyTorch state_dict loads unchanged):
//   weight_ih_l{k} [G*H, I] (layer 0) or [G*H, D*H], weight_hh_l{k} [G*H, H],
//   bias_ih_l{k} [G*H], bias_hh_l{k} [G*H] (without bias: absent), and with
//   proj_size P: weight_hr_l{k} [P, H] (H in weight_ih of layer k > 0 and in
//   weight_hh is then P); the
//   reverse direction's the same with the suffix _reverse (weight_ih_l0_reverse);
// all initialised U(-1/sqrt(H), 1/sqrt(H)).
// Gates, with gx = x_t W_ih^T + b_ih and gh = h_{t-1} W_hh^T + b_hh:
//   RNN:  h_t = tanh(gx + gh)            (or relu)
//   LSTM: i, f, g, o = chunks of gx + gh (in this order);
//         c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g), h_t = sigmoid(o) tanh(c_t)
//   GRU:  r, z, n chunks of gx and of gh; r = sigmoid(gx_r + gh_r),
//         z = sigmoid(gx_z + gh_z), n = tanh(gx_n + r * gh_n), h_t = (1 - z) n + z h_{t-1}
// Cost: per layer and direction one GEMM for the input path of all steps
// ([T*B, I] x [I, G*H]) and one GEMM per step for the hidden path ([B, H] x [H, G*H]).
// LSTM without a projection and GRU run each layer and direction as one op,
// lstm_layer and gru_layer (framework/ops.h): a GEMM and one or two kernels
// a step each way, W_hh's gradient one GEMM over all steps.
//
// Errors (minidl::Error, naming the layer and both shapes): an input that is
// not [T, B, I] / [T, I]; a state that is not [D*L, B, H] (h with proj_size:
// [D*L, B, P]); dropout outside [0, 1); nonlinearity other than tanh, relu
// (and any for GRU); proj_size < 0 or >= hidden_size.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/cell.h"

namespace minidl::nn {

struct RNNOptions {
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;
  // Dropout on each layer's output but the last, in training mode only.
  double dropout = 0;
  bool bidirectional = false;
  std::string nonlinearity = "tanh";  // RNN only: "tanh" or "relu"
};

// LSTM's options (PyTorch's LSTMOptions): RNNOptions' but nonlinearity, and
// proj_size: 0, no projection, or P in [1, hidden_size) (see above).
struct LSTMOptions {
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;
  double dropout = 0;
  bool bidirectional = false;
  int64_t proj_size = 0;
};

// What RNN, LSTM and GRU share: options, parameters, shape checks and the
// loop over layers and steps. A subclass gives the gates of one step.
class RNNBase : public Cell {
 public:
  const int64_t input_size, hidden_size;
  const RNNOptions options;
  const int64_t proj_size;  // LSTM's (0: none; RNN, GRU: always 0)
  // Per layer and direction (entry k*D + d), the same tensors as the named
  // parameters (bias_*: undefined without bias; weight_hr: undefined without proj_size).
  std::vector<Tensor> weight_ih, weight_hh, bias_ih, bias_hh, weight_hr;

 protected:
  RNNBase(const char* kind, int64_t gates, int64_t input_size, int64_t hidden_size,
          RNNOptions options, int64_t proj_size = 0);
  // One step: gx [B, G*H] (input path, bias included), gh [B, G*H] (hidden
  // path) and the state (h, and c for LSTM) -> the next state, in place.
  // GRU, and LSTM without a projection, run each layer as one op instead
  // (lstm_layer, gru_layer) and have no step.
  virtual void step(const Tensor& gx, const Tensor& gh, Tensor& h, Tensor& c) const;
  // x in any accepted layout, states [D*L, B, H] (h [D*L, B, P] with
  // proj_size) or undefined ->
  // (output in x's layout, h_n, c_n); c_n only where `with_c`.
  struct Result {
    Tensor output, h, c;
  };
  Result run(const Tensor& x, const Tensor& h0, const Tensor& c0, bool with_c);
  // f() inside this layer's autograd scope, as Cell::operator() runs forward.
  template <class F>
  auto scoped(F&& f) {
    if (!scope_tracking()) return f();
    CallScope scope(*this);
    return f();
  }
  const char* kind_;

 private:
  Tensor check_state(const Tensor& s, const char* name, int64_t size, const Tensor& x,
                     bool unbatched) const;
  std::string describe() const;  // "LSTM(5, 6, num_layers=2)"
};

// Elman RNN: forward(x, h0) -> (y, h_n).
class RNN : public RNNBase {
 public:
  RNN(int64_t input_size, int64_t hidden_size, RNNOptions options = {});
  std::pair<Tensor, Tensor> forward(const Tensor& x, const std::optional<Tensor>& h0 = {});
  std::pair<Tensor, Tensor> operator()(const Tensor& x, const std::optional<Tensor>& h0 = {});

 protected:
  void step(const Tensor& gx, const Tensor& gh, Tensor& h, Tensor& c) const override;

 private:
  bool relu_;
};

struct LSTMState {
  Tensor h, c;  // [D*L, B, H] each (h [D*L, B, P] with proj_size); both undefined: zeros
};

// LSTM: forward(x, {h0, c0}) -> (y, {h_n, c_n}).
class LSTM : public RNNBase {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, LSTMOptions options = {});
  std::pair<Tensor, LSTMState> forward(const Tensor& x, const LSTMState& state = {});
  std::pair<Tensor, LSTMState> operator()(const Tensor& x, const LSTMState& state = {});

 protected:
  void step(const Tensor& gx, const Tensor& gh, Tensor& h, Tensor& c) const override;
};

// GRU: forward(x, h0) -> (y, h_n).
class GRU : public RNNBase {
 public:
  GRU(int64_t input_size, int64_t hidden_size, RNNOptions options = {});
  std::pair<Tensor, Tensor> forward(const Tensor& x, const std::optional<Tensor>& h0 = {});
  std::pair<Tensor, Tensor> operator()(const Tensor& x, const std::optional<Tensor>& h0 = {});
};

// ---- cells: one step of the layers above ----
// x [B, I] (or unbatched [I]), state [B, H] ([H]; undefined: zeros) -> the
// next state. Parameters as PyTorch's RNNCell/LSTMCell/GRUCell: weight_ih
// [G*H, I], weight_hh [G*H, H], bias_ih, bias_hh [G*H] (absent without bias),
// U(-1/sqrt(H), 1/sqrt(H)); the gates as above.
class RNNCellBase : public Cell {
 public:
  const int64_t input_size, hidden_size;
  Tensor weight_ih, weight_hh, bias_ih, bias_hh;

 protected:
  RNNCellBase(const char* kind, int64_t gates, int64_t input_size, int64_t hidden_size, bool bias);
  // Checks x and a state; both made batched [B, ...] (zeros for an undefined state).
  Tensor batched_input(const Tensor& x) const;
  Tensor batched_state(const Tensor& s, const Tensor& x, const char* name) const;
  Tensor input_gates(const Tensor& x) const;   // [B, I] -> [B, G*H]
  Tensor hidden_gates(const Tensor& h) const;  // [B, H] -> [B, G*H]
  const char* kind_;
};

// h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)
class RNNCell : public RNNCellBase {
 public:
  RNNCell(int64_t input_size, int64_t hidden_size, bool bias = true,
          const std::string& nonlinearity = "tanh");
  Tensor forward(const Tensor& x) override;  // zero state
  Tensor forward(const Tensor& x, const Tensor& h) override;

 private:
  bool relu_;
};

// (h', c') from x and (h, c)
class LSTMCell : public RNNCellBase {
 public:
  LSTMCell(int64_t input_size, int64_t hidden_size, bool bias = true);
  LSTMState forward(const Tensor& x, const LSTMState& state = {});
  LSTMState operator()(const Tensor& x, const LSTMState& state = {});
};

class GRUCell : public RNNCellBase {
 public:
  GRUCell(int64_t input_size, int64_t hidden_size, bool bias = true);
  Tensor forward(const Tensor& x) override;  // zero state
  Tensor forward(const Tensor& x, const Tensor& h) override;
};

}  // namespace minidl::nn
