// Cell: registration, traversal and names, modes, state dicts and checkpoints.
#include <doctest/doctest.h>
#include <minidl/minidl.h>
#include <unistd.h>

#include <filesystem>

using namespace minidl;

namespace {

struct LeNet5 : nn::Cell {
  nn::Conv2d conv1{1, 6, 5, {.padding = 2}}, conv2{6, 16, 5};
  nn::Dense fc1{400, 120}, fc2{120, 84}, fc3{84, 10};
  LeNet5() {
    register_cells({{"conv1", conv1}, {"conv2", conv2}, {"fc1", fc1}, {"fc2", fc2}, {"fc3", fc3}});
  }
  Tensor forward(const Tensor& x) override {
    auto h = max_pool2d(relu(conv1(x)), 2);
    h = max_pool2d(relu(conv2(h)), 2).flatten(1);
    return fc3(relu(fc2(relu(fc1(h)))));
  }
};

struct Tiny : nn::Cell {
  nn::Dense fc{3, 2};
  nn::Dropout drop{0.5};
  Tensor scale;
  Tiny() {
    register_cells({{"fc", fc}, {"drop", drop}});
    scale = register_buffer("scale", Tensor::of({2.f}));
  }
  Tensor forward(const Tensor& x) override { return drop(fc(x)) * scale; }
};

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("minidl_test_cell_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("named_parameters of a LeNet are the registration paths, depth first") {
  LeNet5 net;
  std::vector<std::string> want{"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                                "fc1.weight",   "fc1.bias",   "fc2.weight",   "fc2.bias",
                                "fc3.weight",   "fc3.bias"};
  CHECK(net.named_parameters().keys() == want);
  CHECK(net.named_parameters().at("conv1.weight").shape() == Shape{6, 1, 5, 5});
  CHECK(net.named_parameters().at("fc1.weight").shape() == Shape{120, 400});
  // parameters() is the same list, and the tensors are the layers' own handles.
  auto params = net.parameters();
  REQUIRE(params.size() == 10);
  CHECK(params[0].same(net.conv1.weight));
  CHECK(params[9].same(net.fc3.bias));
  for (const auto& p : params) CHECK(p.requires_grad());
  // 156 + 2416 + 48120 + 10164 + 850 = 61706, LeNet-5's parameter count.
  int64_t total = 0;
  for (const auto& p : params) total += p.numel();
  CHECK(total == 61706);
  // A LeNet forward gives [N, 10].
  CHECK(net(Tensor::randn({2, 1, 28, 28})).shape() == Shape{2, 10});
}

TEST_CASE("trainable_params leaves out frozen parameters") {
  LeNet5 net;
  net.conv1.weight.requires_grad_(false);
  auto trainable = net.trainable_params();
  CHECK(trainable.size() == 9);
  CHECK(trainable[0].same(net.conv1.bias));
}

TEST_CASE("registration checks names and tensors") {
  nn::Cell c;
  c.register_parameter("w", Tensor::zeros({2}));
  CHECK(c.named_parameters().at("w").requires_grad());
  CHECK_THROWS_WITH_AS(c.register_parameter("w", Tensor::zeros({2})),
                       doctest::Contains("'w' is already registered"), Error);
  CHECK_THROWS_WITH_AS(c.register_parameter("a.b", Tensor::zeros({2})), doctest::Contains("no '.'"),
                       Error);
  CHECK_THROWS_WITH_AS(c.register_parameter("", Tensor::zeros({2})), doctest::Contains("non-empty"),
                       Error);
  CHECK_THROWS_WITH_AS(c.register_parameter("u", Tensor()), doctest::Contains("'u'"), Error);
  CHECK_THROWS_AS(c.register_parameter("i", Tensor::zeros({2}, kInt64)), Error);
  nn::Dense d{1, 1};
  CHECK_THROWS_WITH_AS(c.register_cell("w", d), doctest::Contains("already registered"), Error);
  CHECK_THROWS_AS(c.register_cell("self", c), Error);
}

TEST_CASE("owned children and buffers") {
  nn::Cell root;
  auto fc = root.register_cell("head", std::make_shared<nn::Dense>(2, 3));
  root.register_buffer("count", Tensor::zeros({1}, kInt64));
  CHECK(root.named_parameters().keys() == std::vector<std::string>{"head.weight", "head.bias"});
  CHECK(root.named_buffers().keys() == std::vector<std::string>{"count"});
  CHECK(root.state_dict().keys() == std::vector<std::string>{"head.weight", "head.bias", "count"});
  CHECK(root.parameters().size() == 2);  // buffers are not parameters
  CHECK(root.children().size() == 1);
  CHECK(root.children()[0].second == fc.get());
}

TEST_CASE("train and eval are recursive; Dropout follows the mode") {
  Tiny t;
  CHECK(t.is_training());
  CHECK(t.drop.is_training());
  t.eval();
  CHECK(!t.is_training());
  CHECK(!t.fc.is_training());
  CHECK(!t.drop.is_training());
  Tensor x = Tensor::randn({4, 3});
  // In eval, dropout is the identity: output = fc(x) * 2 exactly.
  auto y = t(x).to_float_vector(), ref = (t.fc(x) * 2.0).to_float_vector();
  CHECK(y == ref);
  t.train();
  CHECK(t.drop.is_training());
}

TEST_CASE("zero_grad drops every parameter gradient") {
  Tiny t;
  t.eval();
  t(Tensor::randn({2, 3})).sum().backward();
  CHECK(t.fc.weight.grad().defined());
  t.zero_grad();
  CHECK(!t.fc.weight.grad().defined());
  CHECK(!t.fc.bias.grad().defined());
}

TEST_CASE("forward with the wrong number of inputs is a clear error") {
  nn::Cell bare;
  CHECK_THROWS_WITH_AS(bare(Tensor::zeros({2})), doctest::Contains("minidl::nn::Cell: forward(x)"),
                       Error);
  nn::Dense d{2, 2};
  CHECK_THROWS_WITH_AS(d(Tensor::zeros({1, 2}), Tensor::zeros({1, 2})),
                       doctest::Contains("minidl::nn::Dense: forward(a, b)"), Error);
  CHECK(d.type_name() == "minidl::nn::Dense");
}

TEST_CASE("state_dict round trip through save/load gives identical values, in place") {
  manual_seed(1);
  LeNet5 a;
  manual_seed(2);
  LeNet5 b;
  CHECK(a.fc1.weight.to_float_vector() != b.fc1.weight.to_float_vector());
  Tensor b_conv1 = b.conv1.weight;  // what an optimizer would hold
  const std::string path = temp_path("lenet.safetensors");
  a.save(path);
  b.load(path);
  for (const auto& [name, t] : a.state_dict()) {
    const std::string label = name;  // clang 14 cannot capture a binding
    INFO(label);
    CHECK(b.state_dict().at(name).to_float_vector() == t.to_float_vector());
  }
  CHECK(b_conv1.same(b.conv1.weight));
  CHECK(b_conv1.to_float_vector() == a.conv1.weight.to_float_vector());
  CHECK(b_conv1.requires_grad());
  // The file holds exactly the state dict's names.
  CHECK(load_safetensors(path).keys() == a.state_dict().keys());
  // Same input, same output.
  Tensor x = Tensor::randn({1, 1, 28, 28});
  CHECK(a(x).to_float_vector() == b(x).to_float_vector());
  std::filesystem::remove(path);
}

TEST_CASE("load_state_dict reports missing, unexpected and mis-shaped names in one error") {
  nn::Cell net;
  nn::Dense fc1{3, 4}, fc2{4, 2};
  net.register_cells({{"fc1", fc1}, {"fc2", fc2}});
  TensorDict sd;
  sd.insert("fc1.weight", Tensor::ones({4, 3}));
  sd.insert("fc1.bias", Tensor::ones({5}));  // wrong shape
  sd.insert("fc2.weight", Tensor::ones({2, 4}));
  sd.insert("fc3.weight", Tensor::ones({2, 2}));  // unexpected; fc2.bias missing
  auto before = fc1.weight.to_float_vector();
  std::string msg = error_of([&] { net.load_state_dict(sd); });
  CHECK(msg.find("missing: fc2.bias") != std::string::npos);
  CHECK(msg.find("unexpected: fc3.weight") != std::string::npos);
  CHECK(msg.find("shape mismatch: fc1.bias (checkpoint [5], model [4])") != std::string::npos);
  CHECK(fc1.weight.to_float_vector() == before);  // nothing copied
  CHECK_THROWS_AS(net.load_state_dict(sd), Error);

  // strict = false tolerates missing and unexpected names, never a wrong shape.
  msg = error_of([&] { net.load_state_dict(sd, false); });
  CHECK(msg.find("missing") == std::string::npos);
  CHECK(msg.find("shape mismatch: fc1.bias") != std::string::npos);
  TensorDict partial{{"fc1.weight", Tensor::full({4, 3}, 0.5)}, {"extra", Tensor::ones({1})}};
  net.load_state_dict(partial, false);
  CHECK(fc1.weight.to_float_vector() == std::vector<float>(12, 0.5f));
}

TEST_CASE("load_state_dict's error is one line: 3 names a kind, and the prefix that explains them") {
  nn::Cell net;
  nn::Dense fc1{3, 4}, fc2{4, 2};
  net.register_cells({{"fc1", fc1}, {"fc2", fc2}});
  TensorDict checkpoint;  // what Model::save_checkpoint writes: the weights under "model."
  for (const auto& [name, t] : net.state_dict()) checkpoint.insert("model." + name, t);
  checkpoint.insert("optimizer.steps", Tensor::zeros({4}));
  CHECK(error_of([&] { net.load_state_dict(checkpoint); }) ==
        "minidl::nn::Cell::load_state_dict: the state dict does not fit; missing: fc1.weight, "
        "fc1.bias, "
        "fc2.weight and 1 more; unexpected: model.fc1.weight, model.fc1.bias, model.fc2.weight "
        "and 2 more; the file holds every missing entry under the prefix 'model.' (a training "
        "checkpoint: Model::load_checkpoint reads it, as the examples' --resume does)");
  TensorDict partial;  // not every missing entry under the prefix: no hint
  for (const auto& [name, t] : checkpoint)
    if (name != "model.fc2.bias") partial.insert(name, t);
  const std::string msg = error_of([&] { net.load_state_dict(partial); });
  CHECK(msg.find("prefix") == std::string::npos);
  CHECK(msg.find('\n') == std::string::npos);
}

TEST_CASE("load_state_dict converts dtypes while copying") {
  nn::Dense fc{2, 1};
  TensorDict sd{{"weight", Tensor::of({1, 2}, {1, 2}).to(kFloat16)}, {"bias", Tensor::of({3})}};
  fc.load_state_dict(sd);
  CHECK(fc.weight.dtype() == kFloat32);
  CHECK(fc.weight.to_float_vector() == std::vector<float>{1, 2});
  CHECK(fc.bias.item() == 3);
}
