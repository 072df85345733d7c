// Issue 23's fused batch norm and LSTM cell kernels on CUDA against the CPU
// (check_cuda.h): batch norm in training (gradients through the batch
// statistics) and evaluation, with and without weight and bias, channels
// spanning several blocks' turns, and the running estimates each updates;
// the LSTM cell through each output and both.
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <vector>

#include "cuda/check_cuda.h"

using namespace minidl;
using namespace minidl::cuda_suite;

using In = std::vector<Tensor>;

TEST_CASE("cuda: batch_norm forward and backward, training and evaluation") {
  manual_seed(23);
  Tensor x = Tensor::randn({6, 5, 7, 9}) * 2.0 + 3.0, w = Tensor::randn({5}),
         b = Tensor::randn({5});
  Tensor rm = Tensor::randn({5}), rv = Tensor::rand({5}, 0.5, 2);
  for (bool training : {true, false}) {
    CAPTURE(training);
    Tensor rm_cpu = rm.clone(), rv_cpu = rv.clone(), rm_cuda = rm.cuda(), rv_cuda = rv.cuda();
    check_op("batch_norm",
             [&](const In& in) {
               const bool on_cuda = in[0].device() == kCuda;
               return batch_norm(in[0], in[1], in[2], on_cuda ? rm_cuda : rm_cpu,
                                 on_cuda ? rv_cuda : rv_cpu, training, 0.2, 1e-4);
             },
             {x, w, b});
    check_match(rm_cuda, rm_cpu, "running_mean");
    check_match(rv_cuda, rv_cpu, "running_var");
  }
  // [N, C] without affine or running estimates
  check_op("batch_norm [N, C]",
           [](const In& in) { return batch_norm(in[0], {}, {}, {}, {}, /*training=*/true); },
           {Tensor::randn({40, 3})});
  // S = 81, at least a quarter of a block: the kernels' threads run along S
  // (for_channel's other branch)
  check_op("batch_norm [N, C, 9, 9]",
           [](const In& in) { return batch_norm(in[0], in[1], in[2], {}, {}, /*training=*/true); },
           {Tensor::randn({4, 3, 9, 9}) * 2.0 + 1.0, Tensor::randn({3}), Tensor::randn({3})});
  // channels summed in parts of whole samples: 4 samples of 1024 a part (the
  // last part 2), and a sample of 4900 a part
  for (const Shape& shape : {Shape{10, 2, 32, 32}, Shape{3, 2, 70, 70}}) {
    CAPTURE(shape);
    check_op("batch_norm in parts",
             [](const In& in) { return batch_norm(in[0], in[1], in[2], {}, {}, true); },
             {Tensor::randn(shape) * 2.0 + 1.0, Tensor::randn({2}), Tensor::randn({2})});
  }
}

TEST_CASE("cuda: BatchNorm2d counts its batches on the device, in int64") {
  nn::BatchNorm2d bn(3);
  bn.to(kCuda);
  const int64_t start = (int64_t{1} << 25) + 1;  // past float32's exact integers
  bn.num_batches_tracked.fill_(static_cast<double>(start));
  Tensor x = Tensor::randn({2, 3, 4, 4}).cuda();
  for (int i = 0; i < 3; ++i) (void)bn(x);
  CHECK(bn.num_batches_tracked.device() == kCuda);
  CHECK(bn.num_batches_tracked.to_vector<int64_t>()[0] == start + 3);
}

TEST_CASE("cuda: the fused LSTM cell, each output and both") {
  manual_seed(24);
  const std::vector<Tensor> in{Tensor::randn({5, 12}), Tensor::randn({5, 3})};
  check_op("lstm_cell_pointwise h", [](const In& x) { return lstm_cell_pointwise(x[0], x[1]).first; },
           in);
  check_op("lstm_cell_pointwise c'",
           [](const In& x) { return lstm_cell_pointwise(x[0], x[1]).second; }, in);
  check_op("lstm_cell_pointwise h * c'",
           [](const In& x) {
             auto [h, c] = lstm_cell_pointwise(x[0], x[1]);
             return h * c;
           },
           in);
  // the whole layer, both directions, y and c_n both used
  for (bool reverse : {false, true}) {
    CAPTURE(reverse);
    check_op("lstm_layer",
             [reverse](const In& x) {
               LstmLayer l = lstm_layer(x[0], x[1], x[2], x[3], reverse);
               return cat({l.y.reshape({-1}), l.c_n.reshape({-1})}, 0);
             },
             {Tensor::randn({4, 3, 8}), Tensor::randn({8, 2}), Tensor::randn({3, 2}),
              Tensor::randn({3, 2})});
  }
  // a step in one launch each way (B 37: a block's 32 warps loop over rows; H 40:
  // lanes loop past 32), then B 33, H 256: past the fused kernel's size, cuBLAS
  // and the cell
  for (const auto& bh : {std::pair<int64_t, int64_t>{37, 40}, {33, 256}}) {
    const int64_t B = bh.first, H = bh.second;  // (clang: no lambda may capture a binding)
    CAPTURE(B);
    check_op("lstm_layer",
             [](const In& x) {
               LstmLayer l = lstm_layer(x[0], x[1], x[2], x[3], false);
               return cat({l.y.reshape({-1}), l.c_n.reshape({-1})}, 0);
             },
             {Tensor::randn({3, B, 4 * H}), Tensor::randn({4 * H, H}) * (1.0 / H),
              Tensor::randn({B, H}), Tensor::randn({B, H})});
  }
}

TEST_CASE("cuda: the fused GRU layer, both directions, y and h_n both used") {
  manual_seed(25);
  for (bool reverse : {false, true}) {
    CAPTURE(reverse);
    check_op("gru_layer",
             [reverse](const In& x) {
               GruLayer l = gru_layer(x[0], x[1], x[2], x[3], reverse);
               return cat({l.y.reshape({-1}), (l.h_n * l.h_n).reshape({-1})}, 0);
             },
             {Tensor::randn({4, 3, 6}), Tensor::randn({6, 2}), Tensor::randn({6}),
              Tensor::randn({3, 2})});
  }
  // a step in one launch each way (as the LSTM's case), then past its size (H 300)
  for (const auto& bh : {std::pair<int64_t, int64_t>{37, 40}, {33, 300}}) {
    const int64_t B = bh.first, H = bh.second;  // (clang: no lambda may capture a binding)
    CAPTURE(B);
    check_op("gru_layer",
             [](const In& x) {
               GruLayer l = gru_layer(x[0], x[1], x[2], x[3], true);
               return cat({l.y.reshape({-1}), (l.h_n * l.h_n).reshape({-1})}, 0);
             },
             {Tensor::randn({3, B, 3 * H}), Tensor::randn({3 * H, H}) * (1.0 / H),
              Tensor::randn({3 * H}), Tensor::randn({B, H})});
  }
}
