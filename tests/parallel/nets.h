// What the multi-rank suites share: rank shorthands, two small networks, a
// relative-difference measure for comparing parameters across runs and a
// check that every rank holds the same values.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "framework/ops.h"
#include "nn/cell.h"
#include "nn/dense.h"
#include "parallel/init.h"

namespace minidl::testing {

inline int R() { return parallel::rank(); }
inline int N() { return parallel::world_size(); }

// x [B, IN] -> relu(fc1) [B, HIDDEN] -> fc2 [B, OUT]
struct Mlp : nn::Cell {
  nn::Dense fc1, fc2;
  explicit Mlp(int64_t in = 6, int64_t hidden = 8, int64_t out = 3)
      : fc1(in, hidden), fc2(hidden, out) {
    register_cells({{"fc1", fc1}, {"fc2", fc2}});
  }
  Tensor forward(const Tensor& x) override { return fc2(relu(fc1(x))); }
};

// x [B, 6] -> fc0 -> relu -> ... -> fc{depth-1} [B, OUT]: a chain of `depth`
// Dense layers of `width`, for many buckets.
struct Deep : nn::Cell {
  std::vector<std::shared_ptr<nn::Dense>> layers;
  explicit Deep(int depth, int64_t width = 16, int64_t out = 3) {
    for (int i = 0; i < depth; ++i)
      layers.push_back(register_cell("fc" + std::to_string(i),
                                     std::make_shared<nn::Dense>(i ? width : 6,
                                                                 i + 1 < depth ? width : out)));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (size_t i = 0; i < layers.size(); ++i)
      h = i + 1 < layers.size() ? relu((*layers[i])(h)) : (*layers[i])(h);
    return h;
  }
};

// max over tensors of max|a - b| / max|b|.
inline double max_rel_diff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    std::vector<float> va = a[i].to_float_vector(), vb = b[i].to_float_vector();
    REQUIRE(va.size() == vb.size());
    double diff = 0, ref = 0;
    for (size_t k = 0; k < va.size(); ++k) {
      diff = std::max(diff, std::abs(double(va[k]) - vb[k]));
      ref = std::max(ref, std::abs(double(vb[k])));
    }
    worst = std::max(worst, diff / std::max(ref, 1e-12));
  }
  return worst;
}

// True when every rank holds the same bytes in `ts` as rank 0.
inline bool same_on_every_rank(const std::vector<Tensor>& ts) {
  std::vector<char> mine;
  for (const Tensor& t : ts) {
    const char* p = static_cast<const char*>(t.raw_data());
    mine.insert(mine.end(), p, p + t.nbytes());
  }
  std::vector<char> all(mine.size() * N());
  parallel::world().allgather(mine.data(), all.data(), mine.size());
  const auto rank0 = all.begin();
  for (int r = 1; r < N(); ++r)
    if (!std::equal(rank0, rank0 + mine.size(), rank0 + r * mine.size())) return false;
  return true;
}

}  // namespace minidl::testing
