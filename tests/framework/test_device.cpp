// The device seam: every op takes the device path (allocation, kernels,
// copies between devices, host reads) and must give the CPU's results;
// host-only access, mixed devices and host synchronisation are checked on
// the way. Without a GPU the device is emulated: the CPU's kernels over its
// own allocator, installed with register_backend, so the results must be the
// CPU's bits exactly, and the emulation's counters (host reads, pinned
// blocks, uploads) are checked too. With a real CUDA device present the same
// cases run on it, results within a relative 1e-5 of the CPU's (1e-4 after
// training; float16 1e-3), less the counters.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>

#include "framework/backend/backend.h"
#include "framework/cuda.h"
#include "framework/ops.h"
#include "framework/random.h"
#include "data/dataset.h"
#include "nn/dense.h"
#include "nn/loss.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "parallel/train/model.h"
#include "emulated_device.h"
#include "helpers.h"

using namespace minidl;

namespace {

constexpr Device kDev = Device::CUDA;

using testing::Emulated;
using testing::emulate;

#define SEAM_CASE(name) TEST_CASE("device seam: " name)
// A case that checks the emulation's own counters.
#define REQUIRE_EMULATED()                                                   \
  if (!emulate()) {                                                          \
    MESSAGE("a real CUDA device is present: this case checks the emulation"); \
    return;                                                                  \
  }
// A case for any device: `emulated` says which.
#define USE_DEVICE() [[maybe_unused]] const bool emulated = emulate()

// Same shape and dtype; on the emulated device the same bits, on a real one
// integers equal and floats within `tol` of the CPU's, relative to the
// largest |want| (float16: 1e-3).
void check_bits(const Tensor& got, const Tensor& want, double tol = 1e-5) {
  REQUIRE(got.defined() == want.defined());
  if (!got.defined()) return;
  CHECK(got.device() == kDev);
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  Tensor g = got.cpu();  // contiguous, as cpu() copies a view's elements
  if (emulate() || !is_floating(want.dtype())) {
    CHECK(std::memcmp(g.raw_data(), want.contiguous().raw_data(), want.nbytes()) == 0);
    return;
  }
  const std::vector<float> a = g.to_float_vector(), b = want.to_float_vector();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      CHECK(std::isnan(a[i]) == std::isnan(b[i]));
      continue;
    }
    diff = std::max(diff, std::abs(double(a[i]) - b[i]));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  const double limit = (want.dtype() == kFloat16 ? std::max(tol, 1e-3) : tol) * std::max(scale, 1e-30);
  INFO("max |cuda - cpu| " << diff << " at scale " << scale);
  CHECK(diff <= limit);
}
// Two figures: equal on the emulated device, within a relative 1e-4 on a real one.
void check_figure(double got, double want) {
  if (emulate()) CHECK(got == want);
  else CHECK(got == doctest::Approx(want).epsilon(1e-4));
}

// Runs f on CPU inputs and on copies of them on the device (leaves again,
// requiring grad where the CPU's do); returns for each the outputs and then
// the inputs' gradients after backward from the sum of the first output.
using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
std::vector<Tensor> run(const Fn& f, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> outs = f(inputs);
  if (outs[0].requires_grad()) outs[0].sum().backward();
  for (const Tensor& x : inputs)
    if (x.requires_grad()) outs.push_back(x.grad());
  return outs;
}
void check_op(const Fn& f, const std::vector<Tensor>& cpu_inputs) {
  std::vector<Tensor> dev_inputs;
  for (const Tensor& x : cpu_inputs) {
    Tensor d = x.detach().to(kDev);
    if (x.requires_grad()) d.requires_grad_();
    dev_inputs.push_back(d);
  }
  std::vector<Tensor> want = run(f, cpu_inputs), got = run(f, dev_inputs);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("output " << i);
    check_bits(got[i], want[i]);
  }
}

// in -> 10 -> 3, ReLU between
struct Net : nn::Cell {
  nn::Dense fc1, fc2;
  explicit Net(int64_t in) : fc1(in, 10), fc2(10, 3) { register_cells({{"fc1", fc1}, {"fc2", fc2}}); }
  Tensor forward(const Tensor& x) override { return fc2(relu(fc1(x))); }
};

Tensor leaf(const Shape& s, double offset = 0) {
  return testing::distinct(s, offset).requires_grad_();
}

}  // namespace

SEAM_CASE("factories allocate on the device and host reads copy back") {
  USE_DEVICE();
  const int64_t before = memory_stats(kDev).current_bytes;
  Tensor z = Tensor::zeros({2, 3}, kFloat32, kDev);
  Tensor f = Tensor::full({4}, 2.5, kInt64, kDev);
  CHECK(z.device() == kDev);
  CHECK(memory_stats(kDev).current_bytes - before == 2 * 3 * 4 + 4 * 8);
  CHECK(z.to_vector<float>() == std::vector<float>(6, 0.f));
  CHECK(f.to_vector<int64_t>() == std::vector<int64_t>(4, 2));
  CHECK(Tensor::ones({}, kFloat32, kDev).item() == 1.0);
  z.set({1, 2}, 7);
  CHECK(z.at({1, 2}) == 7.0);
  std::ostringstream os;
  os << z;
  CHECK(os.str() == "Tensor(shape=[2, 3], dtype=float32, device=cuda, [0, 0, 0, 0, 0, 7])");
}

SEAM_CASE("host pointers of a device tensor throw, naming the device") {
  USE_DEVICE();
  Tensor t = Tensor::zeros({2, 3}, kFloat32, kDev);
  CHECK_ERROR(t.data<float>(), "data<float32>: tensor [2, 3] is on cuda; copy it to the host");
  CHECK_ERROR(t.raw_data(), "raw_data: tensor [2, 3] is on cuda");
  CHECK(t.data_ptr<float>() != nullptr);
}

SEAM_CASE("an op on tensors of two devices throws naming both") {
  USE_DEVICE();
  Tensor a = Tensor::ones({2}), b = Tensor::ones({2}, kFloat32, kDev);
  CHECK_ERROR(a + b, "add: tensors on two devices: [2] on cpu and [2] on cuda");
  CHECK_ERROR(matmul(Tensor::ones({2, 2}), Tensor::ones({2, 2}, kFloat32, kDev)),
              "matmul: tensors on two devices: [2, 2] on cpu and [2, 2] on cuda");
  CHECK_ERROR(conv2d(Tensor::ones({1, 1, 3, 3}, kFloat32, kDev), Tensor::ones({1, 1, 2, 2}), {}),
              "conv2d: tensors on two devices: [1, 1, 3, 3] on cuda and [1, 1, 2, 2] on cpu");
  CHECK_ERROR(cross_entropy(Tensor::ones({2, 3}, kFloat32, kDev), Tensor::of_ints({0, 1})),
              "cross_entropy: tensors on two devices");
}

SEAM_CASE("to(device) copies both ways and carries the gradient back") {
  USE_DEVICE();
  Tensor x = Tensor::of({1, -2, 3}).requires_grad_();
  Tensor y = x.cuda();
  CHECK(y.device() == kDev);
  CHECK(y.to_vector<float>() == std::vector<float>{1, -2, 3});
  (y * y).sum().backward();
  REQUIRE(x.grad().device() == Device::CPU);
  CHECK(x.grad().to_vector<float>() == std::vector<float>{2, -4, 6});
  Tensor i = Tensor::of_ints({5, 6}).cuda();
  CHECK(i.cpu().to_vector<int64_t>() == std::vector<int64_t>{5, 6});
  Tensor h = Tensor::zeros({3});
  h.copy_(y);  // device -> host, through copy_
  CHECK(h.to_vector<float>() == std::vector<float>{1, -2, 3});
  Tensor d = Tensor::zeros({3}, kInt32, kDev);
  d.copy_(Tensor::of({4, 5, 6}));  // host float -> device int32
  CHECK(d.to_vector<int32_t>() == std::vector<int32_t>{4, 5, 6});
}

SEAM_CASE("elementwise ops and their gradients equal the CPU's bits") {
  USE_DEVICE();
  for (auto [name, f] : std::vector<std::pair<const char*, Fn>>{
           {"add broadcast", [](auto& v) { return std::vector{v[0] + v[1]}; }},
           {"sub", [](auto& v) { return std::vector{v[0] - v[1]}; }},
           {"mul", [](auto& v) { return std::vector{v[0] * v[1]}; }},
           {"div", [](auto& v) { return std::vector{v[0] / (v[1] + 10.0)}; }},
           {"exp log sqrt", [](auto& v) { return std::vector{exp(v[0]) + log(v[1] + 10.0).sqrt()}; }},
           {"pow", [](auto& v) { return std::vector{pow(v[0], 3.0)}; }},
           {"relu sigmoid tanh", [](auto& v) { return std::vector{relu(v[0]) * sigmoid(v[1]) + tanh(v[0])}; }},
           {"neg, scalar", [](auto& v) { return std::vector{2.0 - (-v[0]) * 3.0}; }},
           {"half", [](auto& v) { return std::vector{(v[0].to(kFloat16) * v[1].to(kFloat16)).to(kFloat32)}; }},
       }) {
    const std::string label = name;  // clang 14 cannot capture a binding
    INFO(label);
    check_op(f, {leaf({2, 3, 4}, 1.2), leaf({3, 1})});
  }
}

SEAM_CASE("reductions, softmax and losses equal the CPU's bits") {
  USE_DEVICE();
  check_op([](auto& v) { return std::vector{v[0].sum({0, 2}), v[0].mean({1}, true)}; },
           {leaf({3, 4, 5})});
  check_op([](auto& v) { return std::vector{v[0].max({1})}; }, {leaf({3, 4, 5})});
  check_op([](auto& v) { return std::vector{softmax(v[0], 1) * v[0]}; }, {leaf({3, 4, 2})});
  check_op([](auto& v) { return std::vector{log_softmax(v[0]) * v[0]}; }, {leaf({3, 5})});
  check_op([](auto& v) { return std::vector{argmax(v[0])}; }, {testing::distinct({4, 5})});
  Tensor labels = Tensor::of_ints({2, 0, 4});
  check_op([](auto& v) { return std::vector{cross_entropy(v[0], v[1])}; },
           {leaf({3, 5}), labels});
  check_op([](auto& v) { return std::vector{gather(v[0], v[1]) * 2.0}; },
           {leaf({3, 5}), labels.to(kInt32)});
}

SEAM_CASE("matmul, linear, transpose and shape ops equal the CPU's bits") {
  USE_DEVICE();
  check_op([](auto& v) { return std::vector{matmul(v[0], v[1])}; }, {leaf({3, 4}), leaf({4, 5})});
  check_op([](auto& v) { return std::vector{matmul(v[0], v[1])}; },
           {leaf({2, 3, 4}), leaf({2, 4, 5})});
  check_op([](auto& v) { return std::vector{linear(v[0], v[1], v[2])}; },
           {leaf({6, 4}), leaf({40, 4}), leaf({40})});  // the small-batch path
  check_op([](auto& v) { return std::vector{linear(v[0], v[1], v[2])}; },
           {leaf({64, 4}), leaf({3, 4}), leaf({3})});
  check_op([](auto& v) { return std::vector{v[0].transpose(0, 2), v[0].transpose(1, 2) * 1.0}; },
           {leaf({2, 3, 4})});
  check_op([](auto& v) { return std::vector{v[0].transpose(0, 1)}; },
           {Tensor::of_ints({1, 2, 3, 4, 5, 6}, {2, 3})});
  check_op([](auto& v) { return std::vector{concat({v[0], v[1] * 2.0}).slice(1, 4).reshape({-1})}; },
           {leaf({2, 3}), leaf({3, 3})});
  check_op([](auto& v) { return std::vector{v[0].flatten(1).clone()}; }, {leaf({2, 3, 2})});
}

SEAM_CASE("convolution and pooling equal the CPU's bits") {
  USE_DEVICE();
  check_op([](auto& v) { return std::vector{conv2d(v[0], v[1], v[2], {.stride = 1, .padding = 2})}; },
           {leaf({3, 2, 7, 7}), leaf({4, 2, 5, 5}), leaf({4})});
  check_op([](auto& v) { return std::vector{conv2d(v[0], v[1], Tensor(), {.stride = 2})}; },
           {leaf({2, 3, 6, 6}), leaf({2, 3, 3, 3})});
  check_op([](auto& v) { return std::vector{max_pool2d(v[0], 2)}; }, {leaf({2, 3, 6, 6})});
  check_op([](auto& v) { return std::vector{avg_pool2d(v[0], 3, 2, 1)}; }, {leaf({2, 3, 7, 7})});
  // batch 16: the CPU's fused kernel, which the emulated table inherits
  check_op([](auto& v) { return std::vector{conv2d_relu_max_pool2d(v[0], v[1], v[2], {.padding = 1}, 2)}; },
           {leaf({16, 2, 7, 7}), leaf({3, 2, 3, 3}), leaf({3})});
}

SEAM_CASE("dropout computes the CPU's Philox mask on the device, forward and backward") {
  USE_DEVICE();
  auto drop = [](double p) {
    return [p](auto& v) {
      manual_seed(11);
      Tensor a = dropout(v[0], p);
      return std::vector{a * 1.0, dropout(v[0], p)};  // the second call draws a new mask
    };
  };
  check_op(drop(0.3), {leaf({7, 13})});
  check_op(drop(0.9), {leaf({4097}, 200)});
  // float16 goes through float32 on the device too
  check_op([](auto& v) {
    manual_seed(12);
    return std::vector{dropout(v[0].to(kFloat16), 0.5).to(kFloat32)};
  }, {leaf({5, 6})});
}

SEAM_CASE("optimizers update device parameters with the CPU's bits, state on the device") {
  USE_DEVICE();
  auto train = [](Device d, auto make) {
    Tensor w = testing::distinct({70000}, 3000).to(d).requires_grad_();  // > 64k: chunked
    Tensor b = testing::distinct({5}).to(d).requires_grad_();
    auto opt = make(std::vector<Tensor>{w, b});
    for (int step = 0; step < 3; ++step) {
      opt->zero_grad();
      ((w * w).sum() * 1e-4 + (b * w.slice(0, 5)).sum()).backward();
      opt->step();
    }
    return std::vector<Tensor>{w.detach(), b.detach()};
  };
  using P = std::vector<Tensor>;
  std::vector<std::function<std::unique_ptr<optim::Optimizer>(P)>> makers{
      [](P p) { return std::make_unique<optim::SGD>(p, 0.1, 0.01); },
      [](P p) { return std::make_unique<optim::Momentum>(p, 0.1, 0.9, optim::MomentumOptions{.nesterov = true}); },
      [](P p) { return std::make_unique<optim::Adam>(p, 0.01); },
      [](P p) { return std::make_unique<optim::AdamW>(p, 0.01); },
  };
  for (size_t i = 0; i < makers.size(); ++i) {
    INFO("optimizer " << i);
    P want = train(Device::CPU, makers[i]), got = train(kDev, makers[i]);
    for (size_t j = 0; j < got.size(); ++j) check_bits(got[j], want[j], 1e-4);
  }
  Tensor p = Tensor::ones({3}, kFloat32, kDev).requires_grad_();
  optim::Adam adam({p}, 0.1);
  (p * 2.0).sum().backward();
  adam.step();
  CHECK(adam.exp_avg(0).device() == kDev);
  CHECK(adam.step_count(0) == 1);
}

SEAM_CASE("a training step reads nothing back to the host until item()") {
  REQUIRE_EMULATED();
  Tensor x = testing::distinct({4, 1, 12, 12}).to(kDev), labels = Tensor::of_ints({1, 0, 2, 1}).to(kDev);
  Tensor w1 = testing::distinct({3, 1, 5, 5}, 1).to(kDev).requires_grad_();
  Tensor w2 = (testing::distinct({3, 48}, 2) * 0.1).to(kDev).requires_grad_();
  optim::Momentum opt({w1, w2}, 0.01, 0.9);
  const int64_t reads = Emulated::to_host;
  for (int step = 0; step < 2; ++step) {
    opt.zero_grad();
    Tensor h = max_pool2d(relu(conv2d(x, w1, Tensor(), {})), 2).flatten(1);
    Tensor loss = cross_entropy(linear(h, w2, Tensor()), labels);
    loss.backward();
    opt.step();
  }
  CHECK(Emulated::to_host == reads);
  CHECK(std::isfinite(w2.sum().item()));
  CHECK(Emulated::to_host == reads + 1);
}

SEAM_CASE("Cell::to moves parameters in place; a net trains there with the CPU's bits") {
  USE_DEVICE();
  manual_seed(3);
  Net cpu_net(4);
  manual_seed(3);
  Net dev_net(4);
  Tensor held = dev_net.fc1.named_parameters().at("weight");
  dev_net.to(kDev);
  CHECK(held.device() == kDev);  // the same handle moved
  for (const auto& [name, p] : dev_net.named_parameters()) {
    const std::string label = name;  // clang 14 cannot capture a binding
    INFO(label);
    CHECK(p.device() == kDev);
    CHECK(p.requires_grad());
  }
  auto train = [](Net& net, Device d) {
    optim::Momentum opt(net.trainable_params(), 0.1, 0.9);
    Tensor x = testing::distinct({5, 4}, 0.7).to(d), y = Tensor::of_ints({0, 2, 1, 1, 0}).to(d);
    for (int step = 0; step < 3; ++step) {
      opt.zero_grad();
      cross_entropy(net(x), y).backward();
      opt.step();
    }
  };
  train(cpu_net, Device::CPU);
  train(dev_net, kDev);
  for (const auto& [name, p] : cpu_net.named_parameters()) {
    const std::string label = name;  // clang 14 cannot capture a binding
    INFO(label);
    check_bits(dev_net.named_parameters().at(name), p, 1e-4);
  }
  optim::Momentum late(cpu_net.trainable_params(), 0.1, 0.9);
  cross_entropy(cpu_net(testing::distinct({2, 4})), Tensor::of_ints({0, 1})).backward();
  late.step();
  cpu_net.to(kDev);
  cross_entropy(cpu_net(testing::distinct({2, 4}).to(kDev)), Tensor::of_ints({0, 1}).to(kDev))
      .backward();
  CHECK_ERROR(late.step(), "move the model before creating the optimizer");
}

SEAM_CASE("Model trains and evaluates a net on its parameters' device, as on the CPU") {
  USE_DEVICE();
  data::Dataset set(testing::distinct({20, 6}, 1), Tensor::of_ints(
      {0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1}));
  int64_t from_pinned = 0, from_pageable = 0;  // host-to-device copies in train and eval
  int64_t uploads = 0;                          // of which through upload (the copy stream)
  auto fit = [&](Net& net, Device d) {
    net.to(d);
    nn::CrossEntropyLoss loss;
    optim::Adam opt(net.trainable_params(), 0.01);
    Model model(net, loss, opt);
    const int64_t pinned_before = Emulated::from_pinned, pageable_before = Emulated::from_pageable;
    const int64_t uploads_before = Emulated::uploads;
    model.train(2, set.shuffle(4).batch(6));  // 4 batches an epoch, the last of 2
    auto figures = model.eval(set.batch(7));  // 3 batches
    uploads = Emulated::uploads - uploads_before;
    from_pinned = Emulated::from_pinned - pinned_before;
    from_pageable = Emulated::from_pageable - pageable_before;
    return figures;
  };
  manual_seed(8);
  Net cpu_net(6);
  manual_seed(8);
  Net dev_net(6);
  auto want = fit(cpu_net, Device::CPU);
  CHECK(from_pinned + from_pageable == 0);  // the CPU run copies nothing to the device
  auto got = fit(dev_net, kDev);
  check_figure(got["loss"], want["loss"]);
  check_figure(got["accuracy"], want["accuracy"]);
  for (const auto& [name, p] : cpu_net.named_parameters()) {
    const std::string label = name;  // clang 14 cannot capture a binding
    INFO(label);
    check_bits(dev_net.named_parameters().at(name), p, 1e-4);
  }
  if (!emulated) return;  // the rest counts what the emulation saw
  // Each batch was gathered into pinned blocks for the device: data and labels
  // of 2 x 4 training and 3 evaluation batches came from one, and every block
  // went back.
  CHECK(from_pinned == 2 * (2 * 4 + 3));
  CHECK(uploads == from_pinned);  // each on the device's copy stream (upload)
  CHECK(from_pageable == 0);
  std::lock_guard lock(Emulated::pinned_mu);
  CHECK(Emulated::pinned_live.empty());
  CHECK(Emulated::bad_frees == 0);
}

SEAM_CASE("batches gathered into pinned blocks for the device hold the same values") {
  REQUIRE_EMULATED();
  data::Dataset set(testing::distinct({10, 2, 3}, 1), Tensor::of_ints({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  const data::BatchDataset plain = set.shuffle(5).batch(4);
  CHECK(plain.pinned_for() == Device::CPU);
  for (int64_t depth : {0, 2}) {
    CAPTURE(depth);
    const data::BatchDataset pinned = plain.prefetch(depth).pin_memory(kDev);
    CHECK(pinned.pinned_for() == kDev);
    std::vector<data::Batch> want;
    for (auto& b : plain.epoch(1)) want.push_back(b);
    const int64_t allocs = Emulated::pinned_allocs;
    size_t i = 0;
    for (auto& b : pinned.epoch(1)) {
      REQUIRE(i < want.size());
      CHECK(b.data.is_pinned());
      CHECK(b.labels.is_pinned());
      CHECK(b.data.device() == Device::CPU);  // host memory: data<T>() works
      CHECK(!want[i].data.is_pinned());
      CHECK(b.data.to_float_vector() == want[i].data.to_float_vector());
      CHECK(b.labels.to_vector<int64_t>() == want[i].labels.to_vector<int64_t>());
      Tensor on_dev = b.data.to(kDev);
      check_bits(on_dev, want[i].data);
      ++i;
    }
    CHECK(i == want.size());
    CHECK(Emulated::pinned_allocs - allocs == 2 * static_cast<int64_t>(want.size()));
  }
  // an augmentation returns a new tensor: the batch is pinned after it
  const data::BatchDataset shifted = set.augment(data::RandomShift(1, 7, -1)).shuffle(5).batch(4);
  std::vector<data::Batch> want;
  for (auto& b : shifted.epoch(2)) want.push_back(b);
  size_t i = 0;
  const int64_t allocs = Emulated::pinned_allocs;
  for (auto& b : shifted.prefetch(2).pin_memory(kDev).epoch(2)) {
    REQUIRE(i < want.size());
    CHECK(b.data.is_pinned());
    CHECK(!want[i].data.is_pinned());
    CHECK(b.data.to_float_vector() == want[i++].data.to_float_vector());
  }
  CHECK(i == want.size());
  CHECK(Emulated::pinned_allocs - allocs == 2 * static_cast<int64_t>(want.size()));  // data once
  // pinning for the CPU is no pinning at all
  CHECK(!Tensor::empty_pinned({3}, kFloat32, Device::CPU).is_pinned());
  Tensor t = Tensor::empty_pinned({2, 3}, kInt64, kDev);
  CHECK(t.is_pinned());
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.dtype() == kInt64);
  std::lock_guard lock(Emulated::pinned_mu);
  CHECK(Emulated::in_pinned(t.raw_data()));
}

TEST_CASE("cuda::set_device: an index below device_count(), before the first CUDA tensor") {
  const int count = cuda::device_count();
  CHECK(cuda::is_available() == device_available(kDev));
  cuda::synchronize();  // the emulated device's queue is always empty; a GPU's is drained
  CHECK_THROWS_WITH_AS(cuda::set_device(-1), doctest::Contains("cuda::set_device"), Error);
  CHECK_THROWS_WITH_AS(cuda::set_device(count), doctest::Contains("cuda::set_device"), Error);
  if (count == 0) {  // emulated or absent: no GPU to choose
    CHECK_THROWS_WITH_AS(cuda::set_device(0), "cuda::set_device(0): no CUDA GPU here", Error);
    cuda::prefer_device(3);  // what parallel::init does on a host of several ranks: nothing here
    CHECK(cuda::device() == 0);
    return;
  }
  // A real GPU: the one in use stays accepted; another throws once it is fixed.
  Tensor t = Tensor::zeros({2}, kFloat32, kDev);
  CHECK_NOTHROW(cuda::set_device(cuda::device()));
  if (count > 1)
    CHECK_THROWS_WITH_AS(cuda::set_device((cuda::device() + 1) % count),
                         doctest::Contains("fixed at its first CUDA tensor"), Error);
}
