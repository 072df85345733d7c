// Issue 22's shape and indexing ops against PyTorch 1.13: values and
// gradients from tests/reference/shape.json (make_shape.py), within 1e-5.
#include "torch_reference.h"

using namespace minidl;
using namespace minidl::testing;

namespace {

std::vector<int64_t> ints(const Attrs& a) { return a.get<std::vector<int64_t>>(); }

}  // namespace

TEST_CASE("PyTorch reference: shape and indexing ops, broadcasting matmul, gather, pad") {
  check_torch_reference("shape", {
      {"permute", [](const Inputs& x, const Attrs& a) { return Outputs{permute(x[0], ints(a["dims"]))}; }},
      {"transpose",
       [](const Inputs& x, const Attrs& a) { return Outputs{transpose(x[0], a["d0"], a["d1"])}; }},
      {"narrow",
       [](const Inputs& x, const Attrs& a) {
         return Outputs{narrow(x[0], a["dim"], a["start"], a["length"])};
       }},
      {"slice",
       [](const Inputs& x, const Attrs& a) { return Outputs{slice(x[0], a["dim"], a["start"], a["end"])}; }},
      {"split", [](const Inputs& x, const Attrs& a) { return split(x[0], a["size"], a["dim"]); }},
      {"split_with_sizes",
       [](const Inputs& x, const Attrs& a) { return split_with_sizes(x[0], ints(a["sizes"]), a["dim"]); }},
      {"chunk", [](const Inputs& x, const Attrs& a) { return chunk(x[0], a["chunks"], a["dim"]); }},
      {"cat", [](const Inputs& x, const Attrs& a) { return Outputs{cat(x, a["dim"].get<int64_t>())}; }},
      {"stack", [](const Inputs& x, const Attrs& a) { return Outputs{stack(x, a["dim"].get<int64_t>())}; }},
      {"unsqueeze", [](const Inputs& x, const Attrs& a) { return Outputs{unsqueeze(x[0], a["dim"])}; }},
      {"squeeze",
       [](const Inputs& x, const Attrs& a) {
         return Outputs{a.contains("dim") ? squeeze(x[0], a["dim"]) : squeeze(x[0])};
       }},
      {"unflatten",
       [](const Inputs& x, const Attrs& a) { return Outputs{unflatten(x[0], a["dim"], ints(a["sizes"]))}; }},
      {"flatten",
       [](const Inputs& x, const Attrs& a) { return Outputs{flatten(x[0], a["start"], a["end"])}; }},
      {"expand", [](const Inputs& x, const Attrs& a) { return Outputs{expand(x[0], ints(a["shape"]))}; }},
      {"index_select",
       [](const Inputs& x, const Attrs& a) { return Outputs{index_select(x[0], a["dim"], x[1])}; }},
      {"where", [](const Inputs& x, const Attrs&) { return Outputs{where(x[0], x[1], x[2])}; }},
      {"masked_fill",
       [](const Inputs& x, const Attrs& a) { return Outputs{masked_fill(x[0], x[1], a["value"])}; }},
      {"matmul", [](const Inputs& x, const Attrs&) { return Outputs{matmul(x[0], x[1])}; }},
      {"matmul_tt", [](const Inputs& x, const Attrs&) { return Outputs{matmul(x[0], x[1], true, true)}; }},
      {"gather", [](const Inputs& x, const Attrs& a) { return Outputs{gather(x[0], a["dim"], x[1])}; }},
      {"scatter_add",
       [](const Inputs& x, const Attrs& a) { return Outputs{scatter_add(x[0], a["dim"], x[1], x[2])}; }},
      {"pad", [](const Inputs& x, const Attrs& a) { return Outputs{pad(x[0], ints(a["pads"]), a["value"])}; }},
      {"tril", [](const Inputs& x, const Attrs& a) { return Outputs{tril(x[0], a["diagonal"])}; }},
      {"triu", [](const Inputs& x, const Attrs& a) { return Outputs{triu(x[0], a["diagonal"])}; }},
      {"one_hot", [](const Inputs& x, const Attrs& a) { return Outputs{one_hot(x[0], a["num_classes"])}; }},
  });
}
