// CUDA against the CPU for issue 22's shape and index kernels: strided_copy
// (contiguous copies of views, cat, copy_ into a view, and the backwards),
// index_select/index_add, where (on strided views too), and matmul's
// broadcasting and its views read in place (ld and transpose flags).
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <cmath>

#include "cuda/check_cuda.h"

using namespace minidl;
using namespace minidl::cuda_suite;
using In = std::vector<Tensor>;

TEST_CASE("cuda: strided copies: permute, narrow, cat, stack, expand, forward and backward") {
  Tensor x = Tensor::randn({3, 4, 5});
  check_op("permute", [](const In& in) { return permute(in[0], {2, 0, 1}); }, {x});
  check_op("transpose", [](const In& in) { return transpose(in[0], 0, 2); }, {x});
  check_op("narrow, strided", [](const In& in) { return narrow(in[0], 2, 1, 3); }, {x});
  check_op("narrow view", [](const In& in) { return narrow(in[0], 0, 1, 2); }, {x});
  check_op("cat",
           [](const In& in) {
             return cat({in[0], in[1]}, 1);
           },
           {x, Tensor::randn({3, 2, 5})});
  check_op("stack", [](const In& in) { return stack({in[0], in[0] * 2.0}, -1); }, {x});
  check_op("expand",
           [](const In& in) {
             return expand(in[0], {2, 3, 4, 5});
           },
           {Tensor::randn({3, 1, 5})});
  // integers of every size move the same way
  Tensor ints = Tensor::randint(0, 100, {4, 3}, kInt32);
  CHECK(permute(ints.cuda(), {1, 0}).cpu().to_vector<int32_t>() ==
        permute(ints, {1, 0}).to_vector<int32_t>());
  Tensor halves = x.to(kFloat16);
  CHECK(cat({halves.cuda(), halves.cuda()}, 2).cpu().to_float_vector() ==
        cat({halves, halves}, 2).to_float_vector());
}

TEST_CASE("cuda: ops on strided views: contiguous, matmul in place, where, copy_ into a view") {
  Tensor x = Tensor::randn({4, 6}), y = Tensor::randn({6, 5});
  check_op("contiguous of a transpose", [](const In& in) { return in[0].t().contiguous(); }, {x});
  check_op("matmul of views",  // a transposed view and a column block, as the GEMM reads them
           [](const In& in) { return matmul(in[0].t(), in[1].narrow(1, 1, 3).narrow(0, 0, 4)); },
           {x, y});
  check_op("batched matmul of chunks",
           [](const In& in) {
             auto qk = in[0].chunk(2, -1);
             return matmul(qk[0], qk[1].transpose(1, 2));
           },
           {Tensor::randn({2, 3, 8})});
  check_op("where on views",
           [](const In& in) { return where(gt(in[0].t(), 0.0), in[0].t(), in[1].narrow(0, 0, 1)); },
           {x, Tensor::randn({2, 4})});
  check_op("softmax of a permute", [](const In& in) { return softmax(permute(in[0], {2, 0, 1}), 1); },
           {Tensor::randn({3, 4, 5})});
  Tensor on_gpu = Tensor::zeros({3, 4}).cuda(), on_cpu = Tensor::zeros({3, 4});
  Tensor src = Tensor::arange(6).reshape({3, 2});
  on_gpu.narrow(1, 1, 2).copy_(src.cuda());
  on_cpu.narrow(1, 1, 2).copy_(src);
  on_gpu.t().narrow(0, 0, 1).fill_(-1);
  on_cpu.t().narrow(0, 0, 1).fill_(-1);
  on_gpu.t().set({3, 2}, 9);
  on_cpu.t().set({3, 2}, 9);
  CHECK(on_gpu.t().at({3, 2}) == 9);
  CHECK(on_gpu.cpu().to_vector<float>() == on_cpu.to_vector<float>());
  CHECK(on_cpu.to_vector<float>() == std::vector<float>{-1, 0, 1, 0, -1, 2, 3, 0, -1, 4, 5, 9});
}

TEST_CASE("cuda: index_select and its index_add backward, where and masked_fill") {
  Tensor x = Tensor::randn({3, 5, 2});
  Tensor idx = Tensor::of_ints({4, 0, 4, 2});
  check_op("index_select", [&](const In& in) { return index_select(in[0], 1, in[1]); }, {x, idx});
  check_op("index_select int32", [&](const In& in) { return index_select(in[0], 0, in[1]); },
           {x, Tensor::of_ints({2, 2, 1}, {}, kInt32)});
  // an out-of-range device index reads nothing: NaN (all-ones bits) in its slice
  Tensor bad = index_select(Tensor::ones({2, 3}).cuda(), 1, Tensor::of_ints({0, 7}).cuda()).cpu();
  CHECK(bad.at({0, 0}) == 1);
  CHECK(std::isnan(bad.at({1, 1})));
  Tensor cond = Tensor::of_ints({1, 0, 0, 1, 1}, {5, 1});
  check_op("where", [](const In& in) { return where(in[2], in[0], in[1]); },
           {Tensor::randn({5, 3}), Tensor::randn({3}), cond});
  check_op("masked_fill", [](const In& in) { return masked_fill(in[0], in[1], -3); },
           {Tensor::randn({2, 5, 3}), Tensor::of_ints({0, 1, 1}, {3}, kInt32)});
}

TEST_CASE("cuda: matmul with broadcast batch dims and 1-D operands") {
  check_op("matmul broadcast", [](const In& in) { return matmul(in[0], in[1]); },
           {Tensor::randn({2, 1, 3, 4}), Tensor::randn({3, 4, 2})});
  check_op("matmul 1-D", [](const In& in) { return matmul(in[0], in[1]); },
           {Tensor::randn({4}), Tensor::randn({2, 4, 3})});
}

TEST_CASE("cuda: gather and scatter_add along a dim, pad, tril, one_hot") {
  Tensor x = Tensor::randn({3, 4, 2});
  Tensor idx = Tensor::randint(0, 4, {3, 5, 2});
  check_op("gather", [](const In& in) { return gather(in[0], 1, in[1]); }, {x, idx});
  check_op("scatter_add", [](const In& in) { return scatter_add(in[0], 1, in[1], in[2]); },
           {x, idx, Tensor::randn({3, 5, 2})});
  check_op("pad", [](const In& in) { return pad(in[0], {1, -1, 2, 0}, 0.5); }, {x});
  check_op("tril", [](const In& in) { return tril(in[0], 1); }, {x});
  // an out-of-range device index reads nothing: NaN
  Tensor bad = gather(Tensor::ones({2, 2}).cuda(), 1, Tensor::of_ints({0, 5}, {1, 2}).cuda()).cpu();
  CHECK(bad.at({0, 0}) == 1);
  CHECK(std::isnan(bad.at({0, 1})));
  Tensor ids = Tensor::of_ints({2, 0, 3});
  CHECK(one_hot(ids.cuda(), 5).cpu().to_vector<int64_t>() == one_hot(ids, 5).to_vector<int64_t>());
}
