// The networks the examples and benchmarks train.
#pragma once
#include <minidl/minidl.h>

#include <memory>

namespace example {

using namespace minidl;

// LeNet-5: conv 6@5x5 (pad 2), pool, conv 16@5x5, pool, fc 400-120-84-10.
struct LeNet5 : nn::Cell {
  nn::Conv2d conv1{/*in=*/1, /*out=*/6, /*kernel=*/5, {.padding = 2}};
  nn::Conv2d conv2{6, 16, 5};
  nn::Dense fc1{400, 120}, fc2{120, 84}, fc3{84, 10};

  LeNet5() {
    register_cells({{"conv1", conv1}, {"conv2", conv2}, {"fc1", fc1}, {"fc2", fc2}, {"fc3", fc3}});
  }

  // x [N, 1, 28, 28] -> logits [N, 10]. relu_max_pool(h, 2) is
  // max_pool2d(relu(conv(h)), 2) in one fused op (the same numbers).
  Tensor forward(const Tensor& x) override {
    Tensor h = conv1.relu_max_pool(x, 2);
    h = conv2.relu_max_pool(h, 2).flatten(1);
    return fc3(relu(fc2(relu(fc1(h)))));
  }
};

// LeNet-5 with batch normalization after each convolution (whose bias the
// normalization's own bias replaces). sync: SyncBatchNorm, whose statistics
// are taken over the whole data-parallel batch; else BatchNorm2d.
struct LeNet5BN : nn::Cell {
  nn::Conv2d conv1{/*in=*/1, /*out=*/6, /*kernel=*/5, {.padding = 2, .has_bias = false}};
  nn::Conv2d conv2{6, 16, 5, {.has_bias = false}};
  std::shared_ptr<nn::BatchNorm> bn1, bn2;
  nn::Dense fc1{400, 120}, fc2{120, 84}, fc3{84, 10};

  explicit LeNet5BN(bool sync = false) {
    register_cells({{"conv1", conv1}});
    bn1 = register_cell("bn1", batch_norm(/*channels=*/6, sync));
    register_cells({{"conv2", conv2}});
    bn2 = register_cell("bn2", batch_norm(16, sync));
    register_cells({{"fc1", fc1}, {"fc2", fc2}, {"fc3", fc3}});
  }

  // x [N, 1, 28, 28] -> logits [N, 10]
  Tensor forward(const Tensor& x) override {
    Tensor h = max_pool2d(relu((*bn1)(conv1(x))), 2);
    h = max_pool2d(relu((*bn2)(conv2(h))), 2).flatten(1);
    return fc3(relu(fc2(relu(fc1(h)))));
  }

  static std::shared_ptr<nn::BatchNorm> batch_norm(int64_t channels, bool sync) {
    if (sync) return std::make_shared<parallel::SyncBatchNorm>(channels);
    return std::make_shared<nn::BatchNorm2d>(channels);
  }
};

// The GradAccumulation tutorial's network: 784-512-512-10 with ReLU.
struct MLP : nn::Cell {
  nn::Flatten flatten;
  nn::Dense fc1{784, 512}, fc2{512, 512}, fc3{512, 10};

  MLP() { register_cells({{"flatten", flatten}, {"fc1", fc1}, {"fc2", fc2}, {"fc3", fc3}}); }

  // x [N, 1, 28, 28] -> logits [N, 10]
  Tensor forward(const Tensor& x) override { return fc3(relu(fc2(relu(fc1(flatten(x)))))); }
};

}  // namespace example
