// PyTorch reference cases: values and gradients of an op against PyTorch 1.13,
// read from tests/reference/<group>.json (written by make_<group>.py with
// Debian's python3-torch; see torch_cases.py), so the suite runs without it.
//
//   check_torch_reference("shape", {
//       {"permute", [](const Inputs& x, const Attrs& a) { return Outputs{permute(x[0], a["dims"])}; }},
//   });
//
// Every case's op must have an entry (a case without one fails). For each case:
// the outputs, then the gradients of sum_k(sum(out_k * r_k)) (r_k the file's
// cotangents) for the inputs that require them, each within `tol` relative
// error: max |got - want| over max |want| of that tensor (NaNs must sit at the
// same places). device: the inputs are moved there first (see kReferenceDevice).
#pragma once
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#ifndef MINIDL_TEST_REFERENCE_DIR
#error "tests/CMakeLists.txt defines MINIDL_TEST_REFERENCE_DIR"
#endif

namespace minidl::testing {

// Where the cases run: the CPU, or the CUDA device where the file is also
// compiled into the CUDA suite (tests/CMakeLists.txt: test_cuda_on_cpu runs
// the same cases on the emulator, test_cuda on a GPU).
#ifdef MINIDL_REFERENCE_ON_CUDA
inline constexpr Device kReferenceDevice = Device::CUDA;
#else
inline constexpr Device kReferenceDevice = Device::CPU;
#endif

using Inputs = std::vector<Tensor>;
using Outputs = std::vector<Tensor>;
using Attrs = nlohmann::json;
using RefOp = std::function<Outputs(const Inputs&, const Attrs&)>;

inline Tensor tensor_from_json(const nlohmann::json& j) {
  Shape shape = j.at("shape").get<Shape>();
  const std::string dtype = j.at("dtype");
  Tensor flat;  // from_vector reads an empty shape as [n]: reshape after
  if (dtype == "float32") flat = Tensor::from_vector(j.at("data").get<std::vector<float>>());
  else if (dtype == "int64") flat = Tensor::from_vector(j.at("data").get<std::vector<int64_t>>());
  else if (dtype == "int32") flat = Tensor::from_vector(j.at("data").get<std::vector<int32_t>>());
  else FAIL("unknown dtype " << dtype);
  return flat.reshape(shape).detach();
}

// max |got - want| / max |want|; infinity when shapes or NaN places differ
inline double reference_error(const Tensor& got, const Tensor& want) {
  if (got.shape() != want.shape()) return INFINITY;
  const std::vector<float> g = got.to_float_vector(), w = want.to_float_vector();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i]) || std::isnan(g[i])) {
      if (std::isnan(w[i]) != std::isnan(g[i])) return INFINITY;
      continue;
    }
    if (std::isinf(w[i]) || std::isinf(g[i])) {
      if (w[i] != g[i]) return INFINITY;
      continue;
    }
    diff = std::max(diff, std::abs(static_cast<double>(g[i]) - w[i]));
    scale = std::max(scale, std::abs(static_cast<double>(w[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

inline void check_torch_reference(const std::string& group, const std::map<std::string, RefOp>& ops,
                                  Device device = kReferenceDevice, double tol = 1e-5) {
  const std::string path = std::string(MINIDL_TEST_REFERENCE_DIR) + "/" + group + ".json";
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  const nlohmann::json file = nlohmann::json::parse(in);
  int checked = 0;
  for (const nlohmann::json& c : file.at("cases")) {
    const std::string name = c.at("name"), op = c.at("op");
    CAPTURE(name);
    auto it = ops.find(op);
    if (it == ops.end()) {
      FAIL_CHECK("no entry for op '" << op << "' (case " << name << ")");
      continue;
    }
    Inputs inputs;
    for (const nlohmann::json& j : c.at("inputs")) {
      Tensor t = tensor_from_json(j).to(device);
      if (j.at("requires_grad").get<bool>()) t.requires_grad_();
      inputs.push_back(t);
    }
    Outputs outs = it->second(inputs, c.at("attrs"));
    const nlohmann::json& want = c.at("outputs");
    REQUIRE(outs.size() == want.size());
    Tensor loss;
    for (size_t k = 0; k < outs.size(); ++k) {
      CAPTURE(k);
      const Tensor want_k = tensor_from_json(want[k]);
      const double err = reference_error(outs[k], want_k);
      INFO("output " << k << ": got " << to_string(outs[k].shape()) << ", PyTorch "
                     << to_string(want_k.shape()) << ": relative error " << err);
      CHECK(err <= tol);
      const nlohmann::json& r = c.at("cotangents")[k];
      if (r.is_null() || !outs[k].requires_grad()) continue;
      Tensor term = sum(mul(outs[k], tensor_from_json(r).to(device)));
      loss = loss.defined() ? add(loss, term) : term;
    }
    if (loss.defined()) loss.backward();
    const nlohmann::json& grads = c.at("grads");
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (grads[i].is_null()) continue;
      CAPTURE(i);
      Tensor want_g = tensor_from_json(grads[i]);
      Tensor got_g = inputs[i].grad().defined() ? inputs[i].grad() : Tensor::zeros(want_g.shape());
      const double err = reference_error(got_g, want_g);
      INFO("gradient of input " << i << ": got " << to_string(got_g.shape()) << ", PyTorch "
                                << to_string(want_g.shape()) << ": relative error " << err);
      CHECK(err <= tol);
    }
    ++checked;
  }
  MESSAGE(group << ": " << checked << " PyTorch reference cases");
}

}  // namespace minidl::testing
