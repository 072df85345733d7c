// --save and --resume for the examples whose training loop is written out
// (resnet_fashion, dcgan_mnist, char_lstm, tiny_gpt): one safetensors file
// holding each network's weights ("<name>.<parameter>"), each optimizer's
// state ("<name>.<entry>"), the number of steps taken and the global
// generator's state (dropout masks). Loading validates everything before
// taking anything (Cell::load_state_dict, Optimizer::load_state_dict) and
// names the file in its error.
//
//   example::Trainables state{{{"net", &net}}, {{"optimizer", &optimizer}}};
//   int64_t step = resume.empty() ? 0 : example::load_training(resume, state);
//   ...
//   example::save_training(save, state, step);
#pragma once
#include <minidl/minidl.h>

#include <string>
#include <utility>
#include <vector>

namespace example {

struct Trainables {
  std::vector<std::pair<std::string, minidl::nn::Cell*>> nets;
  std::vector<std::pair<std::string, minidl::optim::Optimizer*>> optimizers;
};

inline void save_training(const std::string& path, const Trainables& t, int64_t steps) {
  minidl::StateDict state;
  for (const auto& [name, net] : t.nets) state.put(name, {net->state_dict(), {}});
  for (const auto& [name, opt] : t.optimizers) state.put(name, opt->state_dict());
  state.set_int("steps", steps);
  state.values["rng"] = minidl::default_generator().state();
  minidl::save_safetensors(path, state.tensors, state.values);
}

// Restores a save_training() file; returns the steps it had taken.
inline int64_t load_training(const std::string& path, const Trainables& t) {
  minidl::StateDict state;
  state.tensors = minidl::load_safetensors(path, &state.values);
  try {
    const int64_t steps = state.get_int("steps", "the training state");
    MINIDL_CHECK(steps >= 0, "'steps' is ", steps, ", expected >= 0");
    for (const auto& [name, net] : t.nets) net->load_state_dict(state.take(name).tensors);
    for (const auto& [name, opt] : t.optimizers) opt->load_state_dict(state.take(name));
    minidl::default_generator().set_state(state.get("rng", "the training state"));
    return steps;
  } catch (const minidl::Error& e) {
    throw minidl::Error(minidl::cat("--resume ", path, ": ", e.what()));
  }
}

}  // namespace example
