// AdaSum under 1, 2 and 4 ranks (and alone, where it must refuse clearly).
//
// Every rank rebuilds every rank's inputs from one seed, so each can compare
// its result with a reference that applies the pairwise tree
// ((g0 + g1) + (g2 + g3)) (+ meaning Adasum) directly, in double, to whole
// vectors. Differences are max|got - ref| / max|ref| per tensor, printed.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "framework/random.h"
#include "nets.h"
#include "optim/sgd.h"
#include "parallel/adasum.h"
#include "parallel/init.h"

using namespace minidl;
using namespace minidl::testing;
using parallel::AdaSum;
using parallel::AdaSumByGradWrapCell;

namespace {

using Vec = std::vector<double>;
using Inputs = std::vector<std::vector<Vec>>;  // [rank][tensor] -> values

// Adasum(a, b), straight from the formula; a zero-norm side takes coefficient 1.
Vec adasum_pair(const Vec& a, const Vec& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  const double ca = aa == 0 ? 1 : 1 - ab / (2 * aa), cb = bb == 0 ? 1 : 1 - ab / (2 * bb);
  Vec out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = ca * a[i] + cb * b[i];
  return out;
}

// The pairwise tree over ranks [lo, hi) for tensor t: Adasum(tree(lower half), tree(upper half)).
Vec tree(const Inputs& in, size_t t, size_t lo, size_t hi) {
  if (hi - lo == 1) return in[lo][t];
  const size_t mid = (lo + hi) / 2;
  return adasum_pair(tree(in, t, lo, mid), tree(in, t, mid, hi));
}

// Rounds x to the nearest value of dtype (so the reference sees the exact inputs).
double representable(double x, DType dtype) {
  const float f = static_cast<float>(x);
  return dtype == kFloat16 ? half_to_float(float_to_half(f)) : f;
}

Tensor to_tensor(const Vec& v, DType dtype, const Shape& shape = {}) {
  std::vector<float> f(v.begin(), v.end());
  Tensor t = Tensor::from_vector(f, shape.empty() ? Shape{int64_t(f.size())} : shape);
  return dtype == kFloat32 ? t : t.to(dtype);
}

Vec to_vec(const Tensor& t) {
  std::vector<float> f = t.to_float_vector();
  return Vec(f.begin(), f.end());
}

// max|got - ref| / max|ref| (0 when both are zero).
double rel_diff(const Vec& got, const Vec& ref) {
  REQUIRE(got.size() == ref.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, std::abs(got[i] - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return scale == 0 ? diff : diff / scale;
}

bool all_finite(const Vec& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

// Runs `op` on this rank's tensors of `in` (of `dtype`) and returns the worst
// relative difference from the tree; checks dtypes, shapes and finiteness.
double run_against_tree(AdaSum& op, const Inputs& in, DType dtype) {
  std::vector<Tensor> mine;
  for (const Vec& v : in[R()]) mine.push_back(to_tensor(v, dtype));
  std::vector<Tensor> got = op(mine);
  REQUIRE(got.size() == mine.size());
  double worst = 0;
  for (size_t t = 0; t < got.size(); ++t) {
    CHECK(got[t].dtype() == dtype);
    CHECK(got[t].shape() == mine[t].shape());
    Vec g = to_vec(got[t]);
    CHECK(all_finite(g));
    worst = std::max(worst, rel_diff(g, tree(in, t, 0, in.size())));
  }
  return worst;
}

// Inputs for `ranks` ranks: tensor t has lengths[t] elements, rank r's values
// from gen(r, t, i), rounded to dtype.
template <class Gen>
Inputs make_inputs(int ranks, const std::vector<size_t>& lengths, DType dtype, Gen gen) {
  Inputs in(ranks, std::vector<Vec>(lengths.size()));
  for (int r = 0; r < ranks; ++r)
    for (size_t t = 0; t < lengths.size(); ++t)
      for (size_t i = 0; i < lengths[t]; ++i)
        in[r][t].push_back(representable(gen(r, t, i), dtype));
  return in;
}

// A few float32 roundings per level of the tree.
double tolerance() { return 4 * FLT_EPSILON * std::max(1.0, std::log2(double(N()))); }
constexpr double kHalfEpsilon = 1.0 / 1024;
}  // namespace

TEST_CASE("errors at construction: a world of one, a rank count not a power of two, a non-member") {
  if (N() == 1) {
    CHECK_THROWS_WITH_AS(AdaSum(), doctest::Contains("AdaSum: needs a distributed job, but the group has 1 rank"),
                         Error);
    optim::SGD sgd({Tensor::zeros({2}).requires_grad_()}, /*lr=*/0.1);
    CHECK_THROWS_WITH_AS(AdaSumByGradWrapCell{sgd}, doctest::Contains("needs a distributed job"),
                         Error);
    std::vector<Tensor> grads{Tensor::ones({3})};
    CHECK_THROWS_AS(parallel::adasum_allreduce(grads, parallel::world()), Error);
    return;
  }
  CHECK_NOTHROW(AdaSum());
  // A group of all ranks but the last: 1 rank on 2, 3 ranks on 4.
  std::vector<int> ranks;
  for (int r = 0; r + 1 < N(); ++r) ranks.push_back(r);
  auto group = parallel::new_group(ranks);
  if (R() == N() - 1)
    CHECK_THROWS_WITH_AS(AdaSum{group}, doctest::Contains("not a member of the group"), Error);
  else if (N() == 2)
    CHECK_THROWS_WITH_AS(AdaSum{group}, doctest::Contains("the group has 1 rank"), Error);
  else
    CHECK_THROWS_WITH_AS(AdaSum{group},
                         doctest::Contains(cat("must be a power of two (2, 4, 8, ...), got ",
                                               N() - 1).c_str()),
                         Error);
}

TEST_CASE("orthogonal inputs give the sum") {
  if (N() == 1) return;
  // Sylvester's Hadamard matrix H [n, n] (entries +-1, columns exactly
  // orthogonal): rank r holds (r + 1) / 2 times column r.
  const size_t n = 16;
  auto hadamard = [](size_t i, size_t j) { return std::popcount(i & j) % 2 ? -1.0 : 1.0; };
  // A dense orthogonal basis too: Gram-Schmidt on random vectors (orthogonal
  // up to float rounding).
  const size_t m = 37;
  std::mt19937 rng(5);
  std::normal_distribution<double> normal;
  std::vector<Vec> q;
  for (int r = 0; r < N(); ++r) {
    Vec v(m);
    for (double& x : v) x = normal(rng);
    for (const Vec& u : q) {
      double d = 0;
      for (size_t i = 0; i < m; ++i) d += u[i] * v[i];
      for (size_t i = 0; i < m; ++i) v[i] -= d * u[i];
    }
    double norm = 0;
    for (double x : v) norm += x * x;
    for (double& x : v) x /= std::sqrt(norm);
    q.push_back(v);
  }
  Inputs in = make_inputs(N(), {n, m}, kFloat32, [&](int r, size_t t, size_t i) {
    return t == 0 ? 0.5 * (r + 1) * hadamard(i, r) : 3.0 * (r + 1) * q[r][i];
  });
  AdaSum op;
  std::vector<Tensor> mine{to_tensor(in[R()][0], kFloat32), to_tensor(in[R()][1], kFloat32)};
  std::vector<Tensor> got = op(mine);
  for (size_t t = 0; t < 2; ++t) {
    Vec sum(in[0][t].size(), 0.0);
    for (int r = 0; r < N(); ++r)
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += in[r][t][i];
    const double to_sum = rel_diff(to_vec(got[t]), sum);
    const double to_tree = rel_diff(to_vec(got[t]), tree(in, t, 0, N()));
    MESSAGE(N(), " ranks, orthogonal tensor ", t, ": vs sum ", to_sum, ", vs tree ", to_tree);
    CHECK(to_tree <= tolerance());
    CHECK(to_sum <= (t == 0 ? 0.0 : 1e-6));  // Hadamard columns: exactly the sum
  }
}

TEST_CASE("parallel inputs of different magnitudes give the mean") {
  if (N() == 1) return;
  // Rank r holds c_r v. Adasum(a, c a) = (1 - c / 2) a + (1 - 1 / (2c)) c a =
  // (a + c a) / 2 for any c != 0, so the tree gives the mean of the c_r v.
  const double c[] = {1, 3, 0.25, -2, 10, 0.5, 7, 1.5};
  std::mt19937 rng(11);
  std::normal_distribution<double> normal;
  Vec v(100);
  for (double& x : v) x = normal(rng);
  Inputs in = make_inputs(N(), {v.size(), v.size()}, kFloat32, [&](int r, size_t t, size_t i) {
    return t == 0 ? c[r] * v[i] : v[i];  // tensor 1: equal on every rank
  });
  AdaSum op;
  std::vector<Tensor> got = op({to_tensor(in[R()][0], kFloat32), to_tensor(in[R()][1], kFloat32)});
  for (size_t t = 0; t < 2; ++t) {
    Vec mean(v.size(), 0.0);
    for (int r = 0; r < N(); ++r)
      for (size_t i = 0; i < v.size(); ++i) mean[i] += in[r][t][i] / N();
    const double to_mean = rel_diff(to_vec(got[t]), mean);
    const double to_tree = rel_diff(to_vec(got[t]), tree(in, t, 0, N()));
    MESSAGE(N(), " ranks, parallel tensor ", t, ": vs mean ", to_mean, ", vs tree ", to_tree);
    CHECK(to_tree <= tolerance());
    CHECK(to_mean <= tolerance());
  }
}

TEST_CASE("random inputs of lengths that halve unevenly match the pairwise tree") {
  if (N() == 1) return;
  const size_t p = N();
  const std::vector<size_t> lengths{1, p + 1, 2 * p + 1, 20 * p - 17, 3, 1000, 4097};
  // Correlated: a shared direction plus each rank's own noise, so the
  // coefficients are far from 1 and from 1/2.
  std::mt19937 rng(3);
  std::normal_distribution<double> normal;
  Vec shared(4097);
  for (double& x : shared) x = normal(rng);
  auto gen = [&](int r, size_t t, size_t i) {
    if (t == 4) return 0.0;                   // zero on every rank
    if (t == 2 && r == 0) return 0.0;         // zero on rank 0 only: coefficient 1
    return shared[i] * (1 + 0.3 * r) + 0.7 * normal(rng) + 0.1 * t;
  };
  Inputs in = make_inputs(N(), lengths, kFloat32, gen);
  AdaSum op;
  // One tensor per call (the vector itself halves unevenly), then all fused in one call.
  double worst = 0;
  for (size_t t = 0; t < lengths.size(); ++t) {
    Inputs one(N());
    for (int r = 0; r < N(); ++r) one[r] = {in[r][t]};
    const double d = run_against_tree(op, one, kFloat32);
    MESSAGE(N(), " ranks, length ", lengths[t], " alone: vs tree ", d);
    worst = std::max(worst, d);
  }
  const double fused = run_against_tree(op, in, kFloat32);
  MESSAGE(N(), " ranks, all lengths fused: vs tree ", fused);
  CHECK(worst <= tolerance());
  CHECK(fused <= tolerance());
  CHECK(op(std::vector<Tensor>{}).empty());  // nothing to combine: nothing sent but the pattern
}

TEST_CASE("magnitudes from the smallest normal float up to 1e18 stay finite and correct") {
  if (N() == 1) return;
  // Float32 norms would underflow (1e-38^2) or overflow (1e18^2 * n), giving
  // coefficient 1 (the sum) instead of the Adasum; double norms do not.
  std::mt19937 rng(17);
  std::uniform_real_distribution<double> u(0, 1);
  const double scale[] = {1e-38, 1e18, 1, 1e-20, 1e10, 1e-30, 1e5, 1e-10};
  auto gen = [&](int r, size_t t, size_t i) {
    const double x = 1 + u(rng);  // positive: strongly correlated across ranks
    switch (t) {
      case 0: return 1.2e-38 * (x + 0.01 * r);  // all tiny (normal floats)
      case 1: return 1e18 * (x + 0.01 * r);     // all huge
      case 2: return scale[r] * (x - 1.5);      // each rank its own magnitude
      default: return (i % 2 ? 1e18 : 1.2e-38) * (x - 0.2 * r);  // both in one vector
    }
  };
  Inputs in = make_inputs(N(), {64, 64, 33, 50}, kFloat32, gen);
  AdaSum op;
  std::vector<Tensor> mine;
  for (const Vec& v : in[R()]) mine.push_back(to_tensor(v, kFloat32));
  std::vector<Tensor> got = op(mine);
  for (size_t t = 0; t < got.size(); ++t) {
    Vec g = to_vec(got[t]), ref = tree(in, t, 0, N());
    const double d = rel_diff(g, ref);
    MESSAGE(N(), " ranks, magnitude case ", t, ": max |ref| ",
            *std::max_element(ref.begin(), ref.end()), ", vs tree ", d);
    CHECK(all_finite(g));
    CHECK(d <= tolerance());
  }
  // The all-tiny and all-huge cases are near the mean, far from the sum.
  for (size_t t : {0, 1}) {
    Vec sum(64, 0.0);
    for (int r = 0; r < N(); ++r)
      for (size_t i = 0; i < 64; ++i) sum[i] += in[r][t][i];
    CHECK(rel_diff(to_vec(got[t]), sum) > 0.4);
  }
}

TEST_CASE("float16 gradients are combined in float32 and rounded back") {
  if (N() == 1) return;
  std::mt19937 rng(23);
  std::normal_distribution<double> normal;
  const size_t p = N();
  auto gen = [&](int r, size_t, size_t i) { return std::sin(0.1 * i) + 0.5 * normal(rng) + 0.1 * r; };
  Inputs in = make_inputs(N(), {1, p + 1, 300}, kFloat16, gen);
  AdaSum op;
  const double d = run_against_tree(op, in, kFloat16);
  MESSAGE(N(), " ranks, float16: vs tree ", d);
  CHECK(d <= kHalfEpsilon);

  // float16 and float32 tensors in one call.
  std::vector<Tensor> mixed{to_tensor(in[R()][2], kFloat16), to_tensor(in[R()][2], kFloat32)};
  std::vector<Tensor> got = op(mixed);
  CHECK(got[0].dtype() == kFloat16);
  CHECK(got[1].dtype() == kFloat32);
  Vec ref = tree(in, 2, 0, N());
  CHECK(rel_diff(to_vec(got[0]), ref) <= kHalfEpsilon);
  CHECK(rel_diff(to_vec(got[1]), ref) <= tolerance());
}

TEST_CASE("every rank ends with the same bits; inputs are unchanged; shapes are kept") {
  if (N() == 1) return;
  manual_seed(100 + R());
  std::vector<Tensor> grads{Tensor::randn({3, 4}), Tensor::randn({7}), Tensor::randn({2, 3, 5})};
  std::vector<std::vector<float>> before;
  for (const Tensor& g : grads) before.push_back(g.to_float_vector());
  AdaSum op;
  std::vector<Tensor> got = op(grads);
  CHECK(same_on_every_rank(got));
  for (size_t i = 0; i < grads.size(); ++i) {
    CHECK(grads[i].to_float_vector() == before[i]);
    CHECK(got[i].shape() == grads[i].shape());
    CHECK_FALSE(got[i].same(grads[i]));
  }
  // adasum_allreduce replaces the list's tensors with the same result.
  std::vector<Tensor> list = grads;
  parallel::adasum_allreduce(list, parallel::world());
  for (size_t i = 0; i < grads.size(); ++i) {
    CHECK_FALSE(list[i].same(grads[i]));
    CHECK(list[i].to_float_vector() == got[i].to_float_vector());
  }
}

TEST_CASE("a sub-group from new_group combines only its members") {
  if (N() < 4) return;
  const std::vector<int> members{1, 3};  // group ranks 0, 1 are world ranks 1, 3
  auto group = parallel::new_group(members);
  std::mt19937 rng(29);
  std::normal_distribution<double> normal;
  Inputs world_in = make_inputs(N(), {40}, kFloat32, [&](int, size_t, size_t) { return normal(rng); });
  if (group->rank() < 0) return;
  Inputs in{world_in[1], world_in[3]};
  AdaSum op(group);
  CHECK(op.levels() == 1);
  std::vector<Tensor> got = op({to_tensor(world_in[R()][0], kFloat32)});
  const double d = rel_diff(to_vec(got[0]), tree(in, 0, 0, 2));
  MESSAGE("world ranks 1 and 3: vs tree ", d);
  CHECK(d <= tolerance());
}

TEST_CASE("AdaSumByGradWrapCell: gradients combined in place, then the optimizer steps") {
  if (N() == 1) return;
  std::mt19937 rng(31);
  std::normal_distribution<double> normal;
  Inputs in = make_inputs(N(), {12, 5, 6}, kFloat32,
                          [&](int r, size_t t, size_t) { return normal(rng) + 0.5 * t + 0.2 * r; });
  for (int r = 0; r < N(); ++r) in[r][2].assign(6, 0.0);  // parameter c: a gradient on rank 0 only
  in[0][2] = {1, -2, 3, 0.5, 0, 4};

  Tensor a = Tensor::ones({3, 4}).requires_grad_(), b = Tensor::zeros({5}).requires_grad_();
  Tensor c = Tensor::zeros({2, 3}).requires_grad_();
  optim::SGD sgd({a, b, c}, /*lr=*/0.5);
  AdaSumByGradWrapCell wrap(sgd);
  CHECK(&wrap.optimizer() == &sgd);
  a.set_grad(to_tensor(in[R()][0], kFloat32, {3, 4}));
  b.set_grad(to_tensor(in[R()][1], kFloat32));
  if (R() == 0) c.set_grad(to_tensor(in[0][2], kFloat32, {2, 3}));
  wrap.step();

  const Tensor params[] = {a, b, c};
  const double start[] = {1, 0, 0};
  for (size_t t = 0; t < 3; ++t) {
    const Vec ref = tree(in, t, 0, N());
    CHECK(params[t].grad().shape() == params[t].shape());
    const double d_grad = rel_diff(to_vec(params[t].grad()), ref);
    Vec expected(ref.size());
    for (size_t i = 0; i < ref.size(); ++i) expected[i] = start[t] - 0.5 * ref[i];
    const double d_param = rel_diff(to_vec(params[t]), expected);
    MESSAGE(N(), " ranks, parameter ", t, ": grad vs tree ", d_grad, ", param vs SGD step ", d_param);
    CHECK(d_grad <= tolerance());
    CHECK(d_param <= tolerance());
  }
  CHECK(same_on_every_rank({a, b, c}));

  // MindSpore's call form: explicit gradients, then the step.
  wrap.zero_grad();
  CHECK_FALSE(a.grad().defined());
  std::vector<float> a_before = a.to_float_vector();
  wrap({to_tensor(in[R()][0], kFloat32, {3, 4}), to_tensor(in[R()][1], kFloat32), Tensor()});
  CHECK(rel_diff(to_vec(a.grad()), tree(in, 0, 0, N())) <= tolerance());
  CHECK(a.to_float_vector() != a_before);
  CHECK_THROWS_WITH_AS(wrap({Tensor::zeros({4, 3}), Tensor::zeros({5}), Tensor()}),
                       doctest::Contains("gradient 0 has shape [4, 3] but parameter 0 has shape [3, 4]"),
                       Error);
}
