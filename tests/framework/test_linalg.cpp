// matmul (2-D, 3-D x 3-D, 3-D x 2-D, transpose flags), linear and transpose: hand-computed
// products, a naive reference, and gradient checks.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <limits>

#include "framework/backend/cpu/cpu.h"
#include "helpers.h"

using namespace minidl;
using minidl::testing::check_same;
using minidl::testing::check_values;
using Inputs = std::vector<Tensor>;

namespace {

// a [B, M, K] x b [B, K, N] (or [K, N]) by the triple loop, in double.
Tensor naive_bmm(const Tensor& a, const Tensor& b) {
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(-1);
  const bool shared = b.dim() == 2;
  std::vector<float> out(B * M * N);
  for (int64_t i = 0; i < B; ++i)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += a.at({i, m, k}) * (shared ? b.at({k, n}) : b.at({i, k, n}));
        out[(i * M + m) * N + n] = static_cast<float>(s);
      }
  return Tensor::from_vector(out, {B, M, N});
}

}  // namespace

TEST_CASE("matmul of 2-D matrices (hand-computed)") {
  Tensor a = Tensor::of({1, 2, 3, 4}, {2, 2}), b = Tensor::of({5, 6, 7, 8}, {2, 2});
  Tensor c = matmul(a, b);
  CHECK(c.shape() == Shape{2, 2});
  check_values(c, {19, 22, 43, 50});
  check_values(a.matmul(b), {19, 22, 43, 50});

  Tensor p = Tensor::of({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor q = Tensor::of({7, 8, 9, 10, 11, 12}, {3, 2});
  check_values(matmul(p, q), {58, 64, 139, 154});
  Tensor pq = matmul(q, p);  // [3, 2] x [2, 3]
  CHECK(pq.shape() == Shape{3, 3});
  check_values(pq, {39, 54, 69, 49, 68, 87, 59, 82, 105});
  // A row times a column is a [1, 1] dot product.
  check_values(matmul(Tensor::of({1, 2, 3}, {1, 3}), Tensor::of({4, 5, 6}, {3, 1})), {32});
}

TEST_CASE("batched matmul: 3-D x 3-D and 3-D x 2-D (hand-computed)") {
  Tensor a = Tensor::of({1, 2, 3, 4, 1, 0, 0, 2}, {2, 2, 2});
  Tensor b = Tensor::of({5, 6, 7, 8, 1, 1, 1, 1}, {2, 2, 2});
  Tensor c = matmul(a, b);
  CHECK(c.shape() == Shape{2, 2, 2});
  check_values(c, {19, 22, 43, 50, 1, 1, 2, 2});

  Tensor w = Tensor::of({5, 6, 7, 8}, {2, 2});
  Tensor d = matmul(a, w);
  CHECK(d.shape() == Shape{2, 2, 2});
  check_values(d, {19, 22, 43, 50, 5, 6, 14, 16});
}

TEST_CASE("matmul agrees with a naive triple loop") {
  manual_seed(41);
  Tensor a = Tensor::randn({3, 4, 5}), b = Tensor::randn({3, 5, 2}), w = Tensor::randn({5, 6});
  check_same(matmul(a, b), naive_bmm(a, b));
  check_same(matmul(a, w), naive_bmm(a, w));
  Tensor a2 = Tensor::randn({7, 5});
  check_same(matmul(a2, w), naive_bmm(a2.reshape({1, 7, 5}), w).reshape({7, 6}));
}

TEST_CASE("gradients of matmul: 2-D, 3-D x 3-D and 3-D x 2-D") {
  manual_seed(42);
  auto mm = [](const Inputs& in) { return matmul(in[0], in[1]); };
  CHECK_GRADCHECK(mm, {Tensor::randn({3, 4}), Tensor::randn({4, 2})});
  CHECK_GRADCHECK(mm, {Tensor::randn({2, 3, 4}), Tensor::randn({2, 4, 2})});
  CHECK_GRADCHECK(mm, {Tensor::randn({2, 3, 4}), Tensor::randn({4, 2})});
}

TEST_CASE("matmul with transpose flags: op(a) op(b) without a copy (hand-computed)") {
  Tensor a = Tensor::of({1, 2, 3, 4}, {2, 2}), b = Tensor::of({5, 6, 7, 8}, {2, 2});
  check_values(matmul(a, b, /*trans_a=*/false, /*trans_b=*/true), {17, 23, 39, 53});  // a b^T
  check_values(matmul(a, b, /*trans_a=*/true, /*trans_b=*/false), {26, 30, 38, 44});  // a^T b
  check_values(matmul(a, b, true, true), {23, 31, 34, 46});                           // a^T b^T
  // non-square: p [2, 3]^T x q [2, 2] -> [3, 2]; p [2, 3] x r [4, 3]^T -> [2, 4]
  Tensor p = Tensor::of({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor q = Tensor::of({1, 0, 0, 1}, {2, 2});
  check_values(matmul(p, q, true, false), {1, 4, 2, 5, 3, 6});
  Tensor r = Tensor::of({1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}, {4, 3});
  check_values(matmul(p, r, false, true), {1, 2, 3, 6, 4, 5, 6, 15});
  // every combination equals the product of explicitly transposed copies, 2-D and batched
  manual_seed(44);
  Tensor x = Tensor::randn({3, 5, 4}), y = Tensor::randn({3, 4, 6});
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      CAPTURE(ta);
      CAPTURE(tb);
      Tensor xa = ta ? transpose(x, 1, 2).clone() : x, yb = tb ? transpose(y, 1, 2).clone() : y;
      check_same(matmul(xa, yb, ta, tb), naive_bmm(x, y));
      Tensor x2 = x.slice(0, 1).reshape({5, 4}), y2 = y.slice(0, 1).reshape({4, 6});
      check_same(matmul(ta ? x2.t() : x2, tb ? y2.t() : y2, ta, tb), matmul(x2, y2));
    }
  Tensor w = Tensor::randn({6, 4});  // 3-D x 2-D^T: one GEMM over the stacked rows
  check_same(matmul(x, w, false, true), naive_bmm(x, w.t()));
}

TEST_CASE("matmul with transpose flags: errors name the transposed shapes") {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({2, 4});
  CHECK_THROWS_WITH_AS(matmul(a, b), "matmul: [2, 3] x [2, 4]: inner dimensions 3 and 2 differ",
                       Error);
  CHECK_NOTHROW(matmul(a, b, true, false));
  CHECK_THROWS_WITH_AS(matmul(a, b, false, true),
                       "matmul: [2, 3] x [2, 4]^T: inner dimensions 3 and 4 differ", Error);
  // a batched a^T against a 2-D b: torch.matmul(a.mT, b) (issue 22)
  CHECK(matmul(Tensor::zeros({2, 3, 4}), Tensor::zeros({3, 5}), true, false).shape() ==
        Shape{2, 4, 5});
}

TEST_CASE("gradients of matmul with transpose flags (products of products)") {
  manual_seed(45);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      CAPTURE(ta);
      CAPTURE(tb);
      auto mm = [ta, tb](const Inputs& in) { return matmul(in[0], in[1], ta, tb); };
      CHECK_GRADCHECK(mm, {Tensor::randn(ta ? Shape{4, 3} : Shape{3, 4}),
                           Tensor::randn(tb ? Shape{2, 4} : Shape{4, 2})});
      CHECK_GRADCHECK(mm, {Tensor::randn(ta ? Shape{2, 4, 3} : Shape{2, 3, 4}),
                           Tensor::randn(tb ? Shape{2, 2, 4} : Shape{2, 4, 2})});
    }
  auto mm_nt = [](const Inputs& in) { return matmul(in[0], in[1], false, true); };
  CHECK_GRADCHECK(mm_nt, {Tensor::randn({2, 3, 4}), Tensor::randn({5, 4})});
}

TEST_CASE("matmul gradient only for the operand that requires it") {
  Tensor a = Tensor::of({1, 2, 3, 4}, {2, 2}).requires_grad_();
  Tensor b = Tensor::of({5, 6, 7, 8}, {2, 2});
  matmul(a, b).sum().backward();
  // d sum(a b) / da = 1 b^T: row sums of b, per column of a.
  check_values(a.grad(), {11, 15, 11, 15});
  CHECK_FALSE(b.grad().defined());
}

TEST_CASE("linear computes x w^T + b (hand-computed)") {
  Tensor x = Tensor::of({1, 2, 3, 4}, {2, 2});
  Tensor w = Tensor::of({1, 0, 1, 1, 0, -1}, {3, 2});
  Tensor b = Tensor::of({0.5, -1, 2});
  Tensor y = linear(x, w, b);
  CHECK(y.shape() == Shape{2, 3});
  check_values(y, {1.5, 2, 0, 3.5, 6, -2});
  check_values(linear(x, w, Tensor()), {1, 3, -2, 3, 7, -4});
  // Same as matmul with the transposed weight.
  check_same(linear(x, w, b), matmul(x, w.t()) + b);
}

TEST_CASE("gradients of linear with and without bias") {
  manual_seed(43);
  Tensor x = Tensor::randn({4, 3}), w = Tensor::randn({2, 3}), b = Tensor::randn({2});
  CHECK_GRADCHECK([](const Inputs& in) { return linear(in[0], in[1], in[2]); }, {x, w, b});
  CHECK_GRADCHECK([](const Inputs& in) { return linear(in[0], in[1], Tensor()); }, {x, w});
}

TEST_CASE("linear's small-batch path (out^T = w x^T, transposed) agrees with the plain one") {
  // Batches of at most 32 with more outputs than rows take the transposed
  // product; 40 rows do not. Odd sizes cross the transpose's 16x16 tiles.
  manual_seed(44);
  Tensor x = Tensor::randn({40, 37}), w = Tensor::randn({50, 37}), b = Tensor::randn({50});
  Tensor all = linear(x, w, b);
  Tensor rows = linear(x.slice(0, 8), w, b);
  check_same(rows, all.slice(0, 8));
  check_same(linear(x.slice(0, 8), w, Tensor()),
             (all - b).slice(0, 8));
  Tensor xs = Tensor::randn({3, 4}), ws = Tensor::randn({5, 4}), bs = Tensor::randn({5});
  CHECK_GRADCHECK([](const Inputs& in) { return linear(in[0], in[1], in[2]); }, {xs, ws, bs});
}

// Products of 2^18 to 2^24 multiply-adds with 32 rows and more split C's
// rows between threads with AVX-512 (backend/cpu/blas.cpp; without it they
// run whole on oneDNN's threads): 37 and 120 rows leave a partial block of
// 16; the gradients reach the transposed operands.
TEST_CASE("matmul and its gradients at mid sizes, on 1 and 2 threads, against a naive loop") {
  manual_seed(69);
  const int before = num_threads();
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    set_num_threads(threads);
    for (auto mkn : {std::array<int64_t, 3>{37, 203, 91}, std::array<int64_t, 3>{120, 64, 400}}) {
      const int64_t m = mkn[0], k = mkn[1], n = mkn[2];  // (CAPTURE cannot take a structured binding in clang 14)
      CAPTURE(m);
      Tensor a = Tensor::randn({m, k}).requires_grad_(), b = Tensor::randn({k, n}).requires_grad_();
      Tensor y = matmul(a, b);
      check_same(y.reshape({1, m, n}), naive_bmm(a.detach().reshape({1, m, k}), b.detach()), 1e-4);
      Tensor g = Tensor::randn({m, n});
      y.backward(g);
      // ga = g b^T [m, k], gb = a^T g [k, n]
      check_same(a.grad().reshape({1, m, k}),
                 naive_bmm(g.reshape({1, m, n}), transpose(b.detach(), 0, 1)), 1e-4);
      check_same(b.grad().reshape({1, k, n}),
                 naive_bmm(transpose(a.detach(), 0, 1).reshape({1, k, m}), g), 1e-4);
    }
  }
  set_num_threads(before);
}

// The CPU's gemm runs oneDNN's sgemm from 2^20 multiply-adds (not with both
// operands transposed, nor x w^T under 256 rows on the library's threads) and
// OpenBLAS's otherwise (backend/cpu/blas.cpp). Each size below reaches one of
// gemm's thread paths on 2 threads: the calling thread alone (1.2M), C's rows
// split between threads (4.8M), the library's own threads (18M); without
// AVX-512, oneDNN's own threads at every size but with both transposed. Operands
// and C are sub-matrices (row strides past their widths); C starts as NaN for
// beta 0, which must not be read, and as values for beta 0.5. At 64 x 507 x 40
// B's rows lie 512 floats apart, at 509 x 64 x 40 A's: on one thread without
// AVX-512, gemm hands oneDNN a copy with wider rows of B untransposed or A
// transposed.
TEST_CASE(
    "gemm on oneDNN and on OpenBLAS: every transpose, sub-matrices and beta, on 1 and 2 "
    "threads, against a naive loop") {
  manual_seed(73);
  const int before = num_threads();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int threads : {1, 2})
    for (auto mnk : {std::array<int64_t, 3>{130, 90, 100}, std::array<int64_t, 3>{200, 150, 160},
                     std::array<int64_t, 3>{300, 260, 230}, std::array<int64_t, 3>{64, 507, 40},
                     std::array<int64_t, 3>{509, 64, 40}})
      for (int ops = 0; ops < 4; ++ops)
        for (float beta : {0.f, 0.5f}) {
          const int64_t m = mnk[0], n = mnk[1], k = mnk[2];
          const bool ta = ops & 1, tb = ops & 2;
          CAPTURE(threads);
          CAPTURE(m);
          CAPTURE(ops);
          CAPTURE(beta);
          set_num_threads(threads);
          const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 7;
          const std::vector<float> a = Tensor::randn({(ta ? k : m) * lda}).to_vector<float>();
          const std::vector<float> b = Tensor::randn({(tb ? n : k) * ldb}).to_vector<float>();
          const std::vector<float> c0 = Tensor::randn({m * ldc}).to_vector<float>();
          std::vector<float> want(m * n);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double s = 0;
              for (int64_t p = 0; p < k; ++p)
                s += double{a[ta ? p * lda + i : i * lda + p]} * b[tb ? j * ldb + p : p * ldb + j];
              want[i * n + j] = static_cast<float>(1.5 * s + beta * c0[i * ldc + j]);
            }
          for (bool dnnl : {true, false}) {
            CAPTURE(dnnl);
            cpu::set_dnnl_gemm(dnnl);
            std::vector<float> c = c0;
            if (beta == 0)
              for (int64_t i = 0; i < m; ++i) std::fill_n(c.data() + i * ldc, n, nan);
            cpu::gemm(ta, tb, m, n, k, 1.5f, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
            double worst = 0;       // NaN where a NaN came out
            bool untouched = true;  // C past its n columns
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < n; ++j) {
                const double d = std::abs(double{c[i * ldc + j]} - want[i * n + j]);
                if (std::isnan(d) || d > worst) worst = d;  // a NaN stays
              }
              for (int64_t j = n; j < ldc; ++j) untouched &= c[i * ldc + j] == c0[i * ldc + j];
            }
            CHECK(worst < 1e-3);  // sums of up to 230 products of N(0, 1) values, |C| ~ 20
            CHECK(untouched);
          }
        }
  cpu::set_dnnl_gemm(true);
  set_num_threads(before);
}

// A batch of small products (attention's per head: under 2^22
// multiply-adds each) goes side by side on two threads, each thread taking
// whole products on its own (backend/cpu/table.cpp): the values of one
// thread's, bit for bit, and of sums in float64, every gradient too. At
// 30K multiply-adds a product and at 336K (from 2^18 the pool's threads
// shared each product before).
TEST_CASE("batched matmul on two threads: whole products per thread, one thread's bits") {
  manual_seed(77);
  const int before = num_threads();
  for (auto bmkn : {std::array<int64_t, 4>{7, 33, 20, 45}, std::array<int64_t, 4>{4, 70, 60, 80}}) {
    const int64_t B = bmkn[0], m = bmkn[1], k = bmkn[2], n = bmkn[3];
    CAPTURE(m);
    Tensor a = Tensor::randn({B, m, k}).requires_grad_(), b = Tensor::randn({B, k, n});
    b.requires_grad_();
    Tensor g = Tensor::randn({B, m, n});
    std::vector<std::vector<float>> runs;
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      a.zero_grad();
      b.zero_grad();
      Tensor y = matmul(a, b);
      y.backward(g);
      CHECK(num_threads() == threads);
      runs.push_back(testing::all_values({y.detach(), a.grad(), b.grad()}));
      check_same(y.detach(), naive_bmm(a.detach(), b.detach()), 1e-4);
      check_same(a.grad(), naive_bmm(g, transpose(b.detach(), 1, 2)), 1e-4);
      check_same(b.grad(), naive_bmm(transpose(a.detach(), 1, 2), g), 1e-4);
    }
    CHECK(runs[1] == runs[0]);
  }
  set_num_threads(before);
}

TEST_CASE("transpose swaps two dims into a contiguous copy (hand-computed)") {
  Tensor x = Tensor::of({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor t = transpose(x, 0, 1);
  CHECK(t.shape() == Shape{3, 2});
  check_values(t, {1, 4, 2, 5, 3, 6});
  check_values(x.transpose(1, 0), {1, 4, 2, 5, 3, 6});
  check_values(transpose(x, -1, -2), {1, 4, 2, 5, 3, 6});
  check_values(transpose(x, 1, 1), {1, 2, 3, 4, 5, 6});

  Tensor y = Tensor::arange(24).reshape({2, 3, 4});  // y[i,j,k] = 12i + 4j + k
  Tensor z = transpose(y, 0, 2);
  CHECK(z.shape() == Shape{4, 3, 2});
  CHECK(z.at({3, 1, 0}) == 7);
  CHECK(z.at({1, 2, 1}) == 21);
  CHECK(z.at({0, 0, 1}) == 12);
  Tensor u = transpose(y, -1, -2);
  CHECK(u.shape() == Shape{2, 4, 3});
  CHECK(u.at({1, 3, 2}) == 23);
  CHECK(u.at({0, 1, 2}) == 9);

  Tensor ints = transpose(Tensor::of_ints({1, 2, 3, 4, 5, 6}, {3, 2}, kInt32), 0, 1);
  CHECK(ints.dtype() == kInt32);
  CHECK(ints.to_vector<int32_t>() == std::vector<int32_t>{1, 3, 5, 2, 4, 6});
}

TEST_CASE("transpose of a zero-size tensor with huge dims copies nothing") {
  // rows * cols and the strides of these dims overflow int64 (UBSan's
  // signed-integer-overflow caught both before); there is nothing to copy.
  const int64_t big = int64_t{1} << 40;
  for (DType dtype : {kFloat32, kInt64}) {
    Tensor x = Tensor::zeros({0, big, big}, dtype);
    Tensor last = transpose(x, 1, 2);  // the tiled path's dims
    CHECK(last.shape() == Shape{0, big, big});
    CHECK(last.dtype() == dtype);
    Tensor first = transpose(x, 0, 1);  // the strided copy's dims
    CHECK(first.shape() == Shape{big, 0, big});
    CHECK(first.numel() == 0);
  }
  Tensor w = Tensor::zeros({0, big, big}).requires_grad_();
  transpose(w, 0, 1).sum().backward();
  CHECK(w.grad().shape() == Shape{0, big, big});
}

TEST_CASE("transpose of the last two dims in float32 (tiled, per matrix) at odd sizes") {
  // y[b, i, j] = 777 b + 21 i + j; 37 x 21 crosses the 16 x 16 tiles.
  Tensor y = Tensor::arange(3 * 37 * 21).reshape({3, 37, 21});
  Tensor u = transpose(y, 1, 2);
  CHECK(u.shape() == Shape{3, 21, 37});
  std::vector<float> v = u.to_float_vector();
  size_t wrong = 0;
  for (int b = 0; b < 3; ++b)
    for (int j = 0; j < 21; ++j)
      for (int i = 0; i < 37; ++i) wrong += v[(b * 21 + j) * 37 + i] != 777 * b + 21 * i + j;
  CHECK(wrong == 0);
  CHECK(transpose(Tensor::zeros({2, 0, 3}), -1, -2).shape() == Shape{2, 3, 0});
  CHECK(transpose(Tensor::zeros({0, 5}), 0, 1).shape() == Shape{5, 0});
}

TEST_CASE("gradient of transpose") {
  manual_seed(44);
  CHECK_GRADCHECK([](const Inputs& in) { return transpose(in[0], 0, 1); }, {Tensor::randn({3, 4})});
  CHECK_GRADCHECK([](const Inputs& in) { return transpose(in[0], 0, 2); },
                  {Tensor::randn({2, 3, 4})});
  CHECK_GRADCHECK([](const Inputs& in) { return matmul(in[0], in[0].t()); }, {Tensor::randn({3, 2})});
}

// ---- issue 22: torch.matmul's broadcasting and 1-D operands ----
using minidl::testing::distinct;

TEST_CASE("matmul broadcasts batch dims and takes 1-D operands as torch.matmul") {
  Tensor a = Tensor::arange(12).reshape({2, 1, 2, 3});  // batch [2, 1]
  Tensor b = Tensor::arange(18).reshape({3, 3, 2});     // batch [3]
  Tensor c = matmul(a, b);
  CHECK(c.shape() == Shape{2, 3, 2, 2});
  // c[1, 2] = a[1, 0] x b[2]: [[6 7 8] [9 10 11]] x [[12 13] [14 15] [16 17]]
  CHECK(c.at({1, 2, 0, 0}) == 6 * 12 + 7 * 14 + 8 * 16);
  CHECK(c.at({1, 2, 1, 1}) == 9 * 13 + 10 * 15 + 11 * 17);
  Tensor v = Tensor::of({1, 2, 3});
  check_values(matmul(v, v), {14});
  CHECK(matmul(v, v).shape() == Shape{});
  Tensor m = Tensor::arange(6).reshape({3, 2});
  check_values(matmul(v, m), {16, 22});                        // [3] x [3, 2] -> [2]
  check_values(matmul(m, Tensor::of({1, -1})), {-1, -1, -1});  // [3, 2] x [2] -> [3]
  CHECK(matmul(v, b).shape() == Shape{3, 2});                  // [3] x [3, 3, 2] -> [3, 2]
  CHECK(matmul(Tensor::zeros({2, 3}), b).shape() == Shape{3, 2, 2});
  CHECK(matmul(Tensor::zeros({4, 2, 3}), Tensor::zeros({2, 3}), true, false).shape() ==
        Shape{4, 3, 3});  // a^T batched against a 2-D b
  CHECK_ERROR(matmul(Tensor::zeros({2, 2, 3}), Tensor::zeros({3, 3, 1})),
              "matmul: [2, 2, 3] x [3, 3, 1]: batch dims [2] and [3] do not broadcast");
  CHECK_ERROR(matmul(v, m, true), "a 1-D operand cannot be transposed");
  CHECK_GRADCHECK([](const Inputs& in) { return matmul(in[0], in[1]); },
                  {distinct({2, 1, 2, 3}), distinct({3, 3, 2}, 0.5)});
  CHECK_GRADCHECK([](const Inputs& in) { return matmul(in[0], in[1], true, true); },
                  {distinct({2, 1, 3, 2}), distinct({3, 2, 3}, 0.5)});
  CHECK_GRADCHECK([](const Inputs& in) { return matmul(in[0], in[1]); },
                  {distinct({3}), distinct({2, 3, 2}, 0.5)});
  CHECK_GRADCHECK([](const Inputs& in) { return matmul(in[0], in[1]); },
                  {distinct({2, 3}), distinct({3}, 0.5)});
}
