// The counting device (counting_device.h), installed by one registry line,
// trains a small convolutional net through the ops' front ends as they are:
// its results are the CPU's bits, every kind of work reached its table, and
// its allocator got every byte back.
#include <doctest/doctest.h>

#include <minidl/minidl.h>

#include "counting_device/counting_device.h"

using namespace minidl;

namespace {

struct SmallNet : nn::Cell {
  nn::Conv2d conv{1, 4, 3, {.padding = 1}};
  nn::Dense fc{4 * 4 * 4, 10};
  SmallNet() { register_cells({{"conv", conv}, {"fc", fc}}); }
  Tensor forward(const Tensor& x) override {
    Tensor h = max_pool2d(relu(conv(x)), 2).flatten(1);  // [N, 4, 8, 8] -> [N, 4, 4, 4]
    return fc(h);
  }
};

// Three Momentum steps of SmallNet on `d` from seed 7's weights and data.
std::vector<std::vector<float>> train_on(Device d, std::vector<float>* losses) {
  manual_seed(7);
  SmallNet net;
  Tensor x = Tensor::randn({16, 1, 8, 8}), y = Tensor::randint(0, 10, {16}, kInt64);
  net.to(d);
  optim::Momentum opt(net.trainable_params(), /*lr=*/0.1, /*momentum=*/0.9);
  nn::CrossEntropyLoss loss_fn;
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    Tensor loss = loss_fn(net(x.to(d)), y.to(d));
    loss.backward();
    opt.step();
    losses->push_back(static_cast<float>(loss.item()));
  }
  std::vector<std::vector<float>> params;
  for (const Tensor& p : net.parameters()) params.push_back(p.cpu().to_vector<float>());
  return params;
}

}  // namespace

TEST_CASE("a new device: one table, one allocator, one registry line; the CPU's bits") {
  register_backend(Device::CUDA, &counting::backend());  // the one line
  CHECK(device_available(Device::CUDA));
  CHECK(present_devices() == std::vector<Device>{Device::CPU, Device::CUDA});
  CHECK(std::string(backend(Device::CUDA).name) == "counting");
  CHECK(graph_ops(Device::CUDA) == nullptr);  // graphs are optional, and absent here

  std::vector<float> cpu_losses, dev_losses;  // item() is double: exact for float32
  const auto before = counting::memory_counts();
  const auto cpu_params = train_on(Device::CPU, &cpu_losses);
  const auto dev_params = train_on(Device::CUDA, &dev_losses);
  const auto after = counting::memory_counts();

  CHECK(dev_losses == cpu_losses);  // bit for bit
  REQUIRE(dev_params.size() == cpu_params.size());
  for (size_t i = 0; i < cpu_params.size(); ++i) CHECK(dev_params[i] == cpu_params[i]);
  CHECK(cpu_losses.back() < cpu_losses.front());  // and it learns

  const auto calls = counting::kernel_calls();
  // every entry of Kernels is counted (a new entry must be added to table.cpp)
  CHECK(calls.size() == sizeof(Kernels) / sizeof(void (*)()));
  CHECK(calls.at("update") == 3);  // one call per step: every parameter in one
  CHECK(calls.at("cross_entropy_forward") == 3);
  CHECK(calls.at("cross_entropy_backward") == 3);
  CHECK(calls.at("conv2d_forward") == 3);
  CHECK(calls.at("conv2d_backward") == 3);
  CHECK(calls.at("max_pool_forward") == 3);
  CHECK(calls.at("linear") == 3);
  CHECK(calls.at("gemm") == 2 * 3);  // linear's backward: two products of ops a step
  CHECK(calls.at("dropout") == 0);

  CHECK(after.allocations > before.allocations);
  CHECK(after.to_device - before.to_device == 4 + 2 * 3);  // 4 parameters, x and y per step
  CHECK(after.to_host - before.to_host == 3 + 4);          // item() per step, parameters read back
  CHECK(after.live_bytes == before.live_bytes);            // every byte given back
  register_backend(Device::CUDA, nullptr);
  CHECK_FALSE(device_available(Device::CUDA));
}
