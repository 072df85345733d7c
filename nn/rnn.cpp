#include "nn/rnn.h"

#include <cmath>
#include <string_view>

#include "framework/ops.h"
#include "nn/init.h"

namespace minidl::nn {
namespace {

struct Weights {
  Tensor w_ih, w_hh, b_ih, b_hh, w_hr;
};
// Registers weight_ih<suffix> [G*H, in], weight_hh<suffix> [G*H, R], with
// bias bias_ih<suffix>, bias_hh<suffix> [G*H], and with a projection (proj > 0)
// weight_hr<suffix> [proj, H], where R = proj or H; all U(-1/sqrt(H), 1/sqrt(H)),
// in PyTorch's order.
Weights add_weights(Cell& cell, const std::string& suffix, int64_t gates, int64_t in,
                    int64_t hidden, bool bias, int64_t proj = 0) {
  const double bound = 1 / std::sqrt(static_cast<double>(hidden));
  auto param = [&](const std::string& name, const Shape& shape) {
    Tensor t = Tensor::empty(shape);
    init::uniform(-bound, bound)(t, init::fans_of(shape));
    return cell.register_parameter(name + suffix, t);
  };
  Weights w{param("weight_ih", {gates * hidden, in}),
            param("weight_hh", {gates * hidden, proj > 0 ? proj : hidden}), Tensor(), Tensor(),
            Tensor()};
  if (bias) {
    w.b_ih = param("bias_ih", {gates * hidden});
    w.b_hh = param("bias_hh", {gates * hidden});
  }
  if (proj > 0) w.w_hr = param("weight_hr", {proj, hidden});
  return w;
}

bool is_relu(const std::string& nonlinearity) {
  MINIDL_CHECK(nonlinearity == "tanh" || nonlinearity == "relu", "RNN: nonlinearity '",
               nonlinearity, "' is not 'tanh' or 'relu'");
  return nonlinearity == "relu";
}

// ---- one step's gates (rnn.h): gx, gh [B, G*H], h, c [B, H] ----
Tensor rnn_step(const Tensor& gx, const Tensor& gh, bool relu_) {
  return relu_ ? relu(add(gx, gh)) : tanh(add(gx, gh));
}

// gates i, f, g, o (the fused op; float32, as linear's gx and gh); returns h, updates c
Tensor lstm_step(const Tensor& gx, const Tensor& gh, Tensor& c) {
  auto [h, c_next] = lstm_cell_pointwise(add(gx, gh), c);
  c = c_next;
  return h;
}

// g [T*B, G*H] -> T pieces [B, G*H] (views), split in halves: a piece's
// backward (narrow's) is zero-padded to its parent's size, so halving costs
// O(T log T) in backward where chunk(g, T) would cost O(T^2).
void split_steps(const Tensor& g, int64_t steps, std::vector<Tensor>& out) {
  if (steps == 1) return out.push_back(g);
  const int64_t half = steps / 2, rows = g.size(0) / steps;
  split_steps(narrow(g, 0, 0, half * rows), half, out);
  split_steps(narrow(g, 0, half * rows, (steps - half) * rows), steps - half, out);
}

}  // namespace

RNNBase::RNNBase(const char* kind, int64_t gates, int64_t in, int64_t hidden, RNNOptions opt,
                 int64_t proj)
    : input_size(in), hidden_size(hidden), options(std::move(opt)), proj_size(proj), kind_(kind) {
  MINIDL_CHECK(in > 0 && hidden > 0 && options.num_layers > 0, kind,
               ": expected positive input_size, hidden_size and num_layers, got ", in, ", ", hidden,
               " and ", options.num_layers);
  MINIDL_CHECK(options.dropout >= 0 && options.dropout < 1, describe(), ": dropout ",
               options.dropout, " is outside [0, 1)");
  MINIDL_CHECK(gates == 1 || options.nonlinearity == "tanh", describe(),
               ": nonlinearity is an RNN option, got '", options.nonlinearity, "'");
  MINIDL_CHECK(proj >= 0 && proj < hidden, describe(), ": expected proj_size 0 (no projection) "
               "or from 1 to hidden_size - 1 = ", hidden - 1, ", got ", proj);
  const int64_t D = options.bidirectional ? 2 : 1, out = proj > 0 ? proj : hidden;
  for (int64_t k = 0; k < options.num_layers; ++k)
    for (int64_t d = 0; d < D; ++d) {
      Weights w = add_weights(*this, "_l" + std::to_string(k) + (d ? "_reverse" : ""), gates,
                              k == 0 ? in : D * out, hidden, options.bias, proj);
      weight_ih.push_back(w.w_ih);
      weight_hh.push_back(w.w_hh);
      bias_ih.push_back(w.b_ih);
      bias_hh.push_back(w.b_hh);
      weight_hr.push_back(w.w_hr);
    }
}

void RNNBase::step(const Tensor&, const Tensor&, Tensor&, Tensor&) const {
  MINIDL_CHECK(false, describe(), ": runs each layer as one op and has no step (internal error)");
}

std::string RNNBase::describe() const {
  return cat(kind_, "(", input_size, ", ", hidden_size, ", num_layers=", options.num_layers,
             options.bidirectional ? ", bidirectional" : "",
             proj_size > 0 ? cat(", proj_size=", proj_size) : "", ")");
}

// s [D*L, B, S] (unbatched [D*L, S]) or undefined -> [D*L, B, S], S = size
// (hidden_size, or proj_size for an LSTM's h with a projection)
Tensor RNNBase::check_state(const Tensor& s, const char* name, int64_t size, const Tensor& x,
                            bool unbatched) const {
  const int64_t batch = unbatched ? 1 : x.size(options.batch_first ? 0 : 1);
  const int64_t L = (options.bidirectional ? 2 : 1) * options.num_layers;
  if (!s.defined()) return Tensor::zeros({L, batch, size}, kFloat32, weight_hh[0].device());
  const Shape want = unbatched ? Shape{L, size} : Shape{L, batch, size};
  MINIDL_CHECK(s.shape() == want, describe(), ": expected ", name, " ", want, " ([",
               options.bidirectional ? "2 * " : "", "num_layers, ", unbatched ? "" : "batch, ",
               size == hidden_size ? "hidden_size" : "proj_size", "]) for input ", x.shape(),
               ", got ", s.shape());
  return unbatched ? unsqueeze(s, 1) : s;
}

RNNBase::Result RNNBase::run(const Tensor& x_in, const Tensor& h0, const Tensor& c0, bool with_c) {
  const int64_t H = hidden_size, L = options.num_layers, D = options.bidirectional ? 2 : 1;
  const int64_t P = proj_size > 0 ? proj_size : H;  // h's size
  MINIDL_CHECK((x_in.dim() == 2 || x_in.dim() == 3) && x_in.size(-1) == input_size, describe(),
               ": expected input ", options.batch_first ? "[B, T, I]" : "[T, B, I]",
               " or unbatched [T, I] with I = input_size = ", input_size, ", got ", x_in.shape());
  const bool unbatched = x_in.dim() == 2;
  // x [T, B, I]
  Tensor x = unbatched ? unsqueeze(x_in, 1) : options.batch_first ? transpose(x_in, 0, 1) : x_in;
  const int64_t T = x.size(0), B = x.size(1);
  MINIDL_CHECK(T > 0 && B > 0, describe(),
               ": expected at least one step and one sample, got input ", x_in.shape());
  MINIDL_CHECK(!with_c || h0.defined() == c0.defined(), describe(),
               ": give both h0 and c0, or neither");
  const std::vector<Tensor> hs = chunk(check_state(h0, "h0", P, x_in, unbatched), D * L, 0);
  const std::vector<Tensor> cs =
      with_c ? chunk(check_state(c0, "c0", H, x_in, unbatched), D * L, 0) : hs;
  std::vector<Tensor> h_n, c_n;
  for (int64_t k = 0; k < L; ++k) {
    std::vector<Tensor> outs;  // per direction [T, B, P]
    for (int64_t d = 0, j = k * D; d < D; ++d, ++j) {
      // the input path of every step in one GEMM: [T*B, in] x [in, G*H]. Its
      // bias carries b_hh too, once instead of per step, except for GRU,
      // whose n gate multiplies the hidden path's bias by r.
      const bool fold = bias_ih[j].defined() && std::string_view(kind_) != "GRU";
      const Tensor gx = linear(x.reshape({T * B, x.size(2)}), weight_ih[j],
                               fold ? add(bias_ih[j], bias_hh[j]) : bias_ih[j]);
      Tensor h = hs[j].reshape({B, P}), c = cs[j].reshape({B, H});
      if (std::string_view(kind_) == "LSTM" && proj_size == 0) {  // the layer as one op
        LstmLayer layer = lstm_layer(gx.reshape({T, B, 4 * H}), weight_hh[j], h, c, d == 1);
        outs.push_back(layer.y);
        h_n.push_back(layer.h_n);
        c_n.push_back(layer.c_n);
        continue;
      }
      if (std::string_view(kind_) == "GRU") {  // the layer as one op
        GruLayer layer = gru_layer(gx.reshape({T, B, 3 * H}), weight_hh[j], bias_hh[j], h, d == 1);
        outs.push_back(layer.y);
        h_n.push_back(layer.h_n);
        continue;
      }
      std::vector<Tensor> gx_t;  // T x [B, G*H]
      split_steps(gx, T, gx_t);
      std::vector<Tensor> ys(T);
      for (int64_t s = 0; s < T; ++s) {
        const int64_t t = d ? T - 1 - s : s;
        step(gx_t[t], linear(h, weight_hh[j], fold ? Tensor() : bias_hh[j]), h, c);  // [B, P] x [P, G*H]
        if (proj_size > 0) h = linear(h, weight_hr[j], Tensor());  // [B, H] x [H, P]
        ys[t] = h;
      }
      outs.push_back(stack(ys, 0));
      h_n.push_back(h);
      c_n.push_back(c);
    }
    x = D == 1 ? outs[0] : cat(outs, 2);  // [T, B, D*P]
    if (is_training() && options.dropout > 0 && k + 1 < L) x = dropout(x, options.dropout);
  }
  Result r{x, stack(h_n, 0), with_c ? stack(c_n, 0) : Tensor()};
  if (unbatched) {
    r.output = squeeze(r.output, 1);
    r.h = squeeze(r.h, 1);
    if (with_c) r.c = squeeze(r.c, 1);
  } else if (options.batch_first) {
    r.output = transpose(r.output, 0, 1);
  }
  return r;
}

// ---- RNN ----
RNN::RNN(int64_t in, int64_t hidden, RNNOptions opt)
    : RNNBase("RNN", 1, in, hidden, opt), relu_(is_relu(options.nonlinearity)) {}

void RNN::step(const Tensor& gx, const Tensor& gh, Tensor& h, Tensor&) const {
  h = rnn_step(gx, gh, relu_);
}

std::pair<Tensor, Tensor> RNN::forward(const Tensor& x, const std::optional<Tensor>& h0) {
  Result r = run(x, h0.value_or(Tensor()), Tensor(), false);
  return {r.output, r.h};
}

std::pair<Tensor, Tensor> RNN::operator()(const Tensor& x, const std::optional<Tensor>& h0) {
  return scoped([&] { return forward(x, h0); });
}

// ---- LSTM ----
LSTM::LSTM(int64_t in, int64_t hidden, LSTMOptions o)
    : RNNBase("LSTM", 4, in, hidden,
              {.num_layers = o.num_layers, .bias = o.bias, .batch_first = o.batch_first,
               .dropout = o.dropout, .bidirectional = o.bidirectional},
              o.proj_size) {}

void LSTM::step(const Tensor& gx, const Tensor& gh, Tensor& h, Tensor& c) const {
  h = lstm_step(gx, gh, c);
}

std::pair<Tensor, LSTMState> LSTM::forward(const Tensor& x, const LSTMState& state) {
  Result r = run(x, state.h, state.c, true);
  return {r.output, {r.h, r.c}};
}

std::pair<Tensor, LSTMState> LSTM::operator()(const Tensor& x, const LSTMState& state) {
  return scoped([&] { return forward(x, state); });
}

// ---- GRU ----
GRU::GRU(int64_t in, int64_t hidden, RNNOptions opt) : RNNBase("GRU", 3, in, hidden, opt) {}

std::pair<Tensor, Tensor> GRU::forward(const Tensor& x, const std::optional<Tensor>& h0) {
  Result r = run(x, h0.value_or(Tensor()), Tensor(), false);
  return {r.output, r.h};
}

std::pair<Tensor, Tensor> GRU::operator()(const Tensor& x, const std::optional<Tensor>& h0) {
  return scoped([&] { return forward(x, h0); });
}

// ---- cells ----
RNNCellBase::RNNCellBase(const char* kind, int64_t gates, int64_t in, int64_t hidden, bool bias)
    : input_size(in), hidden_size(hidden), kind_(kind) {
  MINIDL_CHECK(in > 0 && hidden > 0, kind, ": expected positive input_size and hidden_size, got ",
               in, " and ", hidden);
  Weights w = add_weights(*this, "", gates, in, hidden, bias);
  weight_ih = w.w_ih, weight_hh = w.w_hh, bias_ih = w.b_ih, bias_hh = w.b_hh;
}

// x [B, I] or [I] -> [B, I]
Tensor RNNCellBase::batched_input(const Tensor& x) const {
  MINIDL_CHECK((x.dim() == 1 || x.dim() == 2) && x.size(-1) == input_size, kind_, "(", input_size,
               ", ", hidden_size, "): expected input [B, ", input_size, "] or unbatched [",
               input_size, "], got ", x.shape());
  return x.dim() == 1 ? unsqueeze(x, 0) : x;
}

// s [B, H] or [H] (as x) or undefined -> [B, H]
Tensor RNNCellBase::batched_state(const Tensor& s, const Tensor& x, const char* name) const {
  const int64_t B = x.dim() == 1 ? 1 : x.size(0);
  if (!s.defined()) return Tensor::zeros({B, hidden_size}, kFloat32, weight_hh.device());
  const Shape want = x.dim() == 1 ? Shape{hidden_size} : Shape{B, hidden_size};
  MINIDL_CHECK(s.shape() == want, kind_, "(", input_size, ", ", hidden_size, "): expected ", name,
               " ", want, " for input ", x.shape(), ", got ", s.shape());
  return x.dim() == 1 ? unsqueeze(s, 0) : s;
}

Tensor RNNCellBase::input_gates(const Tensor& x) const { return linear(x, weight_ih, bias_ih); }
Tensor RNNCellBase::hidden_gates(const Tensor& h) const { return linear(h, weight_hh, bias_hh); }

RNNCell::RNNCell(int64_t in, int64_t hidden, bool bias, const std::string& nonlinearity)
    : RNNCellBase("RNNCell", 1, in, hidden, bias), relu_(is_relu(nonlinearity)) {}

Tensor RNNCell::forward(const Tensor& x) { return forward(x, Tensor()); }

Tensor RNNCell::forward(const Tensor& x_in, const Tensor& h_in) {
  const Tensor x = batched_input(x_in), h = batched_state(h_in, x_in, "h");
  const Tensor out = rnn_step(input_gates(x), hidden_gates(h), relu_);
  return x_in.dim() == 1 ? squeeze(out, 0) : out;
}

LSTMCell::LSTMCell(int64_t in, int64_t hidden, bool bias)
    : RNNCellBase("LSTMCell", 4, in, hidden, bias) {}

LSTMState LSTMCell::forward(const Tensor& x_in, const LSTMState& state) {
  MINIDL_CHECK(state.h.defined() == state.c.defined(), kind_, ": give both h and c, or neither");
  const Tensor x = batched_input(x_in), h = batched_state(state.h, x_in, "h");
  Tensor c = batched_state(state.c, x_in, "c");
  const Tensor h_out = lstm_step(input_gates(x), hidden_gates(h), c);
  if (x_in.dim() == 1) return {squeeze(h_out, 0), squeeze(c, 0)};
  return {h_out, c};
}

LSTMState LSTMCell::operator()(const Tensor& x, const LSTMState& state) {
  if (!scope_tracking()) return forward(x, state);
  CallScope scope(*this);
  return forward(x, state);
}

GRUCell::GRUCell(int64_t in, int64_t hidden, bool bias)
    : RNNCellBase("GRUCell", 3, in, hidden, bias) {}

Tensor GRUCell::forward(const Tensor& x) { return forward(x, Tensor()); }

Tensor GRUCell::forward(const Tensor& x_in, const Tensor& h_in) {
  const Tensor x = batched_input(x_in), h = batched_state(h_in, x_in, "h");
  const Tensor gx = input_gates(x);  // [B, 3H], one step of gru_layer
  const Tensor out = gru_layer(unsqueeze(gx, 0), weight_hh, bias_hh, h).h_n;
  return x_in.dim() == 1 ? squeeze(out, 0) : out;
}

}  // namespace minidl::nn
