// Optimizer: the base of SGD, Momentum, Adam, AdamW and RMSprop.
//
// An optimizer holds float32 parameters in parameter groups (PyTorch's
// param_groups), each with its own hyperparameters: a flat list (e.g.
// net.trainable_params()) is one group; a list of ParamGroups sets, per group,
// the options that differ from the constructor's defaults:
//
//   optim::Momentum opt({{net.body.trainable_params()},
//                        {net.head.trainable_params(), {.lr = 0.1, .weight_decay = 0}}},
//                       {.lr = 0.01, .weight_decay = 1e-4, .momentum = 0.9});
//
// step() updates, in place and outside autograd, every parameter that has a
// gradient and skips the others, through the device's update kernel (one call
// per group and device); per-parameter state (momentum buffers, Adam moments,
// step counts) is kept in vectors beside the parameter list (all groups' in
// order) and created, on the parameter's device, on its first update.
// Hyperparameters are validated in the constructors and add_param_group: a bad
// value throws std::invalid_argument naming the optimizer, the hyperparameter
// and the value (and the group, for a group's own value).
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "framework/backend/kernels.h"
#include "framework/safetensors.h"
#include "framework/tensor.h"

namespace minidl::optim {

// Named settings as text, e.g. {{"lr", "0.1"}, {"nesterov", "true"}}: what
// every rank must agree on (Model::train compares them across ranks).
using Settings = std::vector<std::pair<std::string, std::string>>;
// A double as the shortest text that reads back to the same bits, in %g style
// ("0.1", "0.0001", "1e-08").
std::string exact_text(double v);

// A group's hyperparameters where they differ from the optimizer's defaults
// (unset: the default); also the defaults themselves in the group
// constructors. Setting one the optimizer does not use (betas for SGD) is an
// error.
struct GroupOptions {
  std::optional<double> lr = {}, weight_decay = {};
  std::optional<double> momentum = {}, dampening = {};  // Momentum (and RMSprop's momentum)
  std::optional<bool> nesterov = {};
  std::optional<std::pair<double, double>> betas = {};  // Adam, AdamW: beta1, beta2
  std::optional<double> eps = {};                       // Adam, AdamW, RMSprop
  std::optional<double> alpha = {};                     // RMSprop
  std::optional<bool> centered = {};                    // RMSprop
  // Every optimizer: ascend instead, the gradient negated before the rule
  // (PyTorch's maximize; default false).
  std::optional<bool> maximize = {};
};

// Parameters and the options they override.
struct ParamGroup {
  std::vector<Tensor> params;
  GroupOptions options = {};
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient.
  void step();
  // Drops every parameter's gradient (PyTorch's set_to_none); with false,
  // fills the gradients that exist with zeros in place instead, keeping their
  // memory (what a CUDA graph's captured step needs, framework/cuda_graph.h).
  void zero_grad(bool set_to_none = true);

  // A group as the optimizer holds it: its parameters (parameters()[first]
  // on) and every hyperparameter of its rule, defaults filled in.
  struct Group {
    std::vector<Tensor> params;
    UpdateArgs options;
    size_t first = 0;
  };
  const std::vector<Group>& param_groups() const { return groups_; }
  // Appends a group (PyTorch's add_param_group): its parameters must be new to
  // the optimizer; unset options take the constructor's defaults. Throws like
  // the constructor; the optimizer is then unchanged.
  void add_param_group(ParamGroup group);

  double lr() const { return groups_.at(0).options.lr; }  // the first group's
  void set_lr(double lr);  // every group's; validated like the constructor's
  void set_lr(size_t group, double lr);
  // Every parameter, the groups' in order.
  const std::vector<Tensor>& parameters() const { return params_; }
  // The per-parameter state tensors step() updates in place (Momentum's
  // buffers, Adam's moments; undefined before a parameter's first update):
  // a captured step (parallel/train/graphed_step.h) checks they are still its own.
  std::vector<Tensor> state_tensors() const;
  const char* name() const { return name_; }
  // Every hyperparameter that shapes step(), exactly: the first group's under
  // their names, "lr" first, then the rule's (SGD: weight_decay; Momentum:
  // momentum, nesterov, dampening, weight_decay; Adam, AdamW: beta1, beta2,
  // eps, weight_decay; RMSprop: alpha, eps, weight_decay, momentum, centered),
  // then maximize;
  // with several groups then "param groups" and each later group's as
  // "group <g> <name>".
  Settings hyperparameters() const;

  // What step() carries from one call to the next, for an exact resume: values
  // "name", "param_groups" (the number of groups) and per group g
  // "param_groups.<g>.params" (its number of parameters) and
  // "param_groups.<g>.<hyperparameter>" (each of hyperparameters()' names, as
  // exact text), tensor "steps" (int64 [P], each parameter's updates) and the
  // rule's per-parameter state, "<state>.<i>" float32 [numel of parameter i]
  // on the CPU, present once parameter i has been updated (Momentum:
  // "momentum_buffer.<i>"; Adam: "exp_avg.<i>", "exp_avg_sq.<i>"; RMSprop:
  // "square_avg.<i>", "momentum_buffer.<i>", "grad_avg.<i>").
  // CPU tensors share storage with the optimizer's state.
  StateDict state_dict() const;
  // Restores a state_dict() into an optimizer of the same kind with the same
  // groups (as many, each with as many parameters of the same sizes): every
  // group's hyperparameters, and state tensors onto their parameters' devices.
  // A state of one group with only "lr" (before parameter groups) is read as
  // that lr; a group without "maximize" (before it existed) as maximize
  // false. The whole state is checked before any of it is taken, so that a
  // resume is exact or refused: each group's hyperparameters valid as the
  // constructor requires; every step count from 0 to kMaxSteps; a parameter
  // with a count > 0 has each state tensor its group's rule keeps (none for
  // Momentum with momentum 0), one with count 0 has none; each state tensor
  // float32 [numel of its parameter] with finite values (Adam's exp_avg_sq
  // also >= 0); no other entries. Throws minidl::Error naming the entry, what
  // was expected and what was got; the optimizer is then unchanged.
  void load_state_dict(const StateDict& state);

  // The largest step count a state may hold: 2^53, beyond which a count is no
  // real run's and Adam's bias correction (computed in double) loses it.
  static constexpr int64_t kMaxSteps = int64_t{1} << 53;

 protected:
  // `keys`: the hyperparameters the rule uses, in hyperparameters()' order
  // after "lr" (names of UpdateArgs' fields); "maximize" is added after them.
  Optimizer(const char* name, std::vector<const char*> keys);
  // The derived constructor's last act: `defaults` (the rule's, with the
  // constructor's options set over them) validated, then each group added.
  // Throws std::invalid_argument for a bad hyperparameter, minidl::Error for
  // no parameters at all (most often a Cell that never registered its
  // layers), or an undefined, non-float32 or repeated parameter.
  void init(std::vector<ParamGroup> groups, const UpdateArgs& defaults, const GroupOptions& options);
  // Updates the parameters listed in `ready` (indices into parameters(), all
  // of one group whose hyperparameters are `args`, each with a float32
  // gradient of its size on its device; steps_ already counts this update).
  virtual void update(const UpdateArgs& args, const std::vector<size_t>& ready) = 0;
  // Throws std::invalid_argument (through check) for a bad hyperparameter of
  // the rule's (lr is checked by the base).
  virtual void check_options(const UpdateArgs& args) const = 0;
  // Runs `rule` over the `ready` parameters, one kernel call per device;
  // m, v and w hold per-parameter state tensors (zeros [n] from the first update).
  void apply(UpdateRule rule, const UpdateArgs& args, const std::vector<size_t>& ready,
             std::vector<Tensor>* m = nullptr, std::vector<Tensor>* v = nullptr,
             std::vector<Tensor>* w = nullptr);
  // Throws std::invalid_argument "<name>: invalid <what> <value> (expected <rule>)" unless ok.
  void check(bool ok, const char* what, double value, const char* rule) const;
  // One per-parameter state vector, saved as "<key>.<i>" (absent where
  // undefined). `required`: whether the rule creates it at a parameter's
  // first update under its group's hyperparameters, so that a parameter with
  // updates must have it. `nonnegative`: its values are >= 0.
  struct StateSlot {
    const char* key;
    std::vector<Tensor>* state;
    bool (*required)(const UpdateArgs&) = [](const UpdateArgs&) { return true; };
    bool nonnegative = false;
  };
  // The subclass's state vectors (Momentum's buffers, Adam's moments), which
  // state_dict() saves and load_state_dict() checks and restores; the base
  // keeps them as long as parameters().
  virtual std::vector<StateSlot> state_slots() = 0;

  std::vector<Tensor> params_;
  std::vector<int64_t> steps_;  // updates of each parameter so far

 private:
  size_t group_of(size_t i) const;
  // Throws std::invalid_argument for an option set in `options` that the rule
  // does not use; `where` names the group.
  void check_known(const GroupOptions& options, const std::string& where) const;
  // The group checked and merged over defaults_, not yet added.
  Group make_group(ParamGroup group, size_t index) const;
  const char* name_;
  std::vector<const char*> keys_;  // "lr", then the rule's
  UpdateArgs defaults_;
  std::vector<Group> groups_;
};

}  // namespace minidl::optim
