// The convolution family and resizing ops (issue 22) against PyTorch 1.13:
// values and gradients from tests/reference/conv.json (make_conv.py), within 1e-5.
#include "torch_reference.h"

using namespace minidl;
using namespace minidl::testing;

namespace minidl::testing {

Size2 size2(const Attrs& a) { return {a[0].get<int64_t>(), a[1].get<int64_t>()}; }

// The op table of conv.json, shared with the CUDA suite.
std::map<std::string, RefOp> conv_reference_ops() {
  auto bias = [](const Inputs& x) { return x.size() > 2 ? x[2] : Tensor(); };
  return {
      {"conv2d",
       [bias](const Inputs& x, const Attrs& a) {
         return Outputs{conv2d(x[0], x[1], bias(x),
                               {.stride = size2(a["stride"]), .padding = size2(a["padding"]),
                                .dilation = size2(a["dilation"]), .groups = a["groups"]})};
       }},
      {"conv_transpose2d",
       [bias](const Inputs& x, const Attrs& a) {
         return Outputs{conv_transpose2d(
             x[0], x[1], bias(x),
             {.stride = size2(a["stride"]), .padding = size2(a["padding"]),
              .output_padding = size2(a["output_padding"]), .dilation = size2(a["dilation"]),
              .groups = a["groups"]})};
       }},
      {"conv1d",
       [bias](const Inputs& x, const Attrs& a) {
         return Outputs{conv1d(x[0], x[1], bias(x),
                               {.stride = a["stride"], .padding = a["padding"],
                                .dilation = a["dilation"], .groups = a["groups"]})};
       }},
      {"adaptive_avg_pool2d",
       [](const Inputs& x, const Attrs& a) {
         return Outputs{adaptive_avg_pool2d(x[0], size2(a["size"]))};
       }},
      {"interpolate",
       [](const Inputs& x, const Attrs& a) {
         InterpolateArgs args;
         if (a.contains("size")) args.size = size2(a["size"]);
         else args.scale_factor = std::array<double, 2>{a["scale_factor"][0], a["scale_factor"][1]};
         if (a.contains("mode")) args.mode = a["mode"].get<std::string>();
         if (a.contains("align_corners")) args.align_corners = a["align_corners"].get<bool>();
         return Outputs{interpolate(x[0], args)};
       }},
  };
}

}  // namespace minidl::testing

TEST_CASE("PyTorch reference: conv2d, conv_transpose2d, conv1d, adaptive_avg_pool2d, interpolate") {
  check_torch_reference("conv", conv_reference_ops());
}
