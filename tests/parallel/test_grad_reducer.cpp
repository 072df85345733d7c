// DistributedGradReducer under 1, 2 and 4 ranks. Rank r's gradient values are
// chosen so the sums are exact in float32 and the expected results can be
// written as formulas in N (ranks) and r.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "framework/random.h"
#include "parallel/backend/local.h"
#include "parallel/grad_reducer.h"
#include "parallel/init.h"

using namespace minidl;
using parallel::DistributedGradReducer;

namespace {
int R() { return parallel::rank(); }
int N() { return parallel::world_size(); }

std::vector<Tensor> make_params(const std::vector<Shape>& shapes) {
  std::vector<Tensor> ps;
  for (const Shape& s : shapes) ps.push_back(Tensor::zeros(s).requires_grad_());
  return ps;
}

// g_i[k] = (r + 1)(k + 1)(i + 1): summed over ranks, S (k + 1)(i + 1) with S = N(N+1)/2.
std::vector<Tensor> rank_grads(const std::vector<Tensor>& params, int r) {
  std::vector<Tensor> gs;
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor g = Tensor::empty(params[i].shape());
    for (int64_t k = 0; k < g.numel(); ++k)
      g.data<float>()[k] = float((r + 1) * (k + 1) * (i + 1));
    gs.push_back(g);
  }
  return gs;
}

// Checks out_i[k] == S (k + 1)(i + 1) / divisor, computed as float32 division.
void check_reduced(const std::vector<Tensor>& out, float divisor) {
  const int n = N();
  for (size_t i = 0; i < out.size(); ++i)
    for (int64_t k = 0; k < out[i].numel(); ++k) {
      float sum = float(n * (n + 1) / 2 * (k + 1) * (i + 1));
      CHECK(out[i].data<float>()[k] == sum / divisor);
    }
}

const std::vector<Shape> kShapes = {{2, 3}, {4}, {1}, {3, 1, 2}};
}  // namespace

TEST_CASE("mean divides the sum by the world size; sum does not") {
  auto params = make_params(kShapes);
  auto grads = rank_grads(params, R());
  DistributedGradReducer mean_reducer(params);  // mean = true, degree = world size
  CHECK(mean_reducer.degree() == N());
  check_reduced(mean_reducer(grads), float(N()));

  DistributedGradReducer sum_reducer(params, /*mean=*/false);
  check_reduced(sum_reducer.reduce(grads), 1.0f);

  // The inputs are left as they were.
  auto again = rank_grads(params, R());
  for (size_t i = 0; i < grads.size(); ++i)
    CHECK(grads[i].to_float_vector() == again[i].to_float_vector());
}

TEST_CASE("degree: mean divides by degree, not by the world size") {
  auto params = make_params(kShapes);
  auto grads = rank_grads(params, R());
  DistributedGradReducer halve(params, /*mean=*/true, /*degree=*/2);
  CHECK(halve.degree() == 2);
  check_reduced(halve(grads), 2.0f);  // on 4 ranks: sum / 2

  DistributedGradReducer options(params, parallel::GradReducerOptions{.degree = 3});
  check_reduced(options(grads), 3.0f);
}

TEST_CASE("degree <= 0 throws std::invalid_argument naming the value") {
  auto params = make_params(kShapes);
  for (int bad : {0, -1, -7}) {
    try {
      DistributedGradReducer r(params, true, bad);
      FAIL("degree ", bad, " was accepted");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find("got " + std::to_string(bad)) != std::string::npos);
    }
  }
}

TEST_CASE("reduce_grads writes the mean back into each parameter's .grad()") {
  auto params = make_params(kShapes);
  auto grads = rank_grads(params, R());
  for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(grads[i]);
  DistributedGradReducer reducer(params);
  reducer.reduce_grads();
  std::vector<Tensor> now;
  for (auto& p : params) now.push_back(p.grad());
  check_reduced(now, float(N()));
}

TEST_CASE("reduce_grads leaves gradients in its bucket; a backward adds there, the next call reuses it") {
  const int n = N(), r = R();
  auto params = make_params(kShapes);
  auto grads = rank_grads(params, r);
  for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(grads[i]);
  DistributedGradReducer reducer(params);  // one bucket
  reducer.reduce_grads();
  // Each gradient is its parameter's part of one buffer, side by side (one
  // rank has nothing to do and leaves the gradients as they were).
  const float* base = params[0].grad().data<float>();
  int64_t at = 0;
  for (auto& p : params) {
    if (n > 1) CHECK(p.grad().data<float>() == base + at);
    at += p.numel();
  }
  // A backward without zero_grad() adds g_r in place (autograd accumulates into
  // the defined gradient); reducing again gives mean_1 + mean(g) = 2 S x / N.
  for (size_t i = 0; i < params.size(); ++i) {
    float* g = params[i].grad().data<float>();
    for (int64_t k = 0; k < params[i].numel(); ++k) g[k] += grads[i].data<float>()[k];
  }
  reducer.reduce_grads();
  CHECK(params[0].grad().data<float>() == base);  // the same buffer: nothing copied in or out
  std::vector<Tensor> now;
  for (auto& p : params) now.push_back(p.grad());
  check_reduced(now, float(n) / 2);  // 2 S x / N, exact: all values are small dyadic numbers
}

TEST_CASE("a reduction never writes a gradient the caller holds") {
  const int n = N(), r = R();
  auto params = make_params(kShapes);
  for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(Tensor::zeros(params[i].shape()));
  DistributedGradReducer reducer(params, /*mean=*/false);
  reducer.reduce_grads();  // the gradients now live in the reducer's buffer
  for (auto& p : params) p.grad().fill_(r + 1);
  Tensor held = params[1].grad();  // the caller keeps one across the next reduction
  reducer.reduce_grads();
  CHECK(held.to_float_vector() == std::vector<float>(held.numel(), float(r + 1)));
  for (auto& p : params)  // every parameter has the sum, 1 + 2 + ... + N
    CHECK(p.grad().to_float_vector() == std::vector<float>(p.numel(), float(n * (n + 1) / 2)));
  if (n > 1) CHECK_FALSE(params[1].grad().same(held));

  // reduce() results are new tensors each call: a second call leaves the first's alone.
  auto grads = rank_grads(params, r);
  auto first = reducer(grads);
  auto first_values = first[0].to_float_vector();
  auto second = reducer(rank_grads(params, r + 1));
  CHECK(first[0].to_float_vector() == first_values);
}

TEST_CASE("float16 gradients are summed in float32 and cast back") {
  const int n = N(), r = R();
  // entry 0: 60000 on every rank: a float16 sum overflows to inf (max 65504), the mean is 60000.
  // entry 1: 2048 on rank 0, 1 elsewhere: float16 spacing at 2048 is 2, so adding 1s one by one
  //          in float16 never moves it; float32 keeps every 1.
  // entry 2: 1 + r/1024 (exact in float16): the mean rounds only once, at the end.
  auto contribution = [](int rank) {
    return std::vector<float>{60000.f, rank == 0 ? 2048.f : 1.f, 1.f + rank / 1024.f};
  };
  Tensor p16 = Tensor::zeros({3}, kFloat16), p32 = Tensor::zeros({2});
  Tensor g16 = Tensor::from_vector(contribution(r)).to(kFloat16);
  Tensor g32 = Tensor::of({float(r), 1.f});
  DistributedGradReducer reducer({p16, p32});  // one bucket holds both dtypes
  auto out = reducer({g16, g32});
  REQUIRE(out[0].dtype() == kFloat16);
  REQUIRE(out[1].dtype() == kFloat32);

  std::vector<float> sum32(3, 0.f);
  std::vector<Half> sum16(3, float_to_half(0.f));
  for (int q = 0; q < n; ++q)
    for (int k = 0; k < 3; ++k) {
      sum32[k] += contribution(q)[k];
      sum16[k] = float_to_half(half_to_float(sum16[k]) + contribution(q)[k]);
    }
  bool f16_would_differ = false;
  for (int k = 0; k < 3; ++k) {
    Half expected = float_to_half(sum32[k] / float(n));
    Half f16_accumulated = float_to_half(half_to_float(sum16[k]) / float(n));
    CHECK(out[0].data<Half>()[k].bits == expected.bits);
    f16_would_differ |= expected.bits != f16_accumulated.bits;
  }
  CHECK(half_to_float(out[0].data<Half>()[0]) == 60000.f);
  if (n >= 2) CHECK(f16_would_differ);  // the test values do tell the two apart
  CHECK(out[1].to_float_vector() == std::vector<float>{(n - 1) / 2.0f, 1.f});
}

TEST_CASE("bucketing: many small buckets equal one allreduce per tensor") {
  const int n = N(), r = R();
  std::vector<Shape> shapes;
  for (int i = 0; i < 50; ++i) shapes.push_back(i % 3 ? Shape{1 + (i * 7) % 37} : Shape{2, 1 + i % 5});
  auto params = make_params(shapes);
  manual_seed(1000 + r);
  std::vector<Tensor> grads;
  for (auto& p : params) grads.push_back(Tensor::randn(p.shape()));

  // Reference: one blocking allreduce per tensor, then / N in float32.
  std::vector<std::vector<float>> ref;
  for (auto& g : grads) {
    std::vector<float> v = g.to_float_vector();
    parallel::world().allreduce(v.data(), v.size());
    for (float& x : v) x /= float(n);
    ref.push_back(v);
  }

  DistributedGradReducer small(params, true, std::nullopt, /*bucket_bytes=*/64);
  DistributedGradReducer fused(params);  // 25 MiB: everything in one bucket
  CHECK(small.buckets().size() > 20);
  CHECK(fused.buckets().size() == 1);
  size_t covered = 0;
  for (auto& b : small.buckets()) covered += b.size();
  CHECK(covered == params.size());

  for (auto* reducer : {&small, &fused}) {
    auto out = (*reducer)(grads);
    double max_rel = 0;
    bool identical = true;
    for (size_t i = 0; i < out.size(); ++i) {
      const float* o = out[i].data<float>();
      identical &= std::memcmp(o, ref[i].data(), ref[i].size() * sizeof(float)) == 0;
      for (size_t k = 0; k < ref[i].size(); ++k)
        max_rel = std::max(max_rel, std::abs(double(o[k]) - ref[i][k]) / (std::abs(ref[i][k]) + 1e-6));
    }
    MESSAGE("buckets: ", reducer->buckets().size(), ", max relative difference to per-tensor "
            "allreduce: ", max_rel);
    if (n <= 2) CHECK(identical);  // a + b is the same in any order
    else CHECK(max_rel < 1e-5);    // more ranks: summation order may differ
  }
}

TEST_CASE("a world of one returns the gradients themselves") {
  auto params = make_params(kShapes);
  auto grads = rank_grads(params, R());
  auto one = std::make_shared<parallel::backend::LocalCommunicator>();
  for (bool mean : {true, false}) {
    DistributedGradReducer reducer(params, mean, std::nullopt, parallel::kDefaultBucketBytes, one);
    auto out = reducer(grads);
    for (size_t i = 0; i < grads.size(); ++i) CHECK(out[i].same(grads[i]));
  }
  Tensor h = Tensor::full({2}, 0.1, kFloat16);  // float16 too, bit for bit
  DistributedGradReducer r16({Tensor::zeros({2}, kFloat16)}, true, std::nullopt,
                             parallel::kDefaultBucketBytes, one);
  CHECK(r16({h})[0].same(h));
  if (N() == 1) {  // and the default group, when the job is one rank
    DistributedGradReducer world(params);
    auto out = world(grads);
    for (size_t i = 0; i < grads.size(); ++i) CHECK(out[i].same(grads[i]));
  }
}

TEST_CASE("an undefined gradient counts as zeros") {
  const int n = N(), r = R();
  auto params = make_params({{2}, {3}});
  std::vector<Tensor> grads = {Tensor::ones({2}), r == 0 ? Tensor() : Tensor::ones({3})};
  auto out = DistributedGradReducer(params, /*mean=*/false)(grads);
  CHECK(out[0].to_float_vector() == std::vector<float>(2, float(n)));
  if (n == 1) CHECK(!out[1].defined());  // unchanged
  else CHECK(out[1].to_float_vector() == std::vector<float>(3, float(n - 1)));
}

TEST_CASE("wrong gradient count or shape throws, naming index and shapes") {
  auto params = make_params(kShapes);
  DistributedGradReducer reducer(params);
  auto grads = rank_grads(params, R());
  grads.pop_back();
  CHECK_THROWS_WITH_AS(reducer(grads), doctest::Contains("got 3 gradients for 4 parameters"), Error);
  grads = rank_grads(params, R());
  grads[1] = Tensor::ones({2, 2});
  CHECK_THROWS_WITH_AS(reducer(grads),
                       doctest::Contains("gradient 1 has shape [2, 2] but parameter 1 has shape [4]"),
                       Error);
}

TEST_CASE("a group: reduce over its members; other ranks get an error") {
  const int n = N(), r = R();
  std::vector<int> evens;
  for (int i = 0; i < n; i += 2) evens.push_back(i);
  auto group = parallel::new_group(evens);
  auto params = make_params({{3}});
  DistributedGradReducer reducer(params, true, std::nullopt, parallel::kDefaultBucketBytes, group);
  CHECK(reducer.degree() == int(evens.size()));
  std::vector<Tensor> grads = {Tensor::full({3}, r)};
  if (r % 2 == 0) {
    auto out = reducer(grads);
    float sum = 0;
    for (int e : evens) sum += float(e);
    CHECK(out[0].to_float_vector() == std::vector<float>(3, sum / float(evens.size())));
  } else {
    CHECK_THROWS_WITH_AS(reducer(grads), doctest::Contains("not a member"), Error);
  }
}
