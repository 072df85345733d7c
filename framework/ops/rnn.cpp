// The LSTM cell's pointwise part as one op (issue 23): one kernel for both
// outputs where the composed step took ten ops, and one per output backward,
// which reads the activations the forward kept. And a whole LSTM layer as one
// op, its steps driving the kernels directly: the hidden path's GEMM and the
// cell each step, forward and back, in one kernel-table call (which CUDA
// fuses into one launch for small layers); a GRU layer likewise.
#include "framework/ops.h"
#include "framework/ops/util.h"

namespace minidl {
namespace {

// The layers' steps (lstm_layer's comment): step s runs at time(s); h (and
// c) live in buffers of T+1 rows in time order, the initial state at row
// `first`, each step reading row time(s) + prev_at and writing time(s) + y_at.
struct Steps {
  Steps(int64_t T, bool reverse)
      : T(T), reverse(reverse), first(reverse ? T : 0), y_at(reverse ? 0 : 1),
        prev_at(reverse ? 1 : 0) {}
  int64_t time(int64_t s) const { return reverse ? T - 1 - s : s; }
  int64_t T;
  bool reverse;
  int64_t first, y_at, prev_at;
};

// The hidden path's GEMMs on w [G, H] (w_hh) for a batch of B rows outside
// the steps (the steps' own are in the kernels' *_step_* calls).
struct HiddenPath {
  const Kernels& kern;
  int64_t B, H, G;
  const float* w;
  // w^T [H, G], what the steps' backward takes (kernels.h), read only for a
  // next step's gradient: over T > 1 steps (a single step passes w itself)
  static Tensor transposed(const Tensor& w, int64_t T) {
    return T > 1 ? contiguous(w.transpose(0, 1)) : w;
  }
  // dh [B, H] = beta dh + g [B, G] w
  void backward(const float* g, float beta, float* dh) const {
    kern.gemm(false, false, B, H, G, 1.f, g, G, 0, w, H, 0, beta, dh, H, 0, 1);
  }
  // w's gradient [G, H]: sum over T steps of g[t]^T h[t], g [T, B, G], h [T, B, H]
  Tensor weight_grad(int64_t T, const float* g, const float* h, Device dev) const {
    Tensor gw = Tensor::empty({G, H}, kFloat32, dev);
    kern.gemm(true, false, G, H, T * B, 1.f, g, G, 0, h, H, 0, 0.f, gw.data_ptr<float>(), H, 0, 1);
    return gw;
  }
};

}  // namespace

// gates [B, 4H], c [B, H] -> {h, c'} [B, H]
std::pair<Tensor, Tensor> lstm_cell_pointwise(const Tensor& gates, const Tensor& c) {
  require_f32("lstm_cell_pointwise", gates, "gates");
  require_f32("lstm_cell_pointwise", c, "c");
  MINIDL_CHECK(gates.dim() == 2 && c.dim() == 2 && gates.size(0) == c.size(0) &&
                   gates.size(1) == 4 * c.size(1),
               "lstm_cell_pointwise: expected gates [B, 4H] and c [B, H], got ", gates.shape(),
               " and ", c.shape());
  if (!all_contiguous({gates, c})) return lstm_cell_pointwise(contiguous(gates), contiguous(c));
  const int64_t B = c.size(0), H = c.size(1);
  const Kernels& kern = kernels_for("lstm_cell_pointwise", gates, {&c});
  Tensor act = empty_like(c, {B, 5 * H});  // the activations, for the backward (kernels.h)
  Tensor c_out = empty_like(c, {B, H}), h_out = empty_like(c, {B, H});
  kern.lstm_cell_forward(B, H, gates.data_ptr<float>(), c.data_ptr<float>(),
                         act.data_ptr<float>(), c_out.data_ptr<float>(), h_out.data_ptr<float>());
  // each output's backward gives the gates' and c's whole gradients from its
  // own (kernels.h: gh or gc_next); autograd adds the two. The inputs'
  // requires_grad read when recorded, so that the closures hold no gates.
  auto backward = [act, c, B, H](bool of_h, bool want_ga, bool want_gc) {
    return [of_h, want_ga, want_gc, act, c, B, H](const Tensor& g) {
      Tensor ga = empty_like(g, {B, 4 * H});
      Tensor gc = want_gc ? empty_like(g, {B, H}) : Tensor();
      const float* gout = g.data_ptr<float>();
      kernels(g.device())
          .lstm_cell_backward(B, H, act.data_ptr<float>(), c.data_ptr<float>(),
                              of_h ? gout : nullptr, of_h ? nullptr : gout, ga.data_ptr<float>(),
                              want_gc ? gc.data_ptr<float>() : nullptr);
      return std::vector<Tensor>{want_ga ? ga : Tensor(), gc};
    };
  };
  const bool ga = gates.requires_grad(), gc = c.requires_grad();
  c_out = record(c_out, "lstm_cell_c", {gates, c}, backward(false, ga, gc));
  h_out = record(h_out, "lstm_cell_h", {gates, c}, backward(true, ga, gc));
  return {h_out, c_out};
}

// gx [T, B, 4H], w_hh [4H, H], h0, c0 [B, H] -> y [T, B, H], h_n, c_n [B, H]
LstmLayer lstm_layer(const Tensor& gx, const Tensor& w_hh, const Tensor& h0, const Tensor& c0,
                     bool reverse) {
  const char* op = "lstm_layer";
  require_f32(op, gx, "gx");
  require_f32(op, w_hh, "w_hh");
  require_f32(op, h0, "h0");
  require_f32(op, c0, "c0");
  MINIDL_CHECK(gx.dim() == 3 && gx.size(2) % 4 == 0 && w_hh.dim() == 2 && h0.dim() == 2 &&
                   w_hh.size(0) == gx.size(2) && w_hh.size(1) * 4 == gx.size(2) &&
                   h0.shape() == Shape({gx.size(1), w_hh.size(1)}) && c0.shape() == h0.shape(),
               op, ": expected gx [T, B, 4H], w_hh [4H, H], h0 and c0 [B, H], got gx ", gx.shape(),
               ", w_hh ", w_hh.shape(), ", h0 ", h0.shape(), ", c0 ", c0.shape());
  const int64_t T = gx.size(0), B = gx.size(1), G = gx.size(2), H = G / 4, BH = B * H;
  MINIDL_CHECK(T > 0, op, ": expected at least one step, got gx ", gx.shape());
  const Kernels& kern = kernels_for(op, gx, {&w_hh, &h0, &c0});
  // Step s runs at time t(s); hb [T+1, B, H] holds h in time order with h0
  // at its end before the first step (0 forward, T reversed), so that y and
  // the h each step reads are both T contiguous rows of it; cs likewise c.
  // Both live in one buffer, state [2, T+1, B, H], the op's one output, of
  // which y, h_n and c_n are views: one node, one pass back through time.
  const Steps st(T, reverse);
  Tensor gates = gx.detach().clone();  // [T, B, 4H]; each step adds h w_hh^T
  Tensor state = empty_like(gx, {2, T + 1, B, H});
  Tensor hb = state.slice(0, 1).reshape({T + 1, B, H}), cs = state.slice(1, 2).reshape({T + 1, B, H});
  Tensor act = empty_like(gx, {T, B, 5 * H});  // each step's activations, for the backward
  hb.slice(st.first, st.first + 1).copy_(h0.reshape({1, B, H}));
  cs.slice(st.first, st.first + 1).copy_(c0.reshape({1, B, H}));
  const Tensor w = dense(w_hh.detach());
  const HiddenPath path{kern, B, H, G, w.data_ptr<float>()};
  float *hp = hb.data_ptr<float>(), *cp = cs.data_ptr<float>(), *gp = gates.data_ptr<float>();
  for (int64_t s = 0; s < T; ++s) {  // gates[t] += h w_hh^T ([B, H] x [H, 4H]), then the cell
    const int64_t t = st.time(s), in = t + st.prev_at, out = t + st.y_at;  // rows of hb and cs
    kern.lstm_step_forward(B, H, path.w, hp + in * BH, gp + t * B * G, cp + in * BH,
                           act.data_ptr<float>() + t * 5 * BH, cp + out * BH, hp + out * BH);
  }
  const int64_t last = st.time(T - 1) + st.y_at;  // the rows of h_n and c_n
  // Back through time from y's gradient gy [T, B, H] and c_n's gc [B, H]:
  // gates' gradients ga [T, B, 4H] step by step, each step's h gradient dh
  // taking the next step's ga w_hh; then w_hh's in one GEMM over every
  // step, and h0's and c0's.
  const bool want_w = w_hh.requires_grad(), want_h0 = h0.requires_grad(), want_c0 = c0.requires_grad();
  const Device dev = gx.device();
  auto bptt = [T, B, H, G, BH, st, act, hb, cs, w, path, want_w, want_h0, want_c0, dev,
               &kern](const Tensor& gy, const Tensor& gc) {
    Tensor dh = gy.clone(), dc = gc.clone();
    Tensor ga = Tensor::empty({T, B, G}, kFloat32, dev);
    const Tensor wt = path.transposed(w, T);
    const float *hp = hb.data_ptr<float>(), *cp = cs.data_ptr<float>();
    float *dhp = dh.data_ptr<float>(), *dcp = dc.data_ptr<float>(), *gap = ga.data_ptr<float>();
    for (int64_t s = T - 1; s >= 0; --s) {  // dh[t] += ga[t'] w_hh (t' the next step), the cell
      const int64_t t = st.time(s);
      const float* next = s + 1 < T ? gap + st.time(s + 1) * B * G : nullptr;  // its ga
      kern.lstm_step_backward(B, H, path.w, wt.data_ptr<float>(), next,
                              act.data_ptr<float>() + t * 5 * BH, cp + (t + st.prev_at) * BH,
                              dhp + t * BH, dcp, gap + t * B * G, dcp);
    }
    Tensor gw = want_w ? path.weight_grad(T, gap, hp + st.prev_at * BH, dev) : Tensor(), gh0;
    if (want_h0) {  // the first step's ga w_hh
      gh0 = Tensor::empty({B, H}, kFloat32, dev);
      path.backward(gap + st.time(0) * B * G, 0.f, gh0.data_ptr<float>());
    }
    return std::vector<Tensor>{ga, gw, gh0, want_c0 ? dc : Tensor()};
  };
  // g [2, T+1, B, H]: the views' gradients, zero where no output reached
  state =
      record(state, "lstm_layer", {gx, w_hh, h0, c0}, [bptt, T, B, H, st, last](const Tensor& g) {
        return bptt(g.narrow(0, 0, 1).narrow(1, st.y_at, T).reshape({T, B, H}),
                    g.narrow(0, 1, 1).narrow(1, last, 1).reshape({B, H}));
      });
  const Tensor y = state.narrow(0, 0, 1).narrow(1, st.y_at, T).reshape({T, B, H});
  return {y, reshape(narrow(y, 0, st.time(T - 1), 1), {B, H}),
          state.narrow(0, 1, 1).narrow(1, last, 1).reshape({B, H})};
}

// gx [T, B, 3H], w_hh [3H, H], b_hh [3H] or undefined, h0 [B, H] -> y [T, B, H], h_n [B, H]
GruLayer gru_layer(const Tensor& gx, const Tensor& w_hh, const Tensor& b_hh, const Tensor& h0,
                   bool reverse) {
  const char* op = "gru_layer";
  require_f32(op, gx, "gx");
  require_f32(op, w_hh, "w_hh");
  require_f32(op, h0, "h0");
  if (b_hh.defined()) require_f32(op, b_hh, "b_hh");
  MINIDL_CHECK(gx.dim() == 3 && w_hh.dim() == 2 && h0.dim() == 2 && w_hh.size(0) == gx.size(2) &&
                   w_hh.size(1) * 3 == gx.size(2) &&
                   h0.shape() == Shape({gx.size(1), w_hh.size(1)}) &&
                   (!b_hh.defined() || b_hh.shape() == Shape({gx.size(2)})),
               op, ": expected gx [T, B, 3H], w_hh [3H, H], b_hh [3H] or none and h0 [B, H], "
               "got gx ", gx.shape(), ", w_hh ", w_hh.shape(), ", b_hh ",
               b_hh.defined() ? cat(b_hh.shape()) : "none", ", h0 ", h0.shape());
  const int64_t T = gx.size(0), B = gx.size(1), G = gx.size(2), H = G / 3, BH = B * H;
  MINIDL_CHECK(T > 0, op, ": expected at least one step, got gx ", gx.shape());
  const Kernels& kern = kernels_for(op, gx, {&w_hh, &b_hh, &h0});
  const Device dev = gx.device();
  // hb [T+1, B, H]: h in time order with h0 at its end before the first
  // step (0 forward, T reversed), as lstm_layer's; y and h_n are its views.
  const Steps st(T, reverse);
  const Tensor x = dense(gx.detach()), w = dense(w_hh.detach());
  const HiddenPath path{kern, B, H, G, w.data_ptr<float>()};
  Tensor gh = Tensor::empty({T, B, G}, kFloat32, dev);  // each step: b_hh + h w_hh^T
  if (b_hh.defined()) gh.copy_(b_hh.detach().reshape({1, 1, G}).expand({T, B, G}));
  else gh.fill_(0);
  Tensor hb = empty_like(gx, {T + 1, B, H});
  Tensor act = empty_like(gx, {T, B, 4 * H});  // each step's r, z, n, gh_n, for the backward
  hb.slice(st.first, st.first + 1).copy_(h0.reshape({1, B, H}));
  const float* xp = x.data_ptr<float>();
  float *hp = hb.data_ptr<float>(), *ghp = gh.data_ptr<float>(), *ap = act.data_ptr<float>();
  for (int64_t s = 0; s < T; ++s) {  // gh[t] += h w_hh^T ([B, H] x [H, 3H]), then the cell
    const int64_t t = st.time(s), in = t + st.prev_at;  // hb's rows: in, and t + y_at out
    kern.gru_step_forward(B, H, path.w, hp + in * BH, xp + t * B * G, ghp + t * B * G,
                          ap + t * 4 * BH, hp + (t + st.y_at) * BH);
  }
  // Back through time from hb's gradient: y's rows gy [T, B, H] (h_n's is
  // one of them). Step by step the two paths' gate gradients ggx, ggh [T, B,
  // 3H]; the previous h's gradient gets gy z from the cell and ggh w_hh;
  // then w_hh's and b_hh's over every step at once.
  const bool want_w = w_hh.requires_grad(), want_b = b_hh.defined() && b_hh.requires_grad(),
             want_h0 = h0.requires_grad();
  // hb's values without its node (the node, recorded on hb itself, holds
  // this closure: capturing hb would be a cycle that is never freed)
  auto bptt = [T, B, H, G, BH, st, act, hb = hb.detach(), w, path, want_w, want_b,
               want_h0, dev, &kern](const Tensor& gy) {
    Tensor dh = gy.clone();
    Tensor ggx = Tensor::empty({T, B, G}, kFloat32, dev);
    Tensor ggh = Tensor::empty({T, B, G}, kFloat32, dev);
    Tensor gh0 = want_h0 ? Tensor::zeros({B, H}, kFloat32, dev) : Tensor();
    const Tensor wt = path.transposed(w, T);
    const float *hp = hb.data_ptr<float>(), *ap = act.data_ptr<float>();
    float *dhp = dh.data_ptr<float>(), *gxp = ggx.data_ptr<float>(), *gp = ggh.data_ptr<float>();
    for (int64_t s = T - 1; s >= 0; --s) {  // dh[t] += ggh[t'] w_hh (t' the next step), the cell
      const int64_t t = st.time(s);
      float* prev = s > 0 ? dhp + st.time(s - 1) * BH : want_h0 ? gh0.data_ptr<float>() : nullptr;
      const float* next = s + 1 < T ? gp + st.time(s + 1) * B * G : nullptr;  // its ggh
      kern.gru_step_backward(B, H, path.w, wt.data_ptr<float>(), next,
                             ap + t * 4 * BH, hp + (t + st.prev_at) * BH, dhp + t * BH,
                             gxp + t * B * G, gp + t * B * G, prev);
    }
    // h0's: the first step's ggh w_hh besides gy z
    if (want_h0) path.backward(gp + st.time(0) * B * G, 1.f, gh0.data_ptr<float>());
    Tensor gw = want_w ? path.weight_grad(T, gp, hp + st.prev_at * BH, dev) : Tensor();
    return std::vector<Tensor>{ggx, gw, want_b ? sum(ggh.reshape({T * B, G}), {0}) : Tensor(), gh0};
  };
  hb = record(hb, op, {gx, w_hh, b_hh, h0},
              [bptt, T, st](const Tensor& g) { return bptt(g.narrow(0, st.y_at, T)); });
  const Tensor y = hb.narrow(0, st.y_at, T);
  return {y, reshape(narrow(y, 0, st.time(T - 1), 1), {B, H})};
}

}  // namespace minidl
