// Strided views: which ops alias their input (PyTorch's strides, hand-computed),
// writes through a view, reshape's view-or-copy rule, and every op family
// fed a view giving the same bits as fed the view's contiguous copy.
#include <doctest/doctest.h>

#include "helpers.h"

using namespace minidl;
using minidl::testing::check_values;
using minidl::testing::distinct;
using Inputs = std::vector<Tensor>;
using Strides = std::vector<int64_t>;

namespace {

bool shares(const Tensor& a, const Tensor& b) { return a.impl().storage == b.impl().storage; }

// got and want hold the same shape and bit-identical values
void check_bits(const Tensor& got, const Tensor& want) {
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.is_contiguous());  // an op's result
  CHECK(got.to_float_vector() == want.to_float_vector());
}

}  // namespace

TEST_CASE("transpose, permute, narrow, expand, squeeze and unsqueeze are views with PyTorch's strides") {
  Tensor x = Tensor::arange(24).reshape({2, 3, 4});
  CHECK(x.strides() == Strides{12, 4, 1});
  CHECK(x.is_contiguous());

  Tensor t = x.transpose(0, 2);  // torch: x.transpose(0, 2).stride() == (1, 4, 12)
  CHECK(shares(t, x));
  CHECK(t.strides() == Strides{1, 4, 12});
  CHECK_FALSE(t.is_contiguous());
  CHECK(t.at({3, 2, 1}) == x.at({1, 2, 3}));

  Tensor p = x.permute({1, 2, 0});
  CHECK(shares(p, x));
  CHECK(p.strides() == Strides{4, 1, 12});
  check_values(p.narrow(0, 1, 1), {4, 16, 5, 17, 6, 18, 7, 19});

  Tensor n = x.narrow(2, 1, 2);  // (12, 4, 1), starting at element 1
  CHECK(shares(n, x));
  CHECK(n.strides() == Strides{12, 4, 1});
  CHECK_FALSE(n.is_contiguous());
  check_values(n, {1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22});
  CHECK(x.narrow(0, 1, 1).is_contiguous());  // whole trailing blocks

  Tensor e = Tensor::of({1, 2, 3}, {3, 1}).expand({2, 3, 4});  // (0, 1, 0)
  CHECK(e.strides() == Strides{0, 1, 0});
  check_values(e.narrow(0, 1, 1).narrow(1, 2, 1), {3, 3, 3, 3});

  Tensor u = t.unsqueeze(1);
  CHECK(shares(u, x));
  CHECK(u.shape() == Shape{4, 1, 3, 2});
  CHECK(u.squeeze(1).strides() == Strides{1, 4, 12});
  auto parts = x.chunk(2, 2);  // two [2, 3, 2] views
  CHECK((shares(parts[0], x) && shares(parts[1], x)));
  check_values(parts[1], {2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23});
}

TEST_CASE("writes through a view land in its base, and the base's in the view") {
  Tensor x = Tensor::zeros({2, 3});
  Tensor col = x.narrow(1, 1, 1);  // column 1
  col.fill_(5);
  check_values(x, {0, 5, 0, 0, 5, 0});
  x.t().set({2, 1}, 7);  // x[1, 2]
  check_values(x, {0, 5, 0, 0, 5, 7});
  x.t().narrow(0, 0, 1).copy_(Tensor::of({1, 2}, {1, 2}));  // column 0
  check_values(x, {1, 5, 0, 2, 5, 7});
  Tensor view = x.permute({1, 0});
  x.fill_(3);
  check_values(view, {3, 3, 3, 3, 3, 3});
  x.copy_(Tensor::arange(6).reshape({3, 2}).t());  // from a view, in row-major order of src
  check_values(x, {0, 2, 4, 1, 3, 5});

  Tensor e = Tensor::zeros({3, 1}).expand({3, 4});
  CHECK_ERROR(e.fill_(1), "is an expanded view: several of its elements share one memory location");
  CHECK_ERROR(e.copy_(Tensor::ones({3, 4})), "[3, 4] with strides [1, 0] is an expanded view");
}

TEST_CASE("contiguous copies a view row-major; raw data of a view throws") {
  Tensor x = Tensor::arange(6).reshape({2, 3});
  Tensor c = x.t().contiguous();
  CHECK(!shares(c, x));
  CHECK(c.is_contiguous());
  CHECK(c.to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(x.contiguous().same(x));  // already contiguous: itself
  CHECK_ERROR(x.t().data<float>(), "data: tensor [3, 2] with strides [1, 3] is a non-contiguous "
                                   "view; call .contiguous() first");
  Tensor ints = Tensor::of_ints({1, 2, 3, 4, 5, 6}, {2, 3}).t();  // any dtype
  CHECK(ints.contiguous().to_vector<int64_t>() == std::vector<int64_t>{1, 4, 2, 5, 3, 6});
  CHECK(ints.to(kFloat32).to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
  CHECK_GRADCHECK([](const Inputs& in) { return in[0].t().contiguous() * 2.0; }, {distinct({2, 3})});
}

// The transposed copy runs in 16 x 16 tiles (full ones unrolled, edge ones
// not): shapes with and without edges, batched, element by element
TEST_CASE("contiguous of a transposed view: full and edge tiles, batched") {
  for (const Shape& s : {Shape{32, 48}, Shape{37, 50}, Shape{16, 3}, Shape{3, 2, 33, 17}}) {
    const int64_t nd = static_cast<int64_t>(s.size()), rows = s[nd - 2], cols = s[nd - 1];
    Tensor x = Tensor::arange(numel_of(s)).reshape(s);
    const std::vector<float> got = contiguous(x.transpose(nd - 2, nd - 1)).to_float_vector();
    REQUIRE(static_cast<int64_t>(got.size()) == numel_of(s));
    for (int64_t i = 0; i < numel_of(s); ++i) {
      const int64_t b = i / (rows * cols), c = i / rows % cols, r = i % rows;
      INFO("shape " << s << ", element " << i);
      CHECK(got[i] == static_cast<float>((b * rows + r) * cols + c));
    }
  }
}

// A permute whose merged dims are a transpose (NCHW <-> NHWC, with dims of
// size 1 between) goes by the same tiles: element by element, both ways,
// and the gradient back through it.
TEST_CASE("contiguous of NCHW seen as NHWC and back: batched transposes") {
  for (const Shape& s :
       {Shape{2, 19, 5, 7}, Shape{3, 16, 4, 4}, Shape{2, 1, 3, 33}, Shape{1, 20, 1, 17}}) {
    CAPTURE(s);
    const int64_t N = s[0], C = s[1], H = s[2], W = s[3];
    Tensor x = Tensor::arange(numel_of(s)).reshape(s);
    const auto nhwc = contiguous(x.permute({0, 2, 3, 1})).to_float_vector();
    int wrong = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          for (int64_t c = 0; c < C; ++c)
            wrong += nhwc[((n * H + h) * W + w) * C + c] !=
                     static_cast<float>(((n * C + c) * H + h) * W + w);
    CHECK(wrong == 0);
    Tensor back = Tensor::from_vector(nhwc, {N, H, W, C}).permute({0, 3, 1, 2});
    CHECK(contiguous(back).to_float_vector() == x.to_float_vector());
  }
  CHECK_GRADCHECK(
      [](const Inputs& in) {
        return contiguous(in[0].permute({0, 2, 3, 1})) * 2.0;
      },
      {distinct({2, 3, 2, 5})});
}

TEST_CASE("reshape of a view is a view where the strides allow, else a copy") {
  Tensor x = Tensor::arange(24).reshape({2, 3, 4});
  Tensor p = x.permute({1, 0, 2});  // [3, 2, 4] strides (4, 12, 1)
  Tensor split = p.reshape({3, 2, 2, 2});  // the last dim splits: a view
  CHECK(shares(split, x));
  CHECK(split.strides() == Strides{4, 12, 2, 1});
  Tensor merged = p.reshape({6, 4});  // dims 0 and 1 do not merge: a copy
  CHECK(!shares(merged, x));
  check_values(merged.narrow(0, 1, 1), {12, 13, 14, 15});
  check_values(p.flatten(), {0, 1, 2, 3, 12, 13, 14, 15, 4, 5, 6, 7, 16, 17, 18, 19, 8, 9, 10, 11,
                             20, 21, 22, 23});
  Tensor n = x.narrow(1, 0, 2);  // [2, 2, 4] strides (12, 4, 1): the last two merge
  CHECK(shares(n.reshape({2, 8}), x));
  CHECK(n.reshape({2, 8}).strides() == Strides{12, 1});
  CHECK(!shares(n.reshape({16}), x));
  CHECK_GRADCHECK([](const Inputs& in) { return in[0].permute({1, 0, 2}).reshape({6, 2}); },
                  {distinct({2, 3, 2})});
}

TEST_CASE("gradients reach the base through chains of views") {
  Tensor x = distinct({3, 4}).requires_grad_();
  Tensor y = x.t().narrow(0, 1, 2).unsqueeze(0).expand({2, 2, 3});  // [2, 2, 3]
  (y * Tensor::arange(12).reshape({2, 2, 3})).sum().backward();
  // y[b, i, j] = x[j, 1 + i]: x[j, 1 + i] gets sum_b w[b, i, j] = w[0, i, j] + w[1, i, j]
  check_values(x.grad(), {0, 6, 12, 0, 0, 8, 14, 0, 0, 10, 16, 0});
  CHECK(x.grad().is_contiguous());
  CHECK_GRADCHECK([](const Inputs& in) { return in[0].t().narrow(1, 1, 2).expand({2, 4, 2}); },
                  {distinct({3, 4})});
}

TEST_CASE("matmul reads transposed and column-narrowed views in place, bit for bit") {
  Tensor a = distinct({5, 4}, 1.0), b = distinct({5, 3}, 0.7);
  check_bits(matmul(a.t(), b), matmul(a, b, /*trans_a=*/true));
  check_bits(matmul(b.t(), a.t(), false, true), matmul(b, a, true, false));
  Tensor wide = distinct({5, 10}, 2.0);  // columns 2..5: rows of 10 elements
  check_bits(matmul(wide.narrow(1, 2, 4).t(), b), matmul(wide.narrow(1, 2, 4).contiguous(), b, true));
  Tensor q = distinct({2, 3, 8}, 1.2);  // [B, T, 2D]: q and k are the halves
  auto qk = q.chunk(2, -1);
  check_bits(matmul(qk[0], qk[1], false, true),
             matmul(qk[0].contiguous(), qk[1].contiguous(), false, true));
  check_bits(matmul(qk[0], qk[1].transpose(1, 2)),
             matmul(qk[0].contiguous(), qk[1].contiguous(), false, true));
  check_bits(matmul(q.permute({1, 0, 2}), distinct({8, 2})),  // [3, 2, 8]: a copy first
             matmul(q.permute({1, 0, 2}).contiguous(), distinct({8, 2})));
  CHECK_GRADCHECK([](const Inputs& in) { return matmul(in[0].t(), in[1].narrow(1, 1, 2)); },
                  {distinct({3, 2}), distinct({3, 4}, 0.5)});
}

TEST_CASE("every op family given a view gives the bits of the view's contiguous copy") {
  Tensor base = distinct({4, 6}, 1.1);
  const Tensor v = base.t();  // [6, 4]
  const Tensor c = v.contiguous();
  check_bits(v + Tensor::of({1, 2, 3, 4}), c + Tensor::of({1, 2, 3, 4}));
  check_bits(v * v.narrow(1, 0, 1), c * c.narrow(1, 0, 1).contiguous());
  check_bits(exp(v), exp(c));
  check_bits(gelu(v), gelu(c));
  check_bits(sum(v, {0}), sum(c, {0}));
  check_bits(max(v, {1}), max(c, {1}));
  check_bits(argmax(v, 0), argmax(c, 0));
  check_bits(softmax(v, 0), softmax(c, 0));
  check_bits(log_softmax(v, 1), log_softmax(c, 1));
  check_bits(lt(v, 0.0), lt(c, 0.0));
  check_bits(where(gt(v, 0.0), v, v * 2.0), where(gt(c, 0.0), c, c * 2.0));
  check_bits(where(gt(v, 0.0), v.narrow(0, 2, 1).expand({6, 4}), v),  // strides (0, 6)
             where(gt(c, 0.0), c.narrow(0, 2, 1), c));
  check_bits(v.to(kFloat16).to(kFloat32), c.to(kFloat16).to(kFloat32));
  check_bits(v.clone(), c);
  check_bits(cat({v, v.narrow(1, 1, 2)}, 1), cat({c, c.narrow(1, 1, 2).contiguous()}, 1));
  check_bits(pad(v, {1, 1}), pad(c, {1, 1}));
  const Tensor labels = Tensor::of_ints({3, 0, 1, 2, 0, 3});
  check_bits(cross_entropy(v, labels), cross_entropy(c, labels));
  check_bits(cross_entropy(v, labels, Tensor(), -100, "sum", 0.1),
             cross_entropy(c, labels, Tensor(), -100, "sum", 0.1));
  const Tensor ids = Tensor::of_ints({2, 0, 2, 1, 3, 5}, {2, 3}).t();  // an int64 view
  check_bits(index_select(v, 0, ids.narrow(0, 0, 1).squeeze(0)),  // {2, 1}, stride 3
             index_select(c, 0, Tensor::of_ints({2, 1})));
  check_bits(gather(v, 1, Tensor::of_ints({1, 0, 3, 2, 0, 1}, {6, 1})),
             gather(c, 1, Tensor::of_ints({1, 0, 3, 2, 0, 1}, {6, 1})));
  check_bits(linear(v, base.narrow(1, 0, 4), Tensor::of({1, 2, 3, 4})),
             linear(c, base.narrow(1, 0, 4).contiguous(), Tensor::of({1, 2, 3, 4})));

  Tensor img = distinct({2, 5, 5, 3}, 0.8);  // NHWC, seen as NCHW through permute
  const Tensor nchw = img.permute({0, 3, 1, 2}), dense = nchw.contiguous();
  Tensor w = distinct({4, 3, 3, 3}, 1.3);
  check_bits(conv2d(nchw, w, Tensor()), conv2d(dense, w, Tensor()));
  check_bits(max_pool2d(nchw, 2), max_pool2d(dense, 2));
  check_bits(avg_pool2d(nchw, 2), avg_pool2d(dense, 2));
  check_bits(batch_norm(nchw, Tensor(), Tensor(), Tensor(), Tensor(), true),
             batch_norm(dense, Tensor(), Tensor(), Tensor(), Tensor(), true));
  check_bits(conv_transpose2d(nchw, distinct({3, 2, 2, 2}), Tensor(), {.stride = 2}),
             conv_transpose2d(dense, distinct({3, 2, 2, 2}), Tensor(), {.stride = 2}));

  const Tensor g4 = distinct({8, 2}, 0.4).t(), cell = distinct({2, 2}, 0.2);
  auto [h, cn] = lstm_cell_pointwise(g4, cell);
  auto [h2, cn2] = lstm_cell_pointwise(g4.contiguous(), cell);
  check_bits(h, h2);
  check_bits(cn, cn2);
}

TEST_CASE("an op's backward through a view matches the copy's, gradients included") {
  auto grads = [](bool view) {
    Tensor w = distinct({4, 6}, 0.9).requires_grad_();
    Tensor x = view ? w.t() : w.t().contiguous();
    Tensor y = softmax(x, 0) * sigmoid(x.narrow(1, 1, 1));
    sum(matmul(y, x.narrow(1, 0, 2), true, false)).backward();  // [4, 6] x [6, 2]
    return w.grad();
  };
  check_bits(grads(true), grads(false));
}
