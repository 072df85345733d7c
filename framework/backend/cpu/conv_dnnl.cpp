// oneDNN's convolutions (Debian's libdnnl, the library PyTorch calls for x86
// convolutions) for the geometries where they beat minidl's own here
// (dnnl_conv_fits). A geometry's primitives are made at its first call on a
// thread at a thread count and kept; tensors stay in minidl's NCHW / OIHW
// layouts and are reordered to and from the layouts oneDNN picks
// (format_tag::any) within each call, large batches on one thread (grouped
// ones on any) in chunks of samples (chunk_size), small-weight ones on two
// threads and more in chunks side by side (side_by_side). oneDNN runs on the
// same OpenMP pool as minidl's kernels.
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "framework/backend/cpu/cpu.h"
#include "framework/backend/cpu/dispatch.h"

namespace minidl::cpu {
namespace {

using namespace dnnl;
using tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;

engine& cpu_engine() {
  static engine e(engine::kind::cpu, 0);
  return e;
}

// The padding after the last row (column) that gives the output size OH:
// (OH - 1) * stride + (K - 1) * dilation + 1 = H + before + after.
int64_t pad_after(int64_t H, int64_t OH, int64_t K, int64_t s, int64_t d, int64_t before) {
  return (OH - 1) * s + (K - 1) * d + 1 - H - before;
}

// A tensor in minidl's plain layout and, where a primitive wants another
// layout, its copy in that one, in a buffer from minidl's allocator that
// lives for one call (release). The reorders between the two are made once.
class Operand {
 public:
  Operand() = default;
  Operand(const memory::dims& dims, tag t, const memory::desc& wanted)
      : plain_({dims, f32, t}, cpu_engine(), DNNL_MEMORY_NONE), wanted_(wanted) {
    if (same()) return;
    to_wanted_ = reorder(reorder::primitive_desc(cpu_engine(), plain_.get_desc(), cpu_engine(),
                                                 wanted_));
    to_plain_ = reorder(reorder::primitive_desc(cpu_engine(), wanted_, cpu_engine(),
                                                plain_.get_desc()));
  }
  const memory::desc& wanted() const { return wanted_; }
  memory& in(const float* p, stream& s) {  // p's values, in the wanted layout
    plain_.set_data_handle(const_cast<float*>(p));
    if (same()) return plain_;
    to_wanted_.execute(s, {{DNNL_ARG_FROM, plain_}, {DNNL_ARG_TO, place()}});
    return used_;
  }
  memory& out(float* p) {  // where the primitive writes; then copy_out
    plain_.set_data_handle(p);
    return same() ? plain_ : place();
  }
  void copy_out(stream& s) {  // done before release() frees the copy
    if (!buffer_) return;
    to_plain_.execute(s, {{DNNL_ARG_FROM, used_}, {DNNL_ARG_TO, plain_}});
    s.wait();
  }
  memory& held() { return buffer_ ? used_ : plain_; }  // what the last in() gave
  void release() { buffer_.reset(); }

 private:
  bool same() const { return wanted_ == plain_.get_desc(); }
  memory& place() {
    buffer_ = std::make_unique<Scratch>(static_cast<int64_t>(wanted_.get_size() / sizeof(float)));
    used_ = memory(wanted_, cpu_engine(), buffer_->data());
    return used_;
  }
  memory plain_, used_;
  memory::desc wanted_;
  reorder to_wanted_, to_plain_;
  std::unique_ptr<Scratch> buffer_;
};

// Runs a primitive with its scratchpad in a buffer from minidl's allocator
// (primitive_attr's scratchpad_mode::user), so oneDNN keeps no memory of its own.
void run(const primitive& p, const memory::desc& scratch, std::unordered_map<int, memory> args,
         stream& s) {
  Scratch buffer(static_cast<int64_t>((scratch.get_size() + sizeof(float) - 1) / sizeof(float)));
  args[DNNL_ARG_SCRATCHPAD] = memory(scratch, cpu_engine(), buffer.data());
  p.execute(s, args);
  s.wait();
}

primitive_attr user_scratchpad() {
  primitive_attr a;
  a.set_scratchpad_mode(scratchpad_mode::user);
  return a;
}

// One geometry's primitives, with or without the bias (its gradient).
class Plan {
 public:
  Plan(const ConvGeometry& g, bool bias)
      : xd_{g.N, g.C, g.H, g.W}, wd_(weight_dims(g)), yd_{g.N, g.OC, g.OH, g.OW},
        bd_{g.OC}, strides_{g.sh, g.sw}, dilates_{g.dh - 1, g.dw - 1}, pad_l_{g.ph, g.pw},
        pad_r_{pad_after(g.H, g.OH, g.KH, g.sh, g.dh, g.ph),
               pad_after(g.W, g.OW, g.KW, g.sw, g.dw, g.pw)},
        bias_(bias) {
    fwd_pd_ = convolution_forward::primitive_desc(
        convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct,
                                  any(xd_), any(wd_), bias_md(), any(yd_), strides_, dilates_,
                                  pad_l_, pad_r_),
        user_scratchpad(), cpu_engine());
  }

  // x [N, C, H, W], w [OC, C, KH, KW], b [OC] (with the bias) -> y [N, OC, OH, OW]
  void forward(const float* x, const float* w, const float* b, float* y) {
    if (!fwd_) {
      fwd_ = convolution_forward(fwd_pd_);
      fx_ = Operand(xd_, tag::nchw, fwd_pd_.src_desc());
      fw_ = Operand(wd_, weight_tag(), fwd_pd_.weights_desc());
      fy_ = Operand(yd_, tag::nchw, fwd_pd_.dst_desc());
    }
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, fx_.in(x, s_)},
                                            {DNNL_ARG_WEIGHTS, fw_.in(w, s_)},
                                            {DNNL_ARG_DST, fy_.out(y)}};
    if (bias_) args[DNNL_ARG_BIAS] = vector_at(b);
    run(fwd_, fwd_pd_.scratchpad_desc(), args, s_);
    fy_.copy_out(s_);
    for (Operand* o : {&fx_, &fw_, &fy_}) o->release();
  }

  // Whether oneDNN runs pass p by its GEMM-based fallback (im2col + sgemm,
  // as minidl's own, but sample by sample)
  bool by_gemm(ConvPass p) {
    if (p == ConvPass::Data && !data_) make_data();
    if (p == ConvPass::Weights && !weights_) make_weights();
    const char* impl = p == ConvPass::Forward ? fwd_pd_.impl_info_str()
                       : p == ConvPass::Data  ? data_pd_.impl_info_str()
                                              : weights_pd_.impl_info_str();
    return std::string(impl).find("gemm") != std::string::npos;
  }

  // gy [N, OC, OH, OW] -> gx (from w), gw and gb (from x; gb with the bias).
  // Where both primitives want gy in the same layout, it is reordered once.
  void backward(const float* x, const float* w, const float* gy, float* gx, float* gw, float* gb) {
    const bool weights = gw || gb;
    if (gx && !data_) make_data();
    if (weights && !weights_) make_weights();
    const bool shared = gx && weights && dgy_.wanted() == wgy_.wanted();  // gy reordered once
    if (gx) {
      run(data_, data_pd_.scratchpad_desc(),
          {{DNNL_ARG_DIFF_DST, dgy_.in(gy, s_)},
           {DNNL_ARG_WEIGHTS, dw_.in(w, s_)},
           {DNNL_ARG_DIFF_SRC, dgx_.out(gx)}},
          s_);
      dgx_.copy_out(s_);
      for (Operand* o : {&dw_, &dgx_}) o->release();
      if (!shared) dgy_.release();
    }
    if (weights) {
      Scratch unused(gw ? 0 : memory::desc(wd_, f32, weight_tag()).get_size() / sizeof(float));
      std::unordered_map<int, memory> args = {
          {DNNL_ARG_SRC, wx_.in(x, s_)},
          {DNNL_ARG_DIFF_DST, shared ? dgy_.held() : wgy_.in(gy, s_)},
          {DNNL_ARG_DIFF_WEIGHTS, wgw_.out(gw ? gw : unused.data())}};
      if (bias_) args[DNNL_ARG_DIFF_BIAS] = vector_at(gb);
      run(weights_, weights_pd_.scratchpad_desc(), args, s_);
      wgw_.copy_out(s_);
      for (Operand* o : {&wx_, &wgy_, &wgw_, &dgy_}) o->release();
    }
  }

 private:
  void make_data() {
    data_pd_ = convolution_backward_data::primitive_desc(
        convolution_backward_data::desc(algorithm::convolution_direct, any(xd_), any(wd_),
                                        any(yd_), strides_, dilates_, pad_l_, pad_r_),
        user_scratchpad(), cpu_engine(), fwd_pd_);
    data_ = convolution_backward_data(data_pd_);
    dw_ = Operand(wd_, weight_tag(), data_pd_.weights_desc());
    dgy_ = Operand(yd_, tag::nchw, data_pd_.diff_dst_desc());
    dgx_ = Operand(xd_, tag::nchw, data_pd_.diff_src_desc());
  }
  void make_weights() {
    weights_pd_ = convolution_backward_weights::primitive_desc(
        convolution_backward_weights::desc(algorithm::convolution_direct, any(xd_), any(wd_),
                                           bias_md(), any(yd_), strides_, dilates_, pad_l_,
                                           pad_r_),
        user_scratchpad(), cpu_engine(), fwd_pd_);
    weights_ = convolution_backward_weights(weights_pd_);
    wx_ = Operand(xd_, tag::nchw, weights_pd_.src_desc());
    wgy_ = Operand(yd_, tag::nchw, weights_pd_.diff_dst_desc());
    wgw_ = Operand(wd_, weight_tag(), weights_pd_.diff_weights_desc());
  }
  // minidl's w [OC, C/G, KH, KW] is oneDNN's [G, OC/G, C/G, KH, KW] (goihw)
  static memory::dims weight_dims(const ConvGeometry& g) {
    if (g.groups == 1) return {g.OC, g.C, g.KH, g.KW};
    return {g.groups, g.OC / g.groups, g.C / g.groups, g.KH, g.KW};
  }
  tag weight_tag() const { return wd_.size() == 4 ? tag::oihw : tag::goihw; }
  static memory::desc any(const memory::dims& d) { return {d, f32, tag::any}; }
  memory::desc bias_md() const { return bias_ ? memory::desc(bd_, f32, tag::x) : memory::desc(); }
  memory vector_at(const float* p) {
    return memory({bd_, f32, tag::x}, cpu_engine(), const_cast<float*>(p));
  }

  memory::dims xd_, wd_, yd_, bd_, strides_, dilates_, pad_l_, pad_r_;
  bool bias_;
  stream s_{cpu_engine()};
  convolution_forward::primitive_desc fwd_pd_;
  convolution_forward fwd_;
  Operand fx_, fw_, fy_;
  convolution_backward_data::primitive_desc data_pd_;
  convolution_backward_data data_;
  Operand dw_, dgy_, dgx_;
  convolution_backward_weights::primitive_desc weights_pd_;
  convolution_backward_weights weights_;
  Operand wx_, wgy_, wgw_;
};

// A primitive splits its work for the thread count at its making and keeps
// that count (oneDNN's parallel regions name it), so plans are kept per
// count: once the count follows a busier machine down (threads.h), a plan
// made for more threads would oversubscribe the cores.
Plan& plan(const ConvGeometry& g, bool bias) {
  using Key = std::array<int64_t, 18>;
  thread_local std::map<Key, std::unique_ptr<Plan>> plans;
  const Key key = {g.N, g.C, g.H, g.W, g.OC, g.KH, g.KW, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw,
                   g.OH, g.OW, g.groups, bias, omp_get_max_threads()};
  std::unique_ptr<Plan>& p = plans[key];
  if (!p) p = std::make_unique<Plan>(g, bias);
  return *p;
}

std::atomic<bool> dnnl_conv_on{true};

}  // namespace

void set_dnnl_conv(bool on) { dnnl_conv_on = on; }

// Where oneDNN measured faster than minidl's own kernels on this machine
// (bench_ops --conv auto against --conv im2col): stride 2 and more (res3x3s2,
// dc4x4s2: 1.5-1.8x) and 16 channels and more (res3x3c64: 1.3-1.5x; res3x3,
// ResNet's first stage: backward 1.15x, forward on par); not 1x1 kernels
// (conv.cpp's GEMM per sample: res1x1s2 1.6-2x; pw1x1 and bneck1x1 1.2-1.4x
// oneDNN's 1x1 kernel with its reorders) nor fewer channels at stride 1
// (LeNet's: the lanes kernel's, 3-6x), except on a CPU without AVX-512,
// where the lanes kernel cannot run and oneDNN's AVX2 kernel beat im2col
// (bench_ops conv1, conv2 forward: 1.1-1.2x, 1.6-1.8x, 2026-11-27; which
// gradients it takes there: dnnl_conv_takes).
// Grouped convolutions where oneDNN has a kernel for them, not its GEMM
// fallback (depthwise 3x3 and 7x7: 4x and 6x forward; a depthwise multiplier
// of 2, by GEMM there, ran 1.5x slower on oneDNN). No negative padding after
// the last row or column (conv_transpose2d's output_padding beyond its
// padding); no empty batch (the chunks would leave the gradients unwritten).
bool dnnl_conv_fits(const ConvGeometry& g, bool bias) {
  return dnnl_conv_on.load(std::memory_order_relaxed) && g.N > 0 && g.KH * g.KW > 1 &&
         (g.sh > 1 || g.sw > 1 || g.C >= 16 || !cpu_has_avx512()) &&
         pad_after(g.H, g.OH, g.KH, g.sh, g.dh, g.ph) >= 0 &&
         pad_after(g.W, g.OW, g.KW, g.sw, g.dw, g.pw) >= 0 &&
         (g.groups == 1 || dnnl_conv_takes(g, bias, ConvPass::Forward));
}

namespace {

// On two threads and more, a batch of small-weight convolutions (ResNet-8's
// first two stages) goes side by side: each thread takes the next chunk of
// samples left and runs it on primitives made for one thread, so that no
// thread waits for the other within a primitive, and a thread that stalls
// takes fewer chunks. On two threads ResNet-8's step ran 3-7% faster so, and
// bench_ops' 16-channel cases 8-34% (bench/README.md, session 35). Not where
// each thread would stream large weights of its own: DCGAN's step (64 -> 128
// and 128 -> 256 channels, 4x4) ran 11% slower so. Nor under 16 input
// channels, whose chunks are little work: the forwards of LeNet's conv2 and
// DCGAN's 1-channel layer (bench_ops conv2, dc4x4s2c1) ran 2-12% slower so.
// Only batches of 16 samples a thread and more; a chunk is a quarter of a
// thread's share, or less where that passes 2 MiB of copies (chunk_size).
bool side_by_side(const ConvGeometry& g) {
  const int64_t T = omp_get_max_threads(), weight_bytes = 4 * g.OC * g.C * g.KH * g.KW;
  return T > 1 && !omp_in_parallel() && g.groups == 1 && g.C >= 16 && g.N >= 16 * T &&
         weight_bytes <= int64_t{64} << 10;
}

// Samples per call of the primitives. Where a batch's four copies (plain and
// oneDNN's layout, input and output) pass 16 MiB, half this machine's L3, it
// goes through reorder -> convolution -> reorder in chunks whose copies fit
// in 2 MiB, so that each step reads what the one before wrote while it is
// still in the cache: ResNet's 16-channel layers ran 5-15% faster so
// (bench_ops res3x3, res3x3s2). DCGAN's (dc4x4s2, 9.2 MiB of copies) ran 6%
// slower in chunks, and res3x3c64 (6.1 MiB) no faster. On one thread only:
// on two, whole batches ran res3x3s2's forward at 182-191 GFLOP/s against
// 155-164 in chunks (five interleaved runs; the rest alike) and ResNet-8's
// step 2-4% faster (five pairs; bench/README.md, session 21); side by side
// (above), chunks of at most 2 MiB too. Grouped
// convolutions, memory-bound, go in chunks on two threads too: depthwise 3x3
// (bench_ops dw3x3) ran 1.2-1.8x faster so, 7x7 alike (three pairs each).
int64_t chunk_size(const ConvGeometry& g) {
  const int64_t bytes = 2 * sizeof(float) * (g.C * g.H * g.W + g.OC * g.OH * g.OW);
  const int64_t fit = std::clamp<int64_t>((int64_t{2} << 20) / bytes, 1, g.N);
  const int64_t T = omp_get_max_threads();
  if (side_by_side(g)) return std::min(fit, (g.N + 4 * T - 1) / (4 * T));
  const bool whole = T > 1 && g.groups == 1;
  if (whole || bytes * g.N <= int64_t{16} << 20) return g.N;
  return fit;
}

// How a batch goes through the primitives: count chunks of size samples
// (the last one may hold fewer), side by side (apart) or in order.
struct Chunks {
  int64_t size, count;
  bool apart;
};
Chunks chunks_of(const ConvGeometry& g) {
  const int64_t S = chunk_size(g);
  return {S, (g.N + S - 1) / S, side_by_side(g)};
}

// Within its scope (where on) this thread's plans are made for one thread
// (plan's key) and oneDNN's primitives run on it alone.
class OneThread {
 public:
  explicit OneThread(bool on = true) : on_(on) {
    if (on_) omp_set_num_threads(1);
  }
  ~OneThread() {
    if (on_) omp_set_num_threads(before_);
  }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  bool on_;
  int before_ = omp_get_max_threads();
};

// Runs body(c, n0, S) for each chunk c of S samples from n0: in order on the
// calling thread, or side by side. An exception from a chunk is rethrown
// once every thread has left the parallel region.
template <class Body>
void for_each_chunk(const Chunks& k, Body body) {
  if (!k.apart) {
    for (int64_t c = 0; c < k.count; ++c) body(c, c * k.size, k.size);
    return;
  }
  FirstError error;
#pragma omp parallel
  {
    OneThread one;
#pragma omp for schedule(dynamic, 1)
    for (int64_t c = 0; c < k.count; ++c) error.run([&] { body(c, c * k.size, k.size); });
  }
  error.rethrow();
}

// The geometry of samples [n0, n0 + S) of g's batch
ConvGeometry chunk(const ConvGeometry& g, int64_t n0, int64_t S) {
  ConvGeometry c = g;
  c.N = std::min(S, g.N - n0);
  return c;
}

}  // namespace

// The gradients under 16 input channels (one group): with AVX-512, not the
// input's, which oneDNN pads to 16: conv.cpp's columns ran it 1.2-9x faster
// (conv_transpose2d, whose forward it is, 4x4 stride 2, batch 64, 1 thread:
// DCGAN's 1-channel images 9x, 3 channels 2.2-3.5x, 8 channels 1.2-1.4x).
// Without AVX-512, both at stride 1 from 4 input channels (LeNet's conv2, 6:
// its training step 7750 -> 9060 samples/s on one thread, 12050 -> 12880 on
// two; bench_train --model lenet --twin off, four interleaved pairs each,
// 2026-11-28), neither otherwise: DCGAN's first layer's weight gradient
// (bench_ops dc4x4s2c1) took 4.5-7.5 ms on oneDNN's AVX2 kernel against
// 0.9-1.2 on the columns (1 thread, 2026-11-28). Not a pass oneDNN runs by
// its GEMM fallback either (the weight gradients of depthwise 7x7 and of 32
// groups of 4 channels: 1.4-3x faster on the columns).
bool dnnl_conv_takes(const ConvGeometry& g, bool bias, ConvPass p) {
  if (g.C < 16 && g.groups == 1 && p != ConvPass::Forward) {
    const bool avx2 = !cpu_has_avx512();
    if (avx2 ? g.C < 4 || g.sh > 1 || g.sw > 1 : p == ConvPass::Data) return false;
  }
  const Chunks k = chunks_of(g);
  OneThread one(k.apart);  // the plans the chunks run on
  return !plan(chunk(g, 0, k.size), bias).by_gemm(p);
}

void dnnl_conv_forward(const ConvGeometry& g, const float* x, const float* w, const float* b,
                       float* y) {
  const int64_t xs = g.C * g.H * g.W, ys = g.OC * g.OH * g.OW;
  for_each_chunk(chunks_of(g), [&](int64_t, int64_t n0, int64_t S) {
    plan(chunk(g, n0, S), b != nullptr).forward(x + n0 * xs, w, b, y + n0 * ys);
  });
}

// The chunks' weight and bias gradients are summed in float, in chunk order,
// into the first chunk's: each later chunk's as it ends, or, side by side,
// from a part of its own once all have ended.
void dnnl_conv_backward(const ConvGeometry& g, const float* x, const float* w, const float* gy,
                        float* gx, float* gw, float* gb) {
  const int64_t xs = g.C * g.H * g.W, ys = g.OC * g.OH * g.OW;
  const int64_t ws = g.OC * (g.C / g.groups) * g.KH * g.KW;
  const Chunks k = chunks_of(g);  // apart: a part for each later chunk, else one for all
  const int64_t parts = k.apart ? k.count - 1 : std::min<int64_t>(k.count - 1, 1);
  std::vector<float> gw_part(gw ? parts * ws : 0), gb_part(gb ? parts * g.OC : 0);
  auto add = [&](int64_t part) {  // part into gw and gb
    for (int64_t i = 0; gw && i < ws; ++i) gw[i] += gw_part[part * ws + i];
    for (int64_t i = 0; gb && i < g.OC; ++i) gb[i] += gb_part[part * g.OC + i];
  };
  for_each_chunk(k, [&](int64_t c, int64_t n0, int64_t S) {
    const int64_t part = k.apart ? c - 1 : 0;
    plan(chunk(g, n0, S), gb != nullptr)
        .backward(x + n0 * xs, w, gy + n0 * ys, gx ? gx + n0 * xs : nullptr,
                  gw && c ? gw_part.data() + part * ws : gw,
                  gb && c ? gb_part.data() + part * g.OC : gb);
    if (c && !k.apart) add(0);
  });
  for (int64_t c = 1; k.apart && c < k.count; ++c) add(c - 1);
}

}  // namespace minidl::cpu
