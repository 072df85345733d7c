// The per-shape choice between conv.cu's paths (im2col + cuBLAS, and direct
// kernels for small windows) and cuDNN 9, and cuDNN's three convolution
// passes.
//
// A plan is made once per (pass, geometry, algorithm setting, TF32) and kept:
//   Im2col  im2col always (no plan).
//   Direct  the direct kernels where they take the shape, else im2col (no plan).
//   Cudnn   cuDNN's heuristic (no timing, so it also works inside a CUDA graph
//           capture): its first deterministic algorithm within the workspace
//           cap; im2col where cuDNN cannot take the shape.
//   Auto    outside a capture: times im2col, direct (where it takes the shape;
//           CUDA events) and every deterministic cuDNN algorithm
//           (cudnnFind*Ex) and keeps the fastest; inside a capture, where
//           nothing may be timed, direct where it takes the shape, else
//           im2col, kept as well, so eager steps and replays compute the same
//           bits.
// With TF32 off the descriptors ask for FMA math: no tensor cores.
// libcudnn.so.9 is opened at first use, as cuBLAS is; without cudnn.h at build
// time (MINIDL_CUDNN undefined) Auto chooses as inside a capture, and Cudnn
// throws.
#include <algorithm>
#include <array>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "framework/backend/cuda/runtime.h"
#include "framework/cuda.h"
#include "framework/error.h"

#ifdef MINIDL_CUDNN
#include <cudnn.h>

#include <climits>
// The convolution entries are cuDNN 9's "legacy" API, marked deprecated in
// favour of its graph API; they are what minidl needs and are still shipped.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif

namespace minidl::cuda {
namespace {

const char* pass_name(ConvPass p) {
  return p == ConvPass::Forward ? "forward" : p == ConvPass::InputGrad ? "input gradient"
                                                                       : "weight gradient";
}

std::string describe(ConvPass pass, const ConvGeometry& g) {
  auto pair = [](int64_t a, int64_t b) { return a == b ? cat(a) : cat(a, ",", b); };
  return cat(pass_name(pass), " x[", g.N, ",", g.C, ",", g.H, ",", g.W, "] w[", g.OC, ",",
             g.C / g.groups, ",", g.KH, ",", g.KW, "] stride ", pair(g.sh, g.sw), " pad ",
             pair(g.ph, g.pw), g.dh == 1 && g.dw == 1 ? "" : " dilation " + pair(g.dh, g.dw),
             g.groups == 1 ? "" : cat(" groups ", g.groups));
}

struct Key {
  ConvPass pass;
  ConvAlgorithm setting;
  bool tf32;
  std::array<int64_t, 16> dims;
  bool operator<(const Key& o) const {
    return std::tie(pass, setting, tf32, dims) < std::tie(o.pass, o.setting, o.tf32, o.dims);
  }
};

Key key_of(ConvPass pass, const ConvGeometry& g) {
  return {pass, conv_algorithm(), allow_tf32(),
          {g.N, g.C, g.H, g.W, g.OC, g.KH, g.KW, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, g.groups, g.OH,
           g.OW}};
}

// The GPU time of one run of `work` (after one untimed run), in milliseconds.
float time_ms(const std::function<void()>& work) {
  constexpr int kRuns = 3;
  work();
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  CUDA_CHECK(cudaEventRecord(start, stream()));
  for (int i = 0; i < kRuns; ++i) work();
  CUDA_CHECK(cudaEventRecord(stop, stream()));
  CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  CUDA_WARN(cudaEventDestroy(start));
  CUDA_WARN(cudaEventDestroy(stop));
  return ms / kRuns;
}

#ifdef MINIDL_CUDNN

// The entries minidl calls, from libcudnn.so.<major> opened at first use.
struct Cudnn {
  decltype(&cudnnCreate) create;
  decltype(&cudnnSetStream) set_stream;
  decltype(&cudnnGetErrorString) error_string;
  decltype(&cudnnCreateTensorDescriptor) create_tensor;
  decltype(&cudnnSetTensor4dDescriptor) set_tensor;
  decltype(&cudnnCreateFilterDescriptor) create_filter;
  decltype(&cudnnSetFilter4dDescriptor) set_filter;
  decltype(&cudnnCreateConvolutionDescriptor) create_conv;
  decltype(&cudnnSetConvolution2dDescriptor) set_conv;
  decltype(&cudnnSetConvolutionMathType) set_math;
  decltype(&cudnnSetConvolutionGroupCount) set_groups;
  decltype(&cudnnGetConvolutionForwardAlgorithm_v7) heuristic_fwd;
  decltype(&cudnnGetConvolutionBackwardDataAlgorithm_v7) heuristic_data;
  decltype(&cudnnGetConvolutionBackwardFilterAlgorithm_v7) heuristic_filter;
  decltype(&cudnnFindConvolutionForwardAlgorithmEx) find_fwd;
  decltype(&cudnnFindConvolutionBackwardDataAlgorithmEx) find_data;
  decltype(&cudnnFindConvolutionBackwardFilterAlgorithmEx) find_filter;
  decltype(&cudnnConvolutionForward) forward;
  decltype(&cudnnConvolutionBackwardData) backward_data;
  decltype(&cudnnConvolutionBackwardFilter) backward_filter;
};

// The table, or null with `failure` saying why the library cannot be used.
std::string failure;
const Cudnn* cudnn() {
  static const Cudnn* table = []() -> const Cudnn* {
    Library lib("libcudnn.so." + std::to_string(CUDNN_MAJOR));
    static Cudnn t{};
    lib.get(t.create, "cudnnCreate");
    lib.get(t.set_stream, "cudnnSetStream");
    lib.get(t.error_string, "cudnnGetErrorString");
    lib.get(t.create_tensor, "cudnnCreateTensorDescriptor");
    lib.get(t.set_tensor, "cudnnSetTensor4dDescriptor");
    lib.get(t.create_filter, "cudnnCreateFilterDescriptor");
    lib.get(t.set_filter, "cudnnSetFilter4dDescriptor");
    lib.get(t.create_conv, "cudnnCreateConvolutionDescriptor");
    lib.get(t.set_conv, "cudnnSetConvolution2dDescriptor");
    lib.get(t.set_math, "cudnnSetConvolutionMathType");
    lib.get(t.set_groups, "cudnnSetConvolutionGroupCount");
    lib.get(t.heuristic_fwd, "cudnnGetConvolutionForwardAlgorithm_v7");
    lib.get(t.heuristic_data, "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    lib.get(t.heuristic_filter, "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    lib.get(t.find_fwd, "cudnnFindConvolutionForwardAlgorithmEx");
    lib.get(t.find_data, "cudnnFindConvolutionBackwardDataAlgorithmEx");
    lib.get(t.find_filter, "cudnnFindConvolutionBackwardFilterAlgorithmEx");
    lib.get(t.forward, "cudnnConvolutionForward");
    lib.get(t.backward_data, "cudnnConvolutionBackwardData");
    lib.get(t.backward_filter, "cudnnConvolutionBackwardFilter");
    failure = lib.failure();
    return failure.empty() ? &t : nullptr;
  }();
  return table;
}

void check(cudnnStatus_t s, const char* call, const char* file, int line) {
  if (s != CUDNN_STATUS_SUCCESS)
    fail(file, line, call, "cuDNN error", cudnn()->error_string(s));
}
#define CUDNN_CHECK(call) check((call), #call, __FILE__, __LINE__)

cudnnHandle_t handle() {
  static cudnnHandle_t h = [] {
    (void)stream();  // binds this thread to the process's GPU first
    cudnnHandle_t created = nullptr;
    CUDNN_CHECK(cudnn()->create(&created));
    CUDNN_CHECK(cudnn()->set_stream(created, stream()));
    return created;
  }();
  return h;
}

constexpr size_t kWorkspaceCap = size_t{256} << 20;

// What a plan keeps for cuDNN: the descriptors (made once, never destroyed,
// like the handle), the algorithm and its workspace.
struct Descriptors {
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
};

Descriptors describe_for_cudnn(const ConvGeometry& g, cudnnMathType_t math) {
  const Cudnn& c = *cudnn();
  Descriptors d{};
  auto i = [](int64_t v) { return static_cast<int>(v); };
  CUDNN_CHECK(c.create_tensor(&d.x));
  CUDNN_CHECK(c.set_tensor(d.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(g.N), i(g.C), i(g.H), i(g.W)));
  CUDNN_CHECK(c.create_tensor(&d.y));
  CUDNN_CHECK(
      c.set_tensor(d.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(g.N), i(g.OC), i(g.OH), i(g.OW)));
  CUDNN_CHECK(c.create_filter(&d.w));
  CUDNN_CHECK(
      c.set_filter(d.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, i(g.OC), i(g.C / g.groups), i(g.KH),
                   i(g.KW)));
  CUDNN_CHECK(c.create_conv(&d.conv));
  CUDNN_CHECK(c.set_conv(d.conv, i(g.ph), i(g.pw), i(g.sh), i(g.sw), i(g.dh), i(g.dw),
                         CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CUDNN_CHECK(c.set_groups(d.conv, i(g.groups)));
  CUDNN_CHECK(c.set_math(d.conv, math));
  return d;
}

// Why cuDNN cannot take this shape, or "" when it can. Its 4-d descriptors
// take int sizes and need every size positive, and y's size to be the one
// cuDNN derives from x's (conv_transpose2d's output padding can leave OH, OW
// below it: im2col serves those).
std::string cudnn_refuses(const ConvGeometry& g) {
  const int64_t biggest = std::max({g.N * g.C * g.H * g.W, g.N * g.OC * g.OH * g.OW,
                                    g.OC * g.C / g.groups * g.KH * g.KW});
  const bool derived = g.OH == (g.H + 2 * g.ph - g.dh * (g.KH - 1) - 1) / g.sh + 1 &&
                       g.OW == (g.W + 2 * g.pw - g.dw * (g.KW - 1) - 1) / g.sw + 1;
  if (g.N <= 0 || g.C <= 0 || g.OC <= 0 || g.OH <= 0 || g.OW <= 0) return "an empty size";
  if (!derived) return "its output size is not the one cuDNN derives (conv_transpose2d's output_padding)";
  if (biggest >= INT_MAX) return "the sizes exceed cuDNN's int range";
  return "";
}

#endif  // MINIDL_CUDNN

struct Plan {
  ConvPath path = ConvPath::Im2col;
#ifdef MINIDL_CUDNN
  Descriptors d{};
  int algo = 0;
  size_t workspace = 0;
#endif
  std::string line;  // for conv_choice_lines()
};

std::mutex plans_mutex;
std::map<Key, Plan>& plans() {
  static std::map<Key, Plan> p;
  return p;
}

// The untimed choice: direct where it takes the shape, else im2col.
Plan untimed(const std::string& what, bool direct, const char* why) {
  Plan plan;
  plan.path = direct ? ConvPath::Direct : ConvPath::Im2col;
  plan.line = cat(what, direct ? ": direct (" : ": im2col (", why, ")");
  return plan;
}

#ifdef MINIDL_CUDNN

// The first result that succeeded, is deterministic, uses no tensor cores
// unless TF32 is allowed, and needs at most the workspace cap; null if none.
// Results come fastest first.
template <class Perf>
const Perf* first_usable(const Perf* results, int count, bool tf32) {
  for (int i = 0; i < count; ++i) {
    const Perf& r = results[i];
    const bool math_ok = r.mathType == CUDNN_FMA_MATH || r.mathType == CUDNN_DEFAULT_MATH ||
                         (tf32 && r.mathType == CUDNN_TENSOR_OP_MATH);  // never down to float16
    if (r.status == CUDNN_STATUS_SUCCESS && r.determinism == CUDNN_DETERMINISTIC && math_ok &&
        r.memory <= kWorkspaceCap)
      return &r;
  }
  return nullptr;
}

// One pass's pick: cuDNN's heuristic ranks the algorithms (host only); to
// measure, cudnnFind*Ex then runs every one whose workspace fits (the most
// any ranked algorithm asks, within the cap) and ranks them by time. The
// first usable one goes into *plan; false if none.
template <class Perf, class Heuristic, class Find>
bool pick(const Heuristic& heuristic, const Find& find, bool measure, cudnnConvolutionDescriptor_t conv,
          Plan* plan, float* ms) {
  constexpr int kMax = 16;
  Perf r[kMax];
  int count = 0;
  CUDNN_CHECK(heuristic(kMax, &count, r));
  if (measure) {
    size_t bytes = 0;
    for (int i = 0; i < count; ++i)
      if (r[i].status == CUDNN_STATUS_SUCCESS && r[i].memory <= kWorkspaceCap)
        bytes = std::max(bytes, r[i].memory);
    Scratch<char> workspace(static_cast<int64_t>(bytes));
    CUDNN_CHECK(find(kMax, &count, r, workspace.data(), bytes));
  }
  const bool tf32 = allow_tf32();
  const Perf* best = first_usable(r, count, tf32);
  if (!best) return false;
  plan->algo = static_cast<int>(best->algo);
  plan->workspace = best->memory;
  *ms = best->time;
  // TF32 off: the descriptor stays at FMA math, so no pick uses tensor
  // cores; on: the pick runs with the math it was ranked with
  if (tf32) CUDNN_CHECK(cudnn()->set_math(conv, best->mathType));
  return true;
}

// Asks cuDNN for the pass's algorithm (measured or by heuristic, see pick)
// and makes the plan's descriptors.
bool pick_cudnn(ConvPass pass, const ConvGeometry& g, const ConvTensors& t, bool measure,
                Plan* plan, float* ms) {
  const Cudnn& c = *cudnn();
  plan->d = describe_for_cudnn(g, allow_tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH);
  const Descriptors& d = plan->d;
  cudnnHandle_t h = handle();
  switch (pass) {
    case ConvPass::Forward:
      return pick<cudnnConvolutionFwdAlgoPerf_t>(
          [&](int max, int* n, auto* r) { return c.heuristic_fwd(h, d.x, d.w, d.conv, d.y, max, n, r); },
          [&](int max, int* n, auto* r, void* ws, size_t bytes) {
            return c.find_fwd(h, d.x, t.x, d.w, t.w, d.conv, d.y, t.out, max, n, r, ws, bytes);
          },
          measure, d.conv, plan, ms);
    case ConvPass::InputGrad:
      return pick<cudnnConvolutionBwdDataAlgoPerf_t>(
          [&](int max, int* n, auto* r) { return c.heuristic_data(h, d.w, d.y, d.conv, d.x, max, n, r); },
          [&](int max, int* n, auto* r, void* ws, size_t bytes) {
            return c.find_data(h, d.w, t.w, d.y, t.y, d.conv, d.x, t.out, max, n, r, ws, bytes);
          },
          measure, d.conv, plan, ms);
    case ConvPass::WeightGrad:
      return pick<cudnnConvolutionBwdFilterAlgoPerf_t>(
          [&](int max, int* n, auto* r) { return c.heuristic_filter(h, d.x, d.y, d.conv, d.w, max, n, r); },
          [&](int max, int* n, auto* r, void* ws, size_t bytes) {
            return c.find_filter(h, d.x, t.x, d.y, t.y, d.conv, d.w, t.out, max, n, r, ws, bytes);
          },
          measure, d.conv, plan, ms);
  }
  return false;
}

// Runs the planned algorithm: out = the pass's result (overwritten, beta 0).
void run_cudnn(ConvPass pass, const Plan& plan, const ConvTensors& t) {
  const Cudnn& c = *cudnn();
  const Descriptors& d = plan.d;
  const float one = 1.f, zero = 0.f;
  Scratch<char> workspace(static_cast<int64_t>(plan.workspace));
  switch (pass) {
    case ConvPass::Forward:
      CUDNN_CHECK(c.forward(handle(), &one, d.x, t.x, d.w, t.w, d.conv,
                            static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo), workspace.data(),
                            plan.workspace, &zero, d.y, t.out));
      return;
    case ConvPass::InputGrad:
      CUDNN_CHECK(c.backward_data(handle(), &one, d.w, t.w, d.y, t.y, d.conv,
                                  static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo),
                                  workspace.data(), plan.workspace, &zero, d.x, t.out));
      return;
    case ConvPass::WeightGrad:
      CUDNN_CHECK(c.backward_filter(handle(), &one, d.x, t.x, d.y, t.y, d.conv,
                                    static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algo),
                                    workspace.data(), plan.workspace, &zero, d.w, t.out));
      return;
  }
}

// A new plan for (pass, g) under the current setting (Auto or Cudnn).
Plan make_plan(ConvPass pass, const ConvGeometry& g, const ConvTensors& t,
               const std::function<void()>& im2col, const std::function<void()>& direct) {
  const ConvAlgorithm setting = conv_algorithm();
  const std::string what = describe(pass, g);
  Plan plan;
  MINIDL_CHECK(cudnn() || setting != ConvAlgorithm::Cudnn, "conv2d on CUDA: cuDNN was asked for (",
               "cuda::set_conv_algorithm) but ", failure, " (", what, ")");
  const std::string refused = cudnn() ? cudnn_refuses(g) : failure;
  float cudnn_ms = 0;
  if (setting == ConvAlgorithm::Cudnn) {
    if (!refused.empty()) {  // as PyTorch's native path
      plan.line = cat(what, ": im2col (", refused, ")");
      return plan;
    }
    MINIDL_CHECK(pick_cudnn(pass, g, t, false, &plan, &cudnn_ms), "conv2d on CUDA: cuDNN offers ",
                 "no deterministic algorithm", allow_tf32() ? "" : " without TF32", " for ", what);
    plan.path = ConvPath::Cudnn;
    plan.line = cat(what, ": cudnn algo ", plan.algo, " (heuristic)");
    return plan;
  }
  if (capture_in_progress())  // Auto inside a capture: nothing can be timed
    return untimed(what, bool(direct), "first met inside a CUDA graph capture");
  const float im2col_ms = time_ms(im2col);
  const float direct_ms = direct ? time_ms(direct) : 0.f;
  std::string why_not = refused.empty() ? "cuDNN: no deterministic algorithm" : refused;
  bool found = false;
  if (refused.empty()) try {  // Auto takes a native path when cuDNN refuses the shape
      found = pick_cudnn(pass, g, t, true, &plan, &cudnn_ms);
    } catch (const Error& e) {
      why_not = e.what();
    } catch (const std::bad_alloc&) {
      why_not = "cuDNN: no device memory for its workspace";
    }
  float best = im2col_ms;
  if (direct && direct_ms < best) best = direct_ms, plan.path = ConvPath::Direct;
  if (found && cudnn_ms < best) plan.path = ConvPath::Cudnn;
  char figures[128];
  std::snprintf(figures, sizeof figures, "im2col %.1f us", im2col_ms * 1e3);
  std::string line = figures;
  if (direct) std::snprintf(figures, sizeof figures, ", direct %.1f us", direct_ms * 1e3), line += figures;
  if (found) std::snprintf(figures, sizeof figures, ", cudnn %.1f us", cudnn_ms * 1e3), line += figures;
  else line += "; " + why_not;
  const char* name[] = {"im2col", "direct", "cudnn"};
  plan.line = cat(what, ": ", name[static_cast<int>(plan.path)],
                  plan.path == ConvPath::Cudnn ? cat(" algo ", plan.algo) : std::string(), " (",
                  line, ")");
  return plan;
}

#else  // no cudnn.h at build time

Plan make_plan(ConvPass pass, const ConvGeometry& g, const ConvTensors&,
               const std::function<void()>&, const std::function<void()>& direct) {
  MINIDL_CHECK(conv_algorithm() != ConvAlgorithm::Cudnn, "conv2d on CUDA: cuDNN was asked for ",
               "(cuda::set_conv_algorithm) but minidl was built without cudnn.h");
  return untimed(describe(pass, g), bool(direct), "built without cuDNN");
}

#endif

}  // namespace

ConvPath run_conv(ConvPass pass, const ConvGeometry& g, const ConvTensors& t,
                  const std::function<void()>& im2col, const std::function<void()>& direct) {
  const bool empty = g.N * g.C * g.OC * g.OH * g.OW == 0;  // im2col's fills handle these
  const ConvAlgorithm setting = conv_algorithm();
  if (setting == ConvAlgorithm::Direct && direct && !empty) {
    direct();
    return ConvPath::Direct;
  }
  if (setting == ConvAlgorithm::Im2col || setting == ConvAlgorithm::Direct || empty) {
    im2col();
    return ConvPath::Im2col;
  }
  const Key key = key_of(pass, g);
  const Plan* plan = nullptr;
  {
    std::lock_guard lock(plans_mutex);
    auto it = plans().find(key);
    if (it != plans().end()) plan = &it->second;
  }
  if (!plan) {  // planning may run the GPU (Auto): outside the lookup's lock, one at a time
    static std::mutex planning;  // the cuDNN handle is not for two threads at once
    std::lock_guard one_at_a_time(planning);
    Plan made = make_plan(pass, g, t, im2col, direct);
    std::lock_guard lock(plans_mutex);
    plan = &plans().emplace(key, std::move(made)).first->second;
  }
  switch (plan->path) {
    case ConvPath::Direct: direct(); break;
    case ConvPath::Im2col: im2col(); break;
    case ConvPath::Cudnn:
#ifdef MINIDL_CUDNN
      run_cudnn(pass, *plan, t);
#endif
      break;
  }
  return plan->path;
}

void prepare_cudnn_for_capture() {
#ifdef MINIDL_CUDNN
  if (conv_algorithm() == ConvAlgorithm::Cudnn && cudnn()) (void)handle();
#endif
}

std::vector<std::string> conv_choice_lines() {
  std::lock_guard lock(plans_mutex);
  std::vector<std::string> lines;
  for (const auto& [key, plan] : plans()) lines.push_back(plan.line);
  return lines;
}

}  // namespace minidl::cuda
