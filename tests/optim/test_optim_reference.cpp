// PyTorch reference trajectories (tests/reference/make_optim.py writes
// optim.json): optimizers with parameter groups, RMSprop's variants and a
// StepLR driving every group, a few steps from fixed parameters and
// gradients, each parameter after each step within 1e-5 relative; and
// clip_grad_norm_'s total norm and clipped gradients; on kReferenceDevice
// (tests/cuda/reference_optim.cpp runs them on the CUDA device).
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <fstream>
#include <memory>

#include "torch_reference.h"

using namespace minidl;
using nlohmann::json;
using testing::kReferenceDevice;
using testing::reference_error;

namespace {

json load_reference() {
  std::ifstream in(std::string(MINIDL_TEST_REFERENCE_DIR) + "/optim.json");
  REQUIRE(in.good());
  return json::parse(in);
}

Tensor from(const json& data, const json& shape) {
  return Tensor::from_vector(data.get<std::vector<float>>()).reshape(shape.get<Shape>());
}

// On kReferenceDevice.
Tensor on_device(const json& data, const json& shape) {
  return from(data, shape).to(kReferenceDevice);
}

// A JSON options object (PyTorch's keyword names) as GroupOptions.
optim::GroupOptions options_of(const json& j) {
  optim::GroupOptions o;
  for (const auto& [key, value] : j.items()) {
    if (key == "lr") o.lr = value;
    else if (key == "weight_decay") o.weight_decay = value;
    else if (key == "momentum") o.momentum = value;
    else if (key == "dampening") o.dampening = value;
    else if (key == "nesterov") o.nesterov = value;
    else if (key == "betas") o.betas = std::pair{value[0].get<double>(), value[1].get<double>()};
    else if (key == "eps") o.eps = value;
    else if (key == "alpha") o.alpha = value;
    else if (key == "centered") o.centered = value;
    else if (key == "maximize") o.maximize = value;
    else FAIL("unknown option " << key);
  }
  return o;
}

std::unique_ptr<optim::Optimizer> make(const std::string& kind,
                                       std::vector<optim::ParamGroup> groups,
                                       const optim::GroupOptions& defaults) {
  if (kind == "SGD") return std::make_unique<optim::SGD>(std::move(groups), defaults);
  if (kind == "Momentum") return std::make_unique<optim::Momentum>(std::move(groups), defaults);
  if (kind == "Adam") return std::make_unique<optim::Adam>(std::move(groups), defaults);
  if (kind == "AdamW") return std::make_unique<optim::AdamW>(std::move(groups), defaults);
  if (kind == "RMSprop") return std::make_unique<optim::RMSprop>(std::move(groups), defaults);
  FAIL("unknown optimizer " << kind);
  return nullptr;
}

}  // namespace

TEST_CASE(
    "PyTorch reference: optimizers (parameter groups, StepLR, maximize) follow PyTorch's "
    "trajectories") {
  const json ref = load_reference();
  REQUIRE(ref.at("optimizers").size() >= 16);
  for (const json& c : ref.at("optimizers")) {
    const std::string name = c.at("name");
    CAPTURE(name);
    std::vector<Tensor> params;
    for (size_t i = 0; i < c.at("shapes").size(); ++i)
      params.push_back(on_device(c.at("init")[i], c.at("shapes")[i]).requires_grad_());
    std::vector<optim::ParamGroup> groups;
    for (const json& g : c.at("groups")) {
      optim::ParamGroup group{{}, options_of(g.at("options"))};
      for (size_t i : g.at("params").get<std::vector<size_t>>()) group.params.push_back(params[i]);
      groups.push_back(std::move(group));
    }
    auto opt = make(c.at("optimizer"), std::move(groups), options_of(c.at("defaults")));
    std::unique_ptr<optim::StepLR> sched;
    if (!c.at("scheduler").is_null())
      sched = std::make_unique<optim::StepLR>(*opt, c.at("scheduler").at("step_size"),
                                              c.at("scheduler").at("gamma"));
    for (size_t step = 0; step < c.at("grads").size(); ++step) {
      for (size_t i = 0; i < params.size(); ++i)
        params[i].set_grad(on_device(c.at("grads")[step][i], c.at("shapes")[i]));
      opt->step();
      if (sched) sched->step();
      for (size_t i = 0; i < params.size(); ++i) {
        const double err =
            reference_error(params[i], from(c.at("trajectory")[step][i], c.at("shapes")[i]));
        INFO("step " << step + 1 << ", parameter " << i << ": relative error " << err);
        CHECK(err <= 1e-5);
      }
    }
  }
}

TEST_CASE("PyTorch reference: clip_grad_norm_ returns PyTorch's total norm and clips as it does") {
  const json ref = load_reference();
  REQUIRE(ref.at("clip_grad_norm").size() >= 5);
  for (const json& c : ref.at("clip_grad_norm")) {
    const std::string name = c.at("name");
    CAPTURE(name);
    const double norm_type = c.at("norm_type").is_string() ? optim::kInf : c.at("norm_type").get<double>();
    std::vector<Tensor> params;
    for (size_t i = 0; i < c.at("shapes").size(); ++i) {
      const Shape shape = c.at("shapes")[i].get<Shape>();
      params.push_back(Tensor::zeros(shape, kFloat32, kReferenceDevice).requires_grad_());
      params.back().set_grad(on_device(c.at("grads")[i], c.at("shapes")[i]));
    }
    const Tensor norm = optim::clip_grad_norm_(params, c.at("max_norm"), norm_type);
    CHECK(norm.dim() == 0);
    CHECK(norm.device() == kReferenceDevice);  // read back only here, by the test
    const double total = norm.item();
    const double want = c.at("total");
    CHECK(std::abs(total - want) <= 1e-5 * want);
    for (size_t i = 0; i < params.size(); ++i) {
      const double err = reference_error(params[i].grad(), from(c.at("clipped")[i], c.at("shapes")[i]));
      INFO("gradient " << i << ": relative error " << err);
      CHECK(err <= 1e-5);
    }
  }
}
