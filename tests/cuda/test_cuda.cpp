// The CUDA backend against the CPU: every op forward and backward (through
// autograd) from the same inputs, casts, device round trips, memory_stats,
// the optimizers and a small LeNet-shaped net (this file; newer ops in
// tests/cuda/test_cuda_*.cpp, the same program, helpers in check_cuda.h). float32 results must agree to
// a relative error of 1e-5 (TF32 off), float16 casts to 1e-3, the net's
// losses to 1e-4. Relative error: the largest |cuda - cpu| over the largest
// |cpu| of the tensor, so elements near zero are judged at the tensor's scale.
//
// Without a CUDA device (or in a build without CUDA) the suite prints one
// line, "cuda: no CUDA device, N cases skipped", and passes (ctest label cuda).
//
// Integer results are read with .cpu().to_vector<T>(): to_vector<T>() of a
// device tensor returns data from a host copy that is already freed
// (framework/tensor.cpp, Tensor::to_vector; to_float_vector is fine).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "cuda/check_cuda.h"
#include "framework/backend/backend.h"
#include "framework/cuda.h"
#ifdef MINIDL_CUDA_ON_CPU
#include "cuda_on_cpu/emulator.h"
#include "cuda_on_cpu/runtime.h"
#endif

using namespace minidl;

using namespace minidl::cuda_suite;

TEST_CASE("cuda: tensors move to the device and back unchanged, in every dtype") {
  manual_seed(1);
  Tensor f = Tensor::randn({3, 5});
  for (Tensor x : {f, f.to(kFloat16), Tensor::randint(-9, 9, {4, 2}, kInt32),
                   Tensor::randint(-1000, 1000, {7}, kInt64)}) {
    const std::string dtype = dtype_name(x.dtype());
    CAPTURE(dtype);
    Tensor d = x.cuda();
    CHECK(d.device() == kCuda);
    CHECK(d.dtype() == x.dtype());
    Tensor back = d.cpu();
    CHECK(back.device() == Device::CPU);
    CHECK(back.to_float_vector() == x.to_float_vector());
    CHECK(x.to(kCuda).to_float_vector() == x.to_float_vector());  // to_vector copies to the host
    Tensor y = Tensor::zeros(x.shape(), x.dtype(), kCuda);
    y.copy_(d);  // device to device
    CHECK(y.to_float_vector() == x.to_float_vector());
    y.fill_(3);
    CHECK(y.cpu().to_float_vector() == std::vector<float>(x.numel(), 3.f));
  }
  CHECK(Tensor::full({2, 2}, 2.5, kFloat32, kCuda).at({1, 1}) == 2.5);
  CHECK(Tensor::ones({3}, kInt64, kCuda).cpu().to_vector<int64_t>() ==
        std::vector<int64_t>{1, 1, 1});
  CHECK(f.cuda().sum().item() == doctest::Approx(f.sum().item()).epsilon(1e-5));
  CHECK_THROWS_AS(f.cuda().data<float>(), Error);
  // an empty tensor moves too
  CHECK(Tensor::empty({0, 3}, kFloat32, kCuda).cpu().shape() == Shape{0, 3});
}

TEST_CASE("cuda: memory_stats counts the device's live bytes and peak") {
  const MemoryStats before = memory_stats(kCuda);
  {
    Tensor t = Tensor::empty({1024}, kFloat32, kCuda);
    CHECK(memory_stats(kCuda).current_bytes == before.current_bytes + 4096);
    CHECK(memory_stats(kCuda).peak_bytes >= before.current_bytes + 4096);
  }
  CHECK(memory_stats(kCuda).current_bytes == before.current_bytes);
  reset_peak_memory(kCuda);
  CHECK(memory_stats(kCuda).peak_bytes == memory_stats(kCuda).current_bytes);
}

TEST_CASE("cuda: casts between float32, float16, int32 and int64") {
  manual_seed(2);
  Tensor x = Tensor::randn({6, 7}) * 100.0;
  check_match(x.cuda().to(kFloat16), x.to(kFloat16), "float32 -> float16", 1e-3);
  check_match(x.cuda().to(kFloat16).to(kFloat32), x.to(kFloat16).to(kFloat32), "round trip", 1e-3);
  Tensor ints = Tensor::randint(-50, 50, {9}, kInt64);
  for (DType to : {kFloat32, kFloat16, kInt32}) {
    const std::string dtype = dtype_name(to);
    CAPTURE(dtype);
    CHECK(ints.cuda().to(to).to_float_vector() == ints.to(to).to_float_vector());
  }
  CHECK(ints.to(kFloat32).cuda().to(kInt64).cpu().to_vector<int64_t>() ==
        ints.to_vector<int64_t>());
  // float to integer saturates on both devices alike: NaN -> 0, +-inf and out of range -> max/min
  const float inf = std::numeric_limits<float>::infinity();
  Tensor odd = Tensor::of({std::nanf(""), inf, -inf, 3e9f, -3e9f, 1e30f, -7.9f});
  CHECK(odd.cuda().to(kInt32).cpu().to_vector<int32_t>() == odd.to(kInt32).to_vector<int32_t>());
  CHECK(odd.cuda().to(kInt64).cpu().to_vector<int64_t>() == odd.to(kInt64).to_vector<int64_t>());
  CHECK(odd.to(kInt32).to_vector<int32_t>()[1] == std::numeric_limits<int32_t>::max());
  // gradients flow through float casts
  check_op(
      "cast", [](const std::vector<Tensor>& in) { return in[0].to(kFloat16).to(kFloat32); },
      {Tensor::randn({4, 4})}, 1e-3);
}

TEST_CASE("cuda: unary ops and dropout, forward and backward") {
  manual_seed(3);
  Tensor any = Tensor::randn({5, 33}), positive = uniform({5, 33}, 0.1, 4);
  check_op("neg", [](const std::vector<Tensor>& in) { return -in[0]; }, {any});
  check_op("exp", [](const std::vector<Tensor>& in) { return exp(in[0]); }, {any});
  check_op("log", [](const std::vector<Tensor>& in) { return log(in[0]); }, {positive});
  check_op("sqrt", [](const std::vector<Tensor>& in) { return sqrt(in[0]); }, {positive});
  check_op("relu", [](const std::vector<Tensor>& in) { return relu(in[0]); }, {any});
  check_op("sigmoid", [](const std::vector<Tensor>& in) { return sigmoid(in[0]); }, {any});
  check_op("tanh", [](const std::vector<Tensor>& in) { return tanh(in[0]); }, {any});
  check_op("pow 2.5", [](const std::vector<Tensor>& in) { return pow(in[0], 2.5); }, {positive});
  check_op("pow 3", [](const std::vector<Tensor>& in) { return pow(in[0], 3); }, {any});
  // the same seed gives the same Philox mask, so the results agree
  check_op("dropout",
           [](const std::vector<Tensor>& in) {
             manual_seed(30);
             return dropout(in[0], 0.3);
           },
           {any});
}

TEST_CASE("cuda: binary ops broadcast like on the CPU, forward and backward") {
  manual_seed(4);
  const std::vector<std::pair<Shape, Shape>> shapes{
      {{3, 4}, {3, 4}}, {{2, 3, 4}, {4}}, {{2, 1, 4}, {3, 1}},
      {{5, 1}, {1, 6}}, {{4}, {}},        {{2, 3, 1, 5}, {2, 1, 4, 1}}};
  for (const auto& pair : shapes) {
    const Shape& sa = pair.first;  // not a structured binding: CAPTURE's lambda
    const Shape& sb = pair.second; // cannot take one before C++20 in clang 14
    CAPTURE(sa);
    CAPTURE(sb);
    Tensor a = Tensor::randn(sa), b = uniform(sb, 0.5, 2);
    check_op("add", [](const std::vector<Tensor>& in) { return in[0] + in[1]; }, {a, b});
    check_op("sub", [](const std::vector<Tensor>& in) { return in[0] - in[1]; }, {a, b});
    check_op("mul", [](const std::vector<Tensor>& in) { return in[0] * in[1]; }, {a, b});
    check_op("div", [](const std::vector<Tensor>& in) { return in[0] / in[1]; }, {a, b});
  }
  Tensor x = uniform({3, 5}, 0.5, 2);
  check_op("scalars", [](const std::vector<Tensor>& in) { return 3.0 / in[0] + 2.0 * in[0] - 1.0; },
           {x});
}

TEST_CASE("cuda: sum, mean, max and argmax over dims") {
  manual_seed(5);
  Tensor x = Tensor::randn({4, 6, 5});
  const std::vector<std::vector<int64_t>> dims_list{{}, {0}, {1}, {2}, {0, 2}, {1, 2}};
  for (const auto& dims : dims_list) {
    for (bool keep : {false, true}) {
      CAPTURE(dims.size());
      CAPTURE(keep);
      check_op("sum", [&](const std::vector<Tensor>& in) { return sum(in[0], dims, keep); }, {x});
      check_op("mean", [&](const std::vector<Tensor>& in) { return mean(in[0], dims, keep); }, {x});
      check_op("max", [&](const std::vector<Tensor>& in) { return max(in[0], dims, keep); }, {x});
    }
  }
  Tensor rows = Tensor::randn({37, 45});  // distinct values almost surely: no ties
  CHECK(argmax(rows.cuda()).cpu().to_vector<int64_t>() == argmax(rows).to_vector<int64_t>());
  Tensor tied = Tensor::of({1, 3, 3, 0, 2, 2, 2, 1}, {2, 4});  // the first largest wins
  CHECK(argmax(tied.cuda()).cpu().to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  // long rows, cut into parts of 2048 (the last short), then one warp each
  check_op("sum of long rows", [](const std::vector<Tensor>& in) { return sum(in[0], {1}); },
           {Tensor::randn({3, 5000})});
  Tensor big = Tensor::randn({100, 130});
  check_op("sum of all", [](const std::vector<Tensor>& in) { return sum(in[0]); }, {big});
  check_op("max of all", [](const std::vector<Tensor>& in) { return max(in[0]); }, {big});
  // few columns over many rows: parts of 64 rows (the last short), then the parts
  Tensor tall = Tensor::randn({2, 300, 40});
  check_op("sum of tall columns", [](const std::vector<Tensor>& in) { return sum(in[0], {1}); },
           {tall});
  check_op("max of tall columns", [](const std::vector<Tensor>& in) { return max(in[0], {1}); },
           {tall});
  // ties split the gradient (values in {0, 1, 2}): a row to a warp, a column to a thread
  Tensor tied3 = cast(Tensor::randint(0, 3, {6, 40, 7}), kFloat32);
  for (int64_t d : {1, 2})
    check_op("max with ties", [d](const std::vector<Tensor>& in) { return max(in[0], {d}); },
             {tied3});
}

TEST_CASE("cuda: softmax and log_softmax along every dim, large logits included") {
  manual_seed(6);
  for (double scale : {1.0, 100.0}) {
    Tensor x = Tensor::randn({3, 4, 5}) * scale;
    for (int64_t dim : {0, 1, 2, -1}) {
      CAPTURE(scale);
      CAPTURE(dim);
      check_op("softmax", [dim](const std::vector<Tensor>& in) { return softmax(in[0], dim); },
               {x});
      check_op("log_softmax",
               [dim](const std::vector<Tensor>& in) { return log_softmax(in[0], dim); }, {x});
    }
  }
  // rows longer than a warp (the backward takes a warp per row)
  check_op("softmax of long rows", [](const std::vector<Tensor>& in) { return softmax(in[0], 1); },
           {Tensor::randn({5, 100})});
}

TEST_CASE("cuda: matmul, linear and transpose") {
  manual_seed(7);
  auto mm = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
  check_op("matmul", mm, {Tensor::randn({5, 7}), Tensor::randn({7, 3})});
  check_op("matmul batched", mm, {Tensor::randn({2, 5, 7}), Tensor::randn({2, 7, 3})});
  check_op("matmul batched x 2-D", mm, {Tensor::randn({2, 5, 7}), Tensor::randn({7, 3})});
  check_op("matmul K = 0", mm, {Tensor::randn({2, 0}), Tensor::randn({0, 3})});
  check_op("matmul large", mm, {Tensor::randn({70, 130}), Tensor::randn({130, 90})});
  check_op("linear", [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
           {Tensor::randn({6, 9}), Tensor::randn({4, 9}), Tensor::randn({4})});
  check_op("linear without bias",
           [](const std::vector<Tensor>& in) { return linear(in[0], in[1], Tensor()); },
           {Tensor::randn({40, 9}), Tensor::randn({4, 9})});
  Tensor x3 = Tensor::randn({3, 37, 41});
  check_op("transpose last two",
           [](const std::vector<Tensor>& in) { return transpose(in[0], 1, 2); }, {x3});
  check_op("transpose 0, 2 (strided copy)",
           [](const std::vector<Tensor>& in) { return transpose(in[0], 0, 2); }, {x3});
  check_op("t", [](const std::vector<Tensor>& in) { return in[0].t(); }, {Tensor::randn({65, 33})});
  check_op("transpose 0, 1 of 4 dims (the last two merge into one strided dim)",
           [](const std::vector<Tensor>& in) { return transpose(in[0], 0, 1); },
           {Tensor::randn({2, 3, 4, 5})});
  Tensor ints = Tensor::randint(0, 100, {3, 4, 5}, kInt64);
  CHECK(transpose(ints.cuda(), 0, 1).cpu().to_vector<int64_t>() ==
        transpose(ints, 0, 1).to_vector<int64_t>());
  Tensor halves = Tensor::randn({4, 6}).to(kFloat16);
  CHECK(transpose(halves.cuda(), 0, 1).to_float_vector() ==
        transpose(halves, 0, 1).to_float_vector());
}

TEST_CASE("cuda: TF32 is opt-in and stays close") {
  manual_seed(8);
  Tensor a = Tensor::randn({64, 256}), b = Tensor::randn({256, 32});
  CHECK_FALSE(cuda::allow_tf32());
  cuda::set_allow_tf32(true);
  check_match(matmul(a.cuda(), b.cuda()), matmul(a, b), "matmul with TF32", 1e-2);
  cuda::set_allow_tf32(false);
  check_match(matmul(a.cuda(), b.cuda()), matmul(a, b), "matmul without TF32");
}

// conv2d's forward, input and weight gradients against the CPU, on 5
// geometries: strides 1 and 2, padding 0 and 1, and a 1x1 kernel.
void check_conv2d() {
  manual_seed(9);
  Tensor x = Tensor::randn({2, 3, 7, 6}), w = Tensor::randn({4, 3, 3, 2}), b = Tensor::randn({4});
  for (int64_t stride : {1, 2}) {
    for (int64_t pad : {0, 1}) {
      CAPTURE(stride);
      CAPTURE(pad);
      const Conv2dArgs args{.stride = stride, .padding = pad};
      check_op("conv2d",
               [args](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], in[2], args); },
               {x, w, b});
      check_op(
          "conv2d without bias",
          [args](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], Tensor(), args); },
          {x, w});
    }
  }
  check_op("conv2d 1x1",  // im2col reads x as its own columns
           [](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], in[2]); },
           {Tensor::randn({3, 5, 4, 4}), Tensor::randn({6, 5, 1, 1}), Tensor::randn({6})});
}

size_t count_lines(const std::vector<std::string>& lines, const std::string& part) {
  return std::count_if(lines.begin(), lines.end(),
                       [&](const std::string& l) { return l.find(part) != std::string::npos; });
}

TEST_CASE("cuda: conv2d forward and backward by im2col + cuBLAS") {
  cuda::set_conv_algorithm(cuda::ConvAlgorithm::Im2col);
  check_conv2d();
  cuda::set_conv_algorithm(cuda::ConvAlgorithm::Auto);
}

TEST_CASE("cuda: conv2d by the direct kernels, with the weight gradient split into parts") {
  cuda::set_conv_algorithm(cuda::ConvAlgorithm::Direct);
  check_conv2d();
  // 12 * 28 * 28 output pixels make 2 parts of 6 samples (sum_parts_kernel)
  manual_seed(19);
  const std::vector<Tensor> lenet{Tensor::randn({12, 1, 28, 28}), Tensor::randn({6, 1, 5, 5}),
                                  Tensor::randn({6})};
  auto conv = [](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], in[2], {.padding = 2}); };
  check_op("conv2d, LeNet's first layer", conv, lenet);
  // the same bits twice: each output is summed in a fixed order
  std::vector<std::vector<float>> runs[2];
  for (auto& run : runs) {
    std::vector<Tensor> in;
    for (const Tensor& t : lenet) in.push_back(t.cuda().requires_grad_(true));
    Tensor y = conv(in);
    (y * y).sum().backward();
    for (const Tensor& t : in) run.push_back(t.grad().cpu().to_vector<float>());
  }
  CHECK(runs[0] == runs[1]);
  cuda::set_conv_algorithm(cuda::ConvAlgorithm::Auto);
}

TEST_CASE("cuda: conv2d's tiled direct kernel (stride 1, 16 or more channels) against the CPU") {
  cuda::set_conv_algorithm(cuda::ConvAlgorithm::Direct);
  manual_seed(23);
  // 18 and 33 output channels leave a partial group of 16, 17 and 20 input
  // channels a partial chunk; 4 * 16 * 16 output pixels are more than the
  // emulator's 3 blocks of 256 threads (the block's own loop). The input
  // gradient is the tiled forward of gy padded KH-1-pad: 2 for pad 0, 0 for
  // pad 2 of a 3x3 window, and it runs where x has 16 or more channels.
  struct Case {
    Shape x, w;
    Size2 padding;
  };
  for (const Case& c :
       {Case{{4, 20, 16, 16}, {18, 20, 3, 3}, 1}, Case{{2, 17, 9, 11}, {33, 17, 5, 5}, 2},
        Case{{2, 16, 8, 7}, {16, 16, 3, 5}, {0, 2}}, Case{{2, 18, 6, 6}, {20, 18, 3, 3}, 2}}) {
    CAPTURE(c.x);
    CAPTURE(c.w);
    const Conv2dArgs args{.padding = c.padding};
    // w a constant: its gradient is another kernel's, and slow on the emulator
    const Tensor x = Tensor::randn(c.x), w = Tensor::randn(c.w), b = Tensor::randn({c.w[0]});
    check_op("conv2d",
             [&](const std::vector<Tensor>& in) {
               return conv2d(in[0], w.to(in[0].device()), in[1], args);
             },
             {x, b});
    check_op("conv2d without bias",
             [&](const std::vector<Tensor>& in) {
               return conv2d(in[0], w.to(in[0].device()), Tensor(), args);
             },
             {x});
  }
  // the weight gradient of 3x3 windows with C * OC >= 256: 5 groups of 4
  // output channels (the last partial) and, with 8 * 32 * 32 output pixels,
  // two parts of the samples folded by sum_parts_kernel
  for (const Case& c :
       {Case{{3, 20, 10, 9}, {18, 20, 3, 3}, 1}, Case{{2, 18, 6, 6}, {20, 18, 3, 3}, 2},
        Case{{8, 16, 32, 32}, {16, 16, 3, 3}, 1}}) {
    CAPTURE(c.x);
    const Conv2dArgs args{.padding = c.padding};
    const Tensor x = Tensor::randn(c.x), w = Tensor::randn(c.w);
    check_op("conv2d's weight gradient",
             [&](const std::vector<Tensor>& in) {
               return conv2d(x.to(in[0].device()), in[0], Tensor(), args);
             },
             {w});
  }
  // the same bits twice: a fixed order within and across the parts (the
  // weight gradient does not depend on w)
  Tensor x = Tensor::randn({8, 16, 32, 32}).cuda(), gy = Tensor::randn({8, 16, 32, 32}).cuda();
  std::vector<float> runs[2];
  for (auto& run : runs) {
    Tensor w = Tensor::randn({16, 16, 3, 3}).cuda().requires_grad_(true);
    (conv2d(x, w, Tensor(), {.padding = 1}) * gy).sum().backward();
    run = w.grad().cpu().to_vector<float>();
  }
  CHECK(runs[0] == runs[1]);
  cuda::set_conv_algorithm(cuda::ConvAlgorithm::Auto);
}

TEST_CASE("cuda: conv2d by cuDNN, and Auto's choice per shape and pass") {
  cuda::set_conv_algorithm(cuda::ConvAlgorithm::Cudnn);
  try {
    (void)conv2d(Tensor::ones({1, 1, 3, 3}, kFloat32, kCuda),
                 Tensor::ones({1, 1, 2, 2}, kFloat32, kCuda), Tensor());
  } catch (const Error& e) {  // no libcudnn.so.9 here, or a build without cudnn.h
    cuda::set_conv_algorithm(cuda::ConvAlgorithm::Auto);
    MESSAGE("cuda: cuDNN unavailable, its conv2d case skipped: " << std::string(e.what()));
    return;
  }
  check_conv2d();
  cuda::set_conv_algorithm(cuda::ConvAlgorithm::Auto);
  check_conv2d();
  // 5 geometries x 3 passes, each planned once by cuDNN's heuristic and once
  // by timing (other cases may have made plans of their own before)
  const std::vector<std::string> lines = cuda::conv_choices();
  for (const std::string& l : lines) MESSAGE(l);
  CHECK(count_lines(lines, "(heuristic)") == 16);  // and the probe's forward
  CHECK(count_lines(lines, " us, cudnn ") >= 15);
  for (const char* pass : {"input gradient x[2,3,7,6]", "weight gradient x[2,3,7,6]"})
    CHECK(count_lines(lines, pass) == 8);  // 4 geometries, 2 settings
}

TEST_CASE("cuda: max and average pooling, overlapping and padded windows included") {
  manual_seed(10);
  Tensor x = Tensor::randn({2, 3, 8, 7});
  struct Window {
    int64_t k, stride, pad;
  };
  for (Window wd : {Window{2, 0, 0}, Window{3, 2, 1}, Window{3, 1, 1}, Window{2, 1, 0}}) {
    CAPTURE(wd.k);
    CAPTURE(wd.stride);
    CAPTURE(wd.pad);
    check_op(
        "max_pool2d",
        [wd](const std::vector<Tensor>& in) { return max_pool2d(in[0], wd.k, wd.stride, wd.pad); },
        {x});
    check_op(
        "avg_pool2d",
        [wd](const std::vector<Tensor>& in) { return avg_pool2d(in[0], wd.k, wd.stride, wd.pad); },
        {x});
  }
}

TEST_CASE("cuda: gather and cross_entropy with int32 and int64 labels") {
  manual_seed(11);
  Tensor logits = Tensor::randn({9, 7}) * 3.0;
  for (DType lt : {kInt32, kInt64}) {
    const std::string dtype = dtype_name(lt);
    CAPTURE(dtype);
    Tensor labels = Tensor::randint(0, 7, {9}, lt);
    check_op("gather", [](const std::vector<Tensor>& in) { return gather(in[0], in[1]); },
             {logits, labels});
    check_op("cross_entropy",
             [](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1]); },
             {logits, labels});
    check_op("cross_entropy of large logits",
             [](const std::vector<Tensor>& in) { return cross_entropy(in[0] * 1000.0, in[1]); },
             {logits, labels});
    // a class for each of 5 positions: logits [3, 7, 5], labels [3, 5]
    check_op("cross_entropy over positions",
             [](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1]); },
             {Tensor::randn({3, 7, 5}) * 3.0, Tensor::randint(0, 7, {3, 5}, lt)});
    // The front end checks labels only on the host: on the device a label
    // outside [0, C) gives NaN instead of a read out of bounds.
    Tensor bad = Tensor::of_ints({0, 7, 2}, {3}, lt).cuda();
    CHECK(std::isnan(cross_entropy(logits.slice(0, 3).cuda(), bad).item()));
    CHECK(std::isnan(gather(logits.slice(0, 3).cuda(), bad).at({1})));
  }
}

TEST_CASE("cuda: NaN propagates through relu, max and max-pooling as on the CPU") {
  Tensor x = Tensor::of({1, NAN, -2, 3, 0.5, -1, 4, 2}, {1, 2, 2, 2});
  check_match(relu(x.cuda()), relu(x), "relu");
  check_match(max(x.cuda(), {3}), max(x, {3}), "max");
  check_match(max_pool2d(x.cuda(), 2), max_pool2d(x, 2), "max_pool2d");
  CHECK(std::isnan(max_pool2d(x.cuda(), 2).at({0, 0, 0, 0})));
}

TEST_CASE("cuda: SGD, Momentum, Adam and AdamW take the same steps") {
  manual_seed(12);
  const std::vector<std::pair<const char*, MakeOptimizer>> optimizers{
      {"SGD", [](std::vector<Tensor> p) { return std::make_unique<optim::SGD>(p, 0.1, 0.01); }},
      {"Momentum",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::Momentum>(p, 0.1, 0.9,
                                                  optim::MomentumOptions{.dampening = 0.1});
       }},
      {"Momentum nesterov",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::Momentum>(
             p, 0.1, 0.9, optim::MomentumOptions{.nesterov = true, .weight_decay = 0.01});
       }},
      {"Adam",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::Adam>(p, 0.01, 0.9, 0.999, 1e-8, 0.01);
       }},
      {"AdamW", [](std::vector<Tensor> p) { return std::make_unique<optim::AdamW>(p, 0.01); }},
  };
  for (const auto& entry : optimizers) {  // no structured binding: CAPTURE's lambda (clang 14)
    const auto& name = entry.first;
    CAPTURE(name);
    check_optimizer_steps(entry.second);
  }
}

TEST_CASE("cuda: a LeNet-shaped net takes the same SGD steps as on the CPU") {
  // x [8, 1, 12, 12] -> conv 4@3x3 pad 1, relu, pool 2 -> conv 8@3x3, relu,
  // pool 2 -> [8, 32] -> linear 16, relu -> linear 10 -> cross-entropy
  manual_seed(13);
  const std::vector<Shape> shapes{{4, 1, 3, 3}, {4},  {8, 4, 3, 3}, {8},
                                  {16, 32},     {16}, {10, 16},     {10}};
  std::vector<Tensor> on_cpu, on_cuda;
  for (const Shape& s : shapes) {
    Tensor p = Tensor::randn(s) * 0.3;
    on_cpu.push_back(p.clone().requires_grad_());
    on_cuda.push_back(p.cuda().requires_grad_());
  }
  auto net = [](const std::vector<Tensor>& p, const Tensor& x) {
    Tensor h = max_pool2d(relu(conv2d(x, p[0], p[1], {.padding = 1})), 2);
    h = max_pool2d(relu(conv2d(h, p[2], p[3])), 2).flatten(1);
    return linear(relu(linear(h, p[4], p[5])), p[6], p[7]);
  };
  optim::SGD cpu_opt(on_cpu, 0.05), cuda_opt(on_cuda, 0.05);
  for (int step = 0; step < 5; ++step) {
    Tensor x = Tensor::randn({8, 1, 12, 12}), labels = Tensor::randint(0, 10, {8});
    Tensor cpu_loss = cross_entropy(net(on_cpu, x), labels);
    Tensor cuda_loss = cross_entropy(net(on_cuda, x.cuda()), labels.cuda());
    const double want = cpu_loss.item(), got = cuda_loss.item();
    MESSAGE("step " << step << ": loss cpu " << want << ", cuda " << got);
    CHECK(std::abs(got - want) <= 1e-4 * std::abs(want));
    cpu_opt.zero_grad();
    cuda_opt.zero_grad();
    cpu_loss.backward();
    cuda_loss.backward();
    cpu_opt.step();
    cuda_opt.step();
  }
  for (size_t i = 0; i < shapes.size(); ++i) check_match(on_cuda[i], on_cpu[i], "parameter", 1e-4);
}

TEST_CASE("cuda: dropout draws the CPU's Philox mask for the same seed, bit for bit") {
  // the kernels themselves, over lengths around a Philox block and beyond one
  // grid-stride pass (65536 blocks of 256 threads, one Philox block of four
  // elements each), at an offset
  const Kernels& cpu = kernels(Device::CPU);
  const Kernels& gpu = kernels(kCuda);
  for (int64_t n : std::vector<int64_t>{1, 3, 4, 5, 1001, 70001, (int64_t(1) << 26) + 4099}) {
    CAPTURE(n);
    Tensor x = Tensor::rand({n}, -2, 2), want = Tensor::empty({n});
    cpu.dropout(0xfeedbeefcafe1234ull, 99, 0.6f, n, x.data<float>(), want.data<float>());
    Tensor xd = x.cuda(), got = Tensor::empty({n}, kFloat32, kCuda);
    gpu.dropout(0xfeedbeefcafe1234ull, 99, 0.6f, n, xd.data_ptr<float>(), got.data_ptr<float>());
    CHECK(got.cpu().to_vector<float>() == want.to_vector<float>());
  }
  // through the op: the default generator's seed, forward and gradient
  for (double p : {0.1, 0.5, 0.9}) {
    CAPTURE(p);
    Tensor x = Tensor::randn({37, 29});
    Tensor xc = x.clone().requires_grad_(), xg = x.cuda().requires_grad_();
    manual_seed(40);
    Tensor want = dropout(xc, p);
    manual_seed(40);
    Tensor got = dropout(xg, p);
    CHECK(got.cpu().to_vector<float>() == want.to_vector<float>());
    Tensor r = Tensor::randn({37, 29});
    (want * r).sum().backward();
    (got * r.cuda()).sum().backward();
    CHECK(xg.grad().cpu().to_vector<float>() == xc.grad().to_vector<float>());
  }
  manual_seed(41);
  Tensor h = dropout(Tensor::ones({100}, kFloat16, kCuda), 0.5);
  manual_seed(41);
  CHECK(h.to_float_vector() == dropout(Tensor::ones({100}, kFloat16), 0.5).to_float_vector());
}

TEST_CASE("cuda: pinned host blocks copy to the device asynchronously and are not reused early") {
  const MemoryStats before = memory_stats(kCuda);
  Tensor p = Tensor::empty_pinned({1 << 20}, kFloat32, kCuda);
  CHECK(p.is_pinned());
  CHECK(p.device() == Device::CPU);
  CHECK(memory_stats(kCuda).current_bytes == before.current_bytes);  // host memory
  // Each round fills a pinned block, queues its copy behind a long GEMM, and
  // gives the block back at once; the next round's block of the same size
  // must not be the one a queued copy still reads.
  Tensor a = Tensor::randn({2048, 2048}).cuda();
  std::vector<Tensor> on_device;
  for (int round = 0; round < 8; ++round) {
    Tensor busy = matmul(a, a);  // keeps the stream busy while the copies queue
    Tensor block = Tensor::empty_pinned({1 << 20}, kFloat32, kCuda);
    std::fill_n(block.data<float>(), 1 << 20, static_cast<float>(round));
    on_device.push_back(block.to(kCuda));
  }
  for (int round = 0; round < 8; ++round) {
    CAPTURE(round);
    Tensor back = on_device[round].cpu();
    const std::vector<float> v = back.to_vector<float>();
    CHECK(std::count(v.begin(), v.end(), static_cast<float>(round)) == 1 << 20);
  }
  // batches gathered into pinned blocks reach the device unchanged
  data::Dataset set(Tensor::randn({50, 3, 4}), Tensor::randint(0, 10, {50}));
  const data::BatchDataset plain = set.shuffle(3).batch(8);
  std::vector<data::Batch> want;
  for (auto& b : plain.epoch(0)) want.push_back(b);
  size_t i = 0;
  for (auto& b : plain.pin_memory(kCuda).epoch(0)) {
    REQUIRE(i < want.size());
    CHECK(b.data.is_pinned());
    Tensor d = b.data.to(kCuda), l = b.labels.to(kCuda);
    b = {};  // the pinned blocks go back while the copies may still be queued
    CHECK(d.cpu().to_vector<float>() == want[i].data.to_vector<float>());
    CHECK(l.cpu().to_vector<int64_t>() == want[i].labels.to_vector<int64_t>());
    ++i;
  }
  CHECK(i == want.size());
}

TEST_CASE("cuda: grid-stride kernels cover a tensor larger than one grid") {
  // blocks_for caps a grid at 65536 blocks of 256 threads (2^24 threads), so
  // here the last 1000 elements fall to threads on their second turn
  manual_seed(12);
  const int64_t n = (int64_t{1} << 24) + 1000;
  Tensor x = Tensor::randn({n}), y = Tensor::randn({n});
  Tensor dx = x.cuda(), dy = y.cuda();
  check_match(relu(dx), relu(x), "relu");
  check_match(dx * dy, x * y, "mul");
  check_match(dx.to(kFloat16), x.to(kFloat16), "to float16", 1e-3);
  check_match(Tensor::full({n}, 0.5, kFloat32, kCuda), Tensor::full({n}, 0.5), "full");
}

// ---- main: skip everything, in one line, without a device ----

namespace {

// Counts the test cases a listing query returns, printing nothing.
struct CountReporter : doctest::IReporter {
  static inline unsigned cases = 0;
  explicit CountReporter(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData& q) override { cases = q.num_data; }
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_REPORTER("count", 1, CountReporter);

}  // namespace

int main(int argc, char** argv) {
#ifdef MINIDL_CUDA_ON_CPU
  testing::install_cuda_on_cpu();  // the backend's kernel code, run by the emulator
#endif
  if (device_available(kCuda)) {
    const int status = doctest::Context(argc, argv).run();
#ifdef MINIDL_CUDA_ON_CPU
    const gpu_emu::Counts c = gpu_emu::counts();
    std::printf("cuda_on_cpu: %lld kernel launches, %lld GPU threads emulated, %lld switches\n",
                static_cast<long long>(c.launches), static_cast<long long>(c.threads),
                static_cast<long long>(c.switches));
#endif
    return status;
  }
  const char* listing[] = {argv[0], "--list-test-cases", "--reporters=count"};
  doctest::Context(3, listing).run();
  std::printf("cuda: no CUDA device, %u cases skipped\n", CountReporter::cases);
  return 0;
}
