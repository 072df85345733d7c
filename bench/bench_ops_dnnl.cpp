// bench_ops_dnnl: oneDNN's twin of bench_ops for the convolution cases (the
// library PyTorch calls for x86 convolutions). Prints one `name GFLOP/s` line
// per case (lines starting with '#' are comments), which bench_ops parses.
//
//   bench_ops_dnnl [--threads T] [--min-time S] [--only PREFIX]
//
// Each case starts and ends with plain NCHW tensors, as minidl's do. oneDNN is
// timed two ways and each case keeps the faster: (plain) its primitives on the
// NCHW / OIHW layouts themselves; (blocked) primitives on the layouts it picks
// (format_tag::any), with the reorders from and to NCHW inside the timing, as
// a framework calling it pays them. Backward is the input gradient
// (backward_data) plus the weight and bias gradients (backward_weights).
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "bench_common.h"

using namespace dnnl;
using tag = memory::format_tag;

namespace {

engine eng(engine::kind::cpu, 0);
stream strm(eng);

// A tensor in the user's plain layout, and (when the primitive wants another
// layout) its copy in that layout with the reorders between the two.
struct Operand {
  memory user, used;
  Operand(const memory::dims& dims, tag plain, const memory::desc& wanted) {
    user = memory({dims, memory::data_type::f32, plain}, eng);
    float* p = static_cast<float*>(user.get_data_handle());
    for (size_t i = 0; i < user.get_desc().get_size() / sizeof(float); ++i)
      p[i] = static_cast<float>((i * 7919) % 1000) / 500.f - 1.f;
    used = wanted == user.get_desc() ? user : memory(wanted, eng);
  }
  void in() {  // user -> used
    if (used != user) reorder(user, used).execute(strm, user, used);
  }
  void out() {  // used -> user
    if (used != user) reorder(used, user).execute(strm, used, user);
  }
};

// Median seconds of one forward (or backward) call on case c.
double conv_seconds(const bench::ConvCase& c, bool backward, bool blocked, double min_time) {
  const int G = c.groups;  // weights [G, OC/G, C/G, K, K] (goihw) when grouped
  const memory::dims x_dims = {c.N, c.C, c.H, c.W};
  const memory::dims w_dims = G == 1 ? memory::dims{c.OC, c.C, c.K, c.K}
                                     : memory::dims{G, c.OC / G, c.C / G, c.K, c.K};
  const tag w_tag = G == 1 ? tag::oihw : tag::goihw;
  const memory::dims b_dims = {c.OC}, y_dims = {c.N, c.OC, c.OH(), c.OW()};
  const memory::dims strides = {c.stride, c.stride}, pad = {c.pad, c.pad};
  auto md = [&](const memory::dims& d, tag plain) {
    return memory::desc(d, memory::data_type::f32, blocked ? tag::any : plain);
  };
  const memory::desc x_md = md(x_dims, tag::nchw), w_md = md(w_dims, w_tag);
  const memory::desc y_md = md(y_dims, tag::nchw), b_md(b_dims, memory::data_type::f32, tag::x);
  const auto prop = backward ? prop_kind::forward_training : prop_kind::forward_inference;
  convolution_forward::primitive_desc fwd_pd(
      convolution_forward::desc(prop, algorithm::convolution_direct, x_md, w_md, b_md, y_md,
                                strides, pad, pad),
      eng);
  Operand b(b_dims, tag::x, b_md);
  if (!backward) {
    Operand x(x_dims, tag::nchw, fwd_pd.src_desc()), w(w_dims, w_tag, fwd_pd.weights_desc());
    Operand y(y_dims, tag::nchw, fwd_pd.dst_desc());
    convolution_forward fwd(fwd_pd);
    auto body = [&] {
      x.in();
      w.in();
      fwd.execute(strm, {{DNNL_ARG_SRC, x.used}, {DNNL_ARG_WEIGHTS, w.used},
                         {DNNL_ARG_BIAS, b.used}, {DNNL_ARG_DST, y.used}});
      y.out();
      strm.wait();
    };
    return bench::median_seconds([] {}, body, 21, min_time);
  }
  convolution_backward_data::primitive_desc data_pd(
      convolution_backward_data::desc(algorithm::convolution_direct, x_md, w_md, y_md, strides,
                                      pad, pad),
      eng, fwd_pd);
  convolution_backward_weights::primitive_desc weights_pd(
      convolution_backward_weights::desc(algorithm::convolution_direct, x_md, w_md, b_md, y_md,
                                         strides, pad, pad),
      eng, fwd_pd);
  Operand w(w_dims, w_tag, data_pd.weights_desc());
  Operand gy_data(y_dims, tag::nchw, data_pd.diff_dst_desc());
  Operand gx(x_dims, tag::nchw, data_pd.diff_src_desc());
  Operand x(x_dims, tag::nchw, weights_pd.src_desc());
  Operand gy_weights(y_dims, tag::nchw, weights_pd.diff_dst_desc());
  Operand gw(w_dims, w_tag, weights_pd.diff_weights_desc()), gb(b_dims, tag::x, b_md);
  convolution_backward_data data(data_pd);
  convolution_backward_weights weights(weights_pd);
  auto body = [&] {
    w.in();
    gy_data.in();
    data.execute(strm, {{DNNL_ARG_DIFF_DST, gy_data.used}, {DNNL_ARG_WEIGHTS, w.used},
                        {DNNL_ARG_DIFF_SRC, gx.used}});
    gx.out();
    x.in();
    if (gy_weights.used != gy_data.used) gy_weights.in();
    weights.execute(strm, {{DNNL_ARG_SRC, x.used}, {DNNL_ARG_DIFF_DST, gy_weights.used},
                           {DNNL_ARG_DIFF_WEIGHTS, gw.used}, {DNNL_ARG_DIFF_BIAS, gb.used}});
    gw.out();
    strm.wait();
  };
  return bench::median_seconds([] {}, body, 21, min_time);
}

}  // namespace

int main(int argc, char** argv) {
  bench::Flags flags(argc, argv, {{"threads", "1"}, {"min-time", "0.3"}, {"only", ""}},
                     "[--threads T] [--min-time SECONDS] [--only PREFIX]");
  const std::string only = flags.str("only");  // bench_ops' filter: names starting with it
  const int threads = static_cast<int>(flags.integer("threads"));
  const double min_time = flags.real("min-time");
  if (threads < 1) {
    std::fprintf(stderr, "--threads: expected >= 1, got %d\n", threads);
    return 2;
  }
  omp_set_num_threads(threads);  // oneDNN's OpenMP runtime
  const dnnl_version_t* v = dnnl_version();
  std::printf("# oneDNN %d.%d.%d threads=%d\n", v->major, v->minor, v->patch, threads);
  bench::print_load_note();
  for (const auto& c : bench::kConvCases)
    for (bool backward : {false, true}) {
      const std::string name = std::string(c.name) + (backward ? "_bwd" : "_fwd");
      if (name.rfind(only, 0) != 0) continue;
      const double flops = (backward ? 2 : 1) * c.forward_flops();
      const double plain = flops / conv_seconds(c, backward, false, min_time) * 1e-9;
      const double blocked = flops / conv_seconds(c, backward, true, min_time) * 1e-9;
      std::printf("# %s plain NCHW %.3f, blocked layouts with reorders %.3f\n", name.c_str(), plain,
                  blocked);
      std::printf("%s %.3f\n", name.c_str(), std::max(plain, blocked));
      std::fflush(stdout);
    }
  return 0;
}
