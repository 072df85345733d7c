// Parameter groups (PyTorch's param_groups): per-group hyperparameters over
// the constructor's defaults, add_param_group, schedules driving every group
// from its own base rate, and state_dict round trips that keep the groups and
// refuse a state of another structure, naming what differs.
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <stdexcept>

#include "check_close.h"

using namespace minidl;
using testing::check_close;

namespace {

Tensor param(std::vector<float> v) { return Tensor::from_vector(v).requires_grad_(); }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

void set_grads(const std::vector<Tensor>& ps, float g) {
  for (Tensor p : ps) p.set_grad(Tensor::full(p.shape(), g));
}

}  // namespace

TEST_CASE("a flat parameter list is one group holding every hyperparameter") {
  Tensor a = param({1, 2}), b = param({3});
  optim::Momentum opt({a, b}, 0.1, 0.9, {.weight_decay = 0.01});
  REQUIRE(opt.param_groups().size() == 1);
  const auto& g = opt.param_groups()[0];
  CHECK(g.params.size() == 2);
  CHECK(g.options.lr == 0.1);
  CHECK(g.options.momentum == 0.9);
  CHECK(g.options.weight_decay == 0.01);
  CHECK(opt.hyperparameters() == optim::Settings{{"lr", "0.1"}, {"momentum", "0.9"},
                                                 {"nesterov", "false"}, {"dampening", "0"},
                                                 {"weight_decay", "0.01"}, {"maximize", "false"}});
}

TEST_CASE("each group steps with its own options, unset ones from the defaults") {
  // SGD: p -= lr * (g + wd * p); group 0: lr 0.1, wd 0; group 1: lr 0.5, wd 1
  Tensor a = param({1, -2}), b = param({4});
  optim::SGD sgd({{{a}}, {{b}, {.lr = 0.5, .weight_decay = 1}}}, {.lr = 0.1});
  a.set_grad(Tensor::of({1, 1}));
  b.set_grad(Tensor::of({2}));
  sgd.step();
  check_close(a, {1 - 0.1, -2 - 0.1});
  check_close(b, {4 - 0.5 * (2 + 4)});  // 1
  CHECK(sgd.param_groups()[1].options.weight_decay == 1);
  CHECK(sgd.parameters().size() == 2);
  CHECK(sgd.hyperparameters() == optim::Settings{{"lr", "0.1"}, {"weight_decay", "0"},
                                                 {"maximize", "false"}, {"param groups", "2"},
                                                 {"group 1 lr", "0.5"},
                                                 {"group 1 weight_decay", "1"},
                                                 {"group 1 maximize", "false"}});
  // Adam's betas and eps per group; RMSprop's centered and momentum per group
  Tensor c = param({1}), d = param({1});
  optim::Adam adam({{{c}}, {{d}, {.betas = std::pair{0.5, 0.9}, .eps = 1e-3}}}, {.lr = 0.1});
  CHECK(adam.param_groups()[0].options.beta1 == 0.9);
  CHECK(adam.param_groups()[1].options.beta1 == 0.5);
  CHECK(adam.param_groups()[1].options.beta2 == 0.9);
  CHECK(adam.param_groups()[1].options.eps == 1e-3);
  CHECK(adam.param_groups()[1].options.lr == 0.1);
  optim::RMSprop rms({{{c}}, {{d}, {.momentum = 0.5, .centered = true}}}, {});
  set_grads({c, d}, 1);
  rms.step();
  CHECK(!rms.grad_avg(0).defined());
  CHECK(!rms.momentum_buffer(0).defined());
  CHECK(rms.grad_avg(1).defined());
  CHECK(rms.momentum_buffer(1).defined());
}

TEST_CASE("group options are validated, naming the group; unused options are refused") {
  Tensor a = param({1}), b = param({2});
  CHECK(error_of([&] { optim::SGD({{{a}}, {{b}, {.weight_decay = -1}}}, {.lr = 0.1}); }) ==
        "SGD: invalid weight_decay -1 (expected weight_decay >= 0) (parameter group 1)");
  CHECK(error_of([&] { optim::SGD({{{a}}, {{b}, {.lr = -1}}}, {.lr = 0.1}); }) ==
        "SGD: invalid learning rate -1 (expected lr >= 0) (parameter group 1)");
  CHECK(error_of([&] { optim::SGD({{{a}}}, {.weight_decay = 0.1}); }) ==
        "SGD: the defaults set no lr (expected e.g. {.lr = 0.1})");
  CHECK(error_of([&] { optim::SGD({{{a}}, {{b}, {.betas = std::pair{0.5, 0.5}}}}, {.lr = 0.1}); }) ==
        "SGD: option betas set (parameter group 1) is not one of SGD's (lr, weight_decay, "
        "maximize)");
  CHECK(error_of([&] { optim::Adam({{{a}}}, {.momentum = 0.9}); }) ==
        "Adam: option momentum set is not one of Adam's (lr, beta1, beta2, eps, weight_decay, "
        "maximize)");
  CHECK(error_of([&] { optim::Adam({{{a}}, {{b}, {.betas = std::pair{1.0, 0.9}}}}, {}); }) ==
        "Adam: invalid beta1 1 (expected 0 <= beta1 < 1) (parameter group 1)");
  CHECK(error_of([&] { optim::SGD({{{a}}, {{a}}}, {.lr = 0.1}); }) ==
        "SGD: parameter 1 [1] (parameter group 1) appears more than once in the parameter list");
  CHECK(error_of([&] { optim::SGD({{{}}, {{}}}, {.lr = 0.1}); }).find("got an empty parameter "
                                                                     "list") == 5);
}

TEST_CASE("add_param_group appends parameters with the defaults under its own options") {
  Tensor a = param({1}), b = param({2, 3});
  optim::Momentum opt({a}, 0.1, 0.9);
  opt.add_param_group({{b}, {.lr = 0.01}});
  REQUIRE(opt.param_groups().size() == 2);
  CHECK(opt.param_groups()[1].first == 1);
  CHECK(opt.param_groups()[1].options.momentum == 0.9);
  CHECK(opt.param_groups()[1].options.lr == 0.01);
  set_grads({a, b}, 1);
  opt.step();
  check_close(a, {1 - 0.1});
  check_close(b, {2 - 0.01, 3 - 0.01});
  check_close(opt.momentum_buffer(1), {1, 1});
  // refused, and the optimizer unchanged: a parameter it holds, a bad value
  CHECK(error_of([&] { opt.add_param_group({{a}}); }) ==
        "Momentum: parameter 2 [1] (parameter group 2) appears more than once in the parameter "
        "list");
  CHECK(error_of([&] { opt.add_param_group({{param({0})}, {.dampening = 2}}); }) ==
        "Momentum: invalid dampening 2 (expected 0 <= dampening <= 1) (parameter group 2)");
  CHECK(opt.param_groups().size() == 2);
  CHECK(opt.parameters().size() == 2);
}

TEST_CASE("a schedule drives every group from its own base rate") {
  Tensor a = param({1}), b = param({1}), c = param({1});
  optim::SGD sgd({{{a}}, {{b}, {.lr = 0.01}}}, {.lr = 0.1});
  optim::StepLR sched(sgd, /*step_size=*/2, /*gamma=*/0.5);
  CHECK(sched.base_lrs() == std::vector<double>{0.1, 0.01});
  sched.step();
  sched.step();
  CHECK(sgd.param_groups()[0].options.lr == 0.05);
  CHECK(sgd.param_groups()[1].options.lr == 0.005);
  // a group added later starts from its lr then (PyTorch's initial_lr)
  sgd.add_param_group({{c}, {.lr = 1}});
  sched.step();
  CHECK(sched.base_lrs() == std::vector<double>{0.1, 0.01, 1});
  CHECK(sgd.param_groups()[2].options.lr == 0.5);
  CHECK(sched.settings().at(4) == std::pair<std::string, std::string>{"group 1 base_lr", "0.01"});
  // set_lr: one group, or all
  sgd.set_lr(1, 0.25);
  CHECK(sgd.param_groups()[1].options.lr == 0.25);
  CHECK(error_of([&] { sgd.set_lr(3, 0.1); }) ==
        "SGD::set_lr: parameter group 3 does not exist (the optimizer has 3)");
  sgd.set_lr(0.2);
  for (const auto& g : sgd.param_groups()) CHECK(g.options.lr == 0.2);
  // the schedule's state keeps every group's base rate and refuses another count
  const StateDict s = sched.state_dict();
  CHECK(s.values.at("base_lr.2") == "1");
  Tensor d = param({1});
  optim::SGD one({d}, 0.1);
  optim::StepLR other(one, 2, 0.5);
  CHECK(error_of([&] { other.load_state_dict(s); }) ==
        "LRScheduler::load_state_dict: the state holds 'base_lr.1', but the optimizer has 1 "
        "parameter group(s) (expected base_lr to base_lr.0)");
}

namespace {

// Momentum over three parameters in two groups, stepped twice with gradients
// that depend on the step.
struct Run {
  Tensor a = param({1, 2}), b = param({3}), c = param({-1, 0.5});
  optim::Momentum opt{
      std::vector<optim::ParamGroup>{{{a, b}}, {{c}, {.lr = 0.05, .momentum = 0.5, .nesterov = true}}},
      {.lr = 0.1, .weight_decay = 0.01, .momentum = 0.9}};
  void step(float g) {
    set_grads({a, b, c}, g);
    opt.step();
  }
};

}  // namespace

TEST_CASE("state_dict keeps the groups: a resume's next step is bit-identical") {
  Run run;
  run.step(1);
  run.opt.set_lr(1, 0.07);
  run.step(-0.5);
  const StateDict s = run.opt.state_dict();
  CHECK(s.values.at("param_groups") == "2");
  CHECK(s.values.at("param_groups.0.params") == "2");
  CHECK(s.values.at("param_groups.1.params") == "1");
  CHECK(s.values.at("param_groups.1.lr") == "0.07");
  CHECK(s.values.at("param_groups.1.nesterov") == "true");
  CHECK(s.values.at("param_groups.0.weight_decay") == "0.01");

  // a fresh optimizer with other hyperparameters takes the saved ones
  Run resumed;
  resumed.a.copy_(run.a);
  resumed.b.copy_(run.b);
  resumed.c.copy_(run.c);
  resumed.opt.set_lr(9);
  resumed.opt.load_state_dict(s);
  CHECK(resumed.opt.param_groups()[1].options.lr == 0.07);
  CHECK(resumed.opt.param_groups()[0].options.lr == 0.1);
  run.step(0.25);
  resumed.step(0.25);
  for (auto [x, y] : {std::pair{run.a, resumed.a}, {run.b, resumed.b}, {run.c, resumed.c}})
    CHECK(x.to_float_vector() == y.to_float_vector());
}

TEST_CASE("load_state_dict refuses another group structure, naming what differs") {
  Run run;
  run.step(1);
  const StateDict s = run.opt.state_dict();
  Tensor a = param({1, 2}), b = param({3}), c = param({-1, 0.5});
  optim::Momentum one({a, b, c}, 0.1, 0.9);
  CHECK(error_of([&] { one.load_state_dict(s); }) ==
        "Momentum::load_state_dict: the state holds 2 parameter group(s), this Momentum has 1");
  optim::Momentum split({{{a}}, {{b, c}}}, {.lr = 0.1, .momentum = 0.9});
  CHECK(error_of([&] { split.load_state_dict(s); }) ==
        "Momentum::load_state_dict: parameter group 0 holds 2 parameter(s) in the state, 1 in "
        "this Momentum");
  StateDict bad = s;
  bad.values["param_groups.1.nesterov"] = "yes";
  CHECK(error_of([&] { run.opt.load_state_dict(bad); }) ==
        "Momentum::load_state_dict: 'param_groups.1.nesterov' is 'yes', expected true or false");
  bad = s;
  bad.values.erase("param_groups.1.dampening");
  CHECK(error_of([&] { run.opt.load_state_dict(bad); }).find("param_groups.1.dampening") !=
        std::string::npos);
  bad = s;
  bad.values["param_groups.1.momentum"] = "0";  // nesterov needs momentum
  CHECK(error_of([&] { run.opt.load_state_dict(bad); }) ==
        "Momentum::load_state_dict: parameter group 1: Momentum: invalid momentum 0 (expected "
        "nesterov needs momentum > 0 and dampening 0)");
  CHECK(run.opt.param_groups()[1].options.lr == 0.05);  // nothing taken from refused states
}

TEST_CASE("a state from before parameter groups (only 'lr') loads into one group") {
  Tensor a = param({1, 2});
  optim::Momentum opt({a}, 0.1, 0.9);
  StateDict old;
  old.values["name"] = "Momentum";
  old.values["lr"] = "0.03";
  old.tensors.insert("steps", Tensor::of_ints({0}));
  opt.load_state_dict(old);
  CHECK(opt.lr() == 0.03);
  CHECK(opt.momentum() == 0.9);
}
