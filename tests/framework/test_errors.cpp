// Bad inputs throw minidl::Error with a message that names the op and what
// was wrong (both shapes, the dtype, the index).
#include <doctest/doctest.h>

#include "helpers.h"

using namespace minidl;

TEST_CASE("matmul with mismatched inner dimensions names both shapes") {
  CHECK_ERROR(matmul(Tensor::zeros({64, 400}), Tensor::zeros({120, 400})),
              "matmul: [64, 400] x [120, 400]: inner dimensions 400 and 120 differ");
  CHECK_ERROR(matmul(Tensor::zeros({2, 3, 4}), Tensor::zeros({2, 5, 6})),
              "matmul: [2, 3, 4] x [2, 5, 6]: inner dimensions 4 and 5 differ");
  CHECK_ERROR(matmul(Tensor::zeros({2, 3, 4}), Tensor::zeros({3, 4, 6})),
              "matmul: [2, 3, 4] x [3, 4, 6]: batch dims [2] and [3] do not broadcast");
  CHECK_ERROR(matmul(Tensor::zeros({2, 3, 4}), Tensor::zeros({5, 6})),
              "inner dimensions 4 and 5 differ");
  CHECK_ERROR(matmul(Tensor::zeros({4}), Tensor::zeros({3, 2})),
              "matmul: [4] x [3, 2]: inner dimensions 4 and 3 differ");
  CHECK_ERROR(matmul(Tensor::zeros({2, 2}), Tensor::zeros({2, 3, 2})),
              "matmul: [2, 2] x [2, 3, 2]: inner dimensions 2 and 3 differ");
}

TEST_CASE("linear with a mismatched weight or bias names the shapes") {
  CHECK_ERROR(linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 5}), Tensor()),
              "linear: input [2, 3] and weight [4, 5]");
  CHECK_ERROR(linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 3}), Tensor::zeros({3})),
              "linear: weight [4, 3] and bias [3]: expected bias [4]");
  CHECK_ERROR(linear(Tensor::zeros({2, 2, 3}), Tensor::zeros({4, 3}), Tensor()),
              "linear: expected a 2-D input, got shape [2, 2, 3]");
}

TEST_CASE("binary ops on shapes that do not broadcast name both shapes") {
  CHECK_ERROR(add(Tensor::zeros({2, 3}), Tensor::zeros({4})),
              "add: shapes [2, 3] and [4] cannot broadcast (dim 1: 3 vs 4)");
  CHECK_ERROR(Tensor::zeros({2, 3}) * Tensor::zeros({3, 2}), "mul: shapes [2, 3] and [3, 2]");
  CHECK_ERROR(Tensor::zeros({5}) - Tensor::zeros({2, 4}), "sub: shapes [5] and [2, 4]");
  CHECK_ERROR(Tensor::zeros({2, 1, 3}) / Tensor::zeros({2, 2}), "div: shapes [2, 1, 3] and [2, 2]");
}

TEST_CASE("at, set and item with a bad index throw") {
  Tensor t = Tensor::zeros({2, 3});
  CHECK_ERROR(t.at({0, 3}), "at: index 3 out of range for dim 1 of size 3 (shape [2, 3])");
  CHECK_ERROR(t.at({2, 0}), "at: index 2 out of range for dim 0 of size 2");
  CHECK_ERROR(t.at({-1, 0}), "at: index -1 out of range");
  CHECK_ERROR(t.at({1}), "at: 1 indices for a tensor of shape [2, 3]");
  CHECK_ERROR(t.set({0, 0, 0}, 1), "set: 3 indices for a tensor of shape [2, 3]");
  CHECK_ERROR(t.item(), "item: expected a tensor with one element, got shape [2, 3]");
}

TEST_CASE("gather with an out-of-range or badly typed label throws") {
  Tensor x = Tensor::zeros({2, 3});
  CHECK_ERROR(gather(x, Tensor::of_ints({0, 5})),
              "gather: label 5 at row 1 out of range [0, 3) for input [2, 3]");
  CHECK_ERROR(gather(x, Tensor::of_ints({-1, 0}, {}, kInt32)), "gather: label -1 at row 0");
  CHECK_ERROR(gather(x, Tensor::of({0, 1})), "gather: expected int32 or int64 labels, got float32");
  CHECK_ERROR(gather(x, Tensor::of_ints({0, 1, 2})),
              "gather: input [2, 3] and labels [3]: expected labels [2]");
}

TEST_CASE("integer tensors passed to float ops throw with the dtype") {
  Tensor i = Tensor::of_ints({1, 2, 3});
  Tensor f = Tensor::of({1, 2, 3});
  CHECK_ERROR(exp(i), "exp: expected float tensors, got int64");
  CHECK_ERROR(relu(i), "relu: expected float tensors, got int64");
  CHECK_ERROR(add(i, f), "add: expected float tensors, got int64 and float32");
  CHECK_ERROR(f * Tensor::of_ints({2}, {}, kInt32), "mul: expected float tensors, got float32 and int32");
  CHECK_ERROR(sum(i), "sum: expected a float tensor, got int64");
  CHECK_ERROR(max(i), "max: expected a float tensor, got int64");
  CHECK_ERROR(matmul(Tensor::zeros({2, 2}, kInt32), Tensor::zeros({2, 2})),
              "matmul: expected left operand of dtype float32, got int32 (shape [2, 2])");
  CHECK_ERROR(softmax(Tensor::zeros({2, 2}, kInt64)), "softmax: expected input of dtype float32, got int64");
  CHECK_ERROR(conv2d(Tensor::zeros({1, 1, 3, 3}), Tensor::zeros({1, 1, 2, 2}, kInt32), Tensor()),
              "conv2d: expected weight of dtype float32, got int32");
  CHECK_ERROR(gather(Tensor::zeros({2, 2}, kInt64), Tensor::of_ints({0, 1})),
              "gather: expected input of dtype float32, got int64");
}

TEST_CASE("data<T>() with the wrong element type throws") {
  Tensor i = Tensor::of_ints({1, 2, 3});
  CHECK_ERROR(i.data<float>(), "data<float32>: tensor [3] has dtype int64");
  CHECK_ERROR(Tensor::zeros({2}).data<int64_t>(), "data<int64>: tensor [2] has dtype float32");
  CHECK_ERROR(Tensor::zeros({2}, kFloat16).data<float>(), "has dtype float16");
  CHECK_ERROR(i.to_vector<int32_t>(), "data<int32>: tensor [3] has dtype int64");
}

TEST_CASE("mean, max and softmax of an empty tensor throw") {
  CHECK_ERROR(mean(Tensor::zeros({0})), "mean: empty tensor of shape [0]");
  CHECK_ERROR(max(Tensor::zeros({2, 0})), "max: empty tensor of shape [2, 0]");
  CHECK_ERROR(max(Tensor::zeros({2, 0}), {1}), "max: empty tensor");
  CHECK_ERROR(softmax(Tensor::zeros({0, 3})), "softmax: empty tensor of shape [0, 3]");
  CHECK_ERROR(log_softmax(Tensor::zeros({0})), "log_softmax: empty tensor");
  CHECK_ERROR(argmax(Tensor::zeros({0, 3})), "argmax: empty tensor");
}

TEST_CASE("reshape to an incompatible shape names both shapes") {
  Tensor x = Tensor::zeros({2, 3});
  CHECK_ERROR(reshape(x, {4, 2}), "reshape: [2, 3] (6 elements) -> [4, 2] (8 elements)");
  CHECK_ERROR(x.reshape({-1, -1}), "reshape: [2, 3] -> [-1, -1]: only one dim may be -1");
  CHECK_ERROR(x.reshape({4, -1}), "reshape: [2, 3] -> [4, -1]: cannot infer the -1 dim");
  CHECK_ERROR(x.reshape({-2, 3}), "reshape: [2, 3] -> [-2, 3]: negative dim");
  CHECK_ERROR(x.view({7}), "(6 elements) -> [7] (7 elements)");
  // sizes whose product overflows int64 are refused before they are multiplied
  // (UBSan's signed-integer-overflow caught the product before)
  const int64_t big = int64_t{1} << 62;
  CHECK_ERROR(x.reshape({big, big, -1}),
              "reshape: [2, 3] (6 elements) -> [4611686018427387904, 4611686018427387904, -1]: "
              "the sizes multiply past 2^63");
  CHECK_ERROR(Tensor::zeros({0}).reshape({big, big, 0}),
              "reshape: [0] (0 elements) -> [4611686018427387904, 4611686018427387904, 0]: "
              "the sizes multiply past 2^63");
  // a zero first keeps every partial product at 0, as in numel_of: allowed
  CHECK(Tensor::zeros({0}).reshape({0, big, big}).shape() == Shape{0, big, big});
}

TEST_CASE("conv2d with mismatched channels or sizes throws") {
  CHECK_ERROR(conv2d(Tensor::zeros({1, 3, 5, 5}), Tensor::zeros({2, 2, 3, 3}), Tensor()),
              "conv2d: input [1, 3, 5, 5] has 3 channels but weight [2, 2, 3, 3] expects 2");
  CHECK_ERROR(conv2d(Tensor::zeros({1, 1, 2, 2}), Tensor::zeros({1, 1, 3, 3}), Tensor()),
              "conv2d: input [1, 1, 2, 2] with padding 0 is smaller than kernel [1, 1, 3, 3]");
  CHECK_ERROR(conv2d(Tensor::zeros({1, 1, 4, 4}), Tensor::zeros({2, 1, 3, 3}), Tensor::zeros({3})),
              "conv2d: weight [2, 1, 3, 3] and bias [3]: expected bias [2]");
  CHECK_ERROR(conv2d(Tensor::zeros({1, 4, 4}), Tensor::zeros({2, 1, 3, 3}), Tensor()),
              "conv2d: expected a 4-D input, got shape [1, 4, 4]");
  CHECK_ERROR(conv2d(Tensor::zeros({1, 1, 4, 4}), Tensor::zeros({2, 1, 3}), Tensor()),
              "conv2d: expected a 4-D weight, got shape [2, 1, 3]");
  CHECK_ERROR(conv2d(Tensor::zeros({1, 1, 4, 4}), Tensor::zeros({1, 1, 3, 3}), Tensor(), {.stride = 0}),
              "conv2d: expected stride >= 1 and padding >= 0, got stride 0");
}

TEST_CASE("pooling with a window larger than the input throws") {
  CHECK_ERROR(max_pool2d(Tensor::zeros({1, 1, 2, 2}), 3),
              "max_pool2d: input [1, 1, 2, 2] is smaller than the 3x3 window");
  CHECK_ERROR(avg_pool2d(Tensor::zeros({1, 2, 4, 1}), 2),
              "avg_pool2d: input [1, 2, 4, 1] is smaller than the 2x2 window");
  CHECK_ERROR(max_pool2d(Tensor::zeros({1, 1, 4, 4}), 2, 1, 2), "padding 2");
  CHECK_ERROR(avg_pool2d(Tensor::zeros({4, 4}), 2), "avg_pool2d: expected a 4-D input, got shape [4, 4]");
  CHECK_ERROR(max_pool2d(Tensor::zeros({1, 1, 4, 4}), 0), "max_pool2d: expected kernel >= 1");
}

TEST_CASE("slice out of range names the rows and the shape") {
  Tensor x = Tensor::zeros({4, 3});
  CHECK_ERROR(slice(x, 2, 5), "slice: rows [2, 5) out of range for shape [4, 3]");
  CHECK_ERROR(x.slice(-1, 2), "slice: rows [-1, 2) out of range");
  CHECK_ERROR(x.slice(3, 1), "slice: rows [3, 1) out of range");
  CHECK_ERROR(slice(Tensor::full({}, 1), 0, 1), "slice: expected a tensor of at least 1 dim, got shape []");
}

TEST_CASE("concat of mismatched tensors throws") {
  CHECK_ERROR(concat({Tensor::zeros({2, 3}), Tensor::zeros({2, 4})}),
              "concat: shapes [2, 3] and [2, 4] differ outside dim 0");
  CHECK_ERROR(concat({Tensor::zeros({2, 3}), Tensor::zeros({3})}), "concat: shapes [2, 3] and [3]");
  CHECK_ERROR(concat({Tensor::zeros({2}), Tensor::zeros({2}, kInt64)}),
              "concat: dtypes float32 and int64 differ");
  CHECK_ERROR(concat({}), "concat: expected at least one tensor");
}

TEST_CASE("dims out of range and repeated dims throw") {
  Tensor x = Tensor::zeros({2, 3});
  CHECK_ERROR(sum(x, {2}), "sum: dim 2 out of range for a tensor of 2 dims");
  CHECK_ERROR(mean(x, {-3}), "mean: dim -3 out of range");
  CHECK_ERROR(max(x, {0, -2}), "max: a dim appears twice for shape [2, 3]");
  CHECK_ERROR(softmax(x, 2), "softmax: dim 2 out of range");
  CHECK_ERROR(transpose(x, 0, 5), "transpose: dim 5 out of range");
  CHECK_ERROR(flatten(x, 3), "flatten: dim 3 out of range");
  CHECK_ERROR(x.size(2), "size: dim 2 out of range");
  CHECK_ERROR(Tensor::full({}, 1).size(0), "size: dim 0 out of range for a tensor of 0 dims");
  CHECK_ERROR(argmax(Tensor::full({}, 1)), "out of range for a tensor of 0 dims");
}

TEST_CASE("factories and in-place helpers reject bad arguments") {
  CHECK_ERROR(Tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 2}),
              "from_vector: shape [2, 2] holds 4 elements but 3 values were given");
  CHECK_ERROR(Tensor::of({1, 2}, {3}), "from_vector: shape [3] holds 3 elements but 2 values");
  CHECK_ERROR(Tensor::zeros({2, -1}), "empty: negative dimension in shape [2, -1]");
  CHECK_ERROR(Tensor::randint(3, 3, {2}), "randint: empty range [3, 3)");
  CHECK_ERROR(Tensor::arange(0, 1, 0), "arange: step must be non-zero");
  CHECK_ERROR(Tensor::zeros({3}).copy_(Tensor::zeros({4})),
              "copy_: source [4] and destination [3] differ in size");
  CHECK_ERROR(Tensor::from_blob(nullptr, {2}, kFloat32), "from_blob: null data for shape [2]");
  CHECK_ERROR(dropout(Tensor::zeros({2}), 1.0), "dropout: expected 0 <= p < 1, got 1");
  CHECK_ERROR(dropout(Tensor::zeros({2}), -0.1), "dropout: expected 0 <= p < 1, got -0.1");
  CHECK_ERROR(set_num_threads(0), "set_num_threads: expected n >= 1, got 0");
  CHECK_ERROR(Tensor().shape(), "use of an undefined tensor");
}

TEST_CASE("every error is a std::runtime_error too") {
  CHECK_THROWS_AS(matmul(Tensor::zeros({2, 3}), Tensor::zeros({2, 3})), std::runtime_error);
  try {
    add(Tensor::zeros({2}), Tensor::zeros({3}));
    FAIL("add did not throw");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).rfind("add: ", 0) == 0);  // the message starts with the op
  }
}
