// Issue 22's elementwise ops, comparisons, reductions and activations against
// PyTorch 1.13: values and gradients from tests/reference/math.json
// (make_math.py), within 1e-5; ties, bounds and extreme inputs included.
#include <limits>

#include "torch_reference.h"

using namespace minidl;
using namespace minidl::testing;

namespace {

std::vector<int64_t> dims_of(const Attrs& a) { return a["dims"].get<std::vector<int64_t>>(); }

std::optional<double> bound(const Attrs& a, const char* key) {
  if (!a.contains(key)) return std::nullopt;
  return a[key].get<double>();
}

#define UNARY(fn)                                                        \
  {                                                                      \
#fn, [](const Inputs& x, const Attrs&) { return Outputs{fn(x[0])}; } \
  }
#define BINARY(fn)                                                             \
  {                                                                            \
#fn, [](const Inputs& x, const Attrs&) { return Outputs{fn(x[0], x[1])}; } \
  }

}  // namespace

TEST_CASE("PyTorch reference: math ops, comparisons, reductions and activations") {
  check_torch_reference(
      "math",
      {
          UNARY(abs),
          UNARY(erf),
          UNARY(expm1),
          UNARY(log1p),
          UNARY(rsqrt),
          UNARY(sin),
          UNARY(cos),
          UNARY(silu),
          UNARY(log_sigmoid),
          UNARY(argmin),
          BINARY(maximum),
          BINARY(minimum),
          BINARY(eq),
          BINARY(ne),
          BINARY(lt),
          BINARY(le),
          BINARY(gt),
          BINARY(ge),
          {"clamp",
           [](const Inputs& x, const Attrs& a) {
             return Outputs{clamp(x[0], bound(a, "min"), bound(a, "max"))};
           }},
          {"min", [](const Inputs& x,
                     const Attrs& a) { return Outputs{min(x[0], dims_of(a), a["keepdim"])}; }},
          {"argmin_dim",
           [](const Inputs& x, const Attrs& a) {
             return Outputs{argmin(x[0], a["dim"], a["keepdim"])};
           }},
          {"argmax_dim",
           [](const Inputs& x, const Attrs& a) {
             return Outputs{argmax(x[0], a["dim"], a["keepdim"])};
           }},
          {"var",
           [](const Inputs& x, const Attrs& a) {
             return Outputs{var(x[0], dims_of(a), a["unbiased"], a["keepdim"])};
           }},
          {"std",
           [](const Inputs& x, const Attrs& a) {
             return Outputs{minidl::std(x[0], dims_of(a), a["unbiased"], a["keepdim"])};
           }},
          {"logsumexp",
           [](const Inputs& x, const Attrs& a) {
             return Outputs{logsumexp(x[0], dims_of(a), a["keepdim"])};
           }},
          {"norm",
           [](const Inputs& x, const Attrs& a) {
             double p = a["p"].is_string() ? std::numeric_limits<double>::infinity()
                                           : a["p"].get<double>();
             return Outputs{norm(x[0], p, dims_of(a), a["keepdim"])};
           }},
          {"leaky_relu",
           [](const Inputs& x, const Attrs& a) {
             return Outputs{leaky_relu(x[0], a["negative_slope"])};
           }},
          {"gelu",
           [](const Inputs& x, const Attrs& a) { return Outputs{gelu(x[0], a["approximate"])}; }},
          {"elu", [](const Inputs& x, const Attrs& a) { return Outputs{elu(x[0], a["alpha"])}; }},
          {"softplus",
           [](const Inputs& x, const Attrs& a) {
             return Outputs{softplus(x[0], a["beta"], a["threshold"])};
           }},
          {"hardtanh", [](const Inputs& x,
                          const Attrs& a) { return Outputs{hardtanh(x[0], a["min"], a["max"])}; }},
      });
}
