// Shared by the multi-rank benchmarks (bench_allreduce, bench_adasum): the
// gradient sets they reduce and a timer that takes the slowest rank.
#pragma once
#include <functional>
#include <vector>

#include "bench_common.h"
#include "framework/tensor.h"
#include "parallel/init.h"

namespace bench {

struct GradSet {
  const char* name;
  std::vector<minidl::Shape> shapes;
};

// The parameter shapes of example::LeNet5 and example::MLP (examples/models.h).
inline const std::vector<GradSet> kGradSets = {
    {"lenet",
     {{6, 1, 5, 5}, {6}, {16, 6, 5, 5}, {16}, {120, 400}, {120}, {84, 120}, {84}, {10, 84}, {10}}},
    {"mlp", {{512, 784}, {512}, {512, 512}, {512}, {10, 512}, {10}}},
};

// Medians over reps of the slowest rank's seconds, one per body; the bodies
// take turns within each repetition, after a barrier, so load drifts hit all.
// `before(b)`, when given, runs untimed before each call of body b.
inline std::vector<double> median_max_seconds(int reps,
                                              const std::vector<std::function<void()>>& bodies,
                                              const std::function<void(size_t)>& before = {}) {
  namespace parallel = minidl::parallel;
  const size_t k = bodies.size();
  for (int i = 0; i < 5; ++i)
    for (const auto& body : bodies) body();
  std::vector<double> times(k * reps);
  for (int i = 0; i < reps; ++i)
    for (size_t b = 0; b < k; ++b) {
      if (before) before(b);
      parallel::barrier();
      auto t0 = Clock::now();
      bodies[b]();
      times[b * reps + i] = seconds_since(t0);
    }
  parallel::world().allreduce(times.data(), times.size(), parallel::ReduceOp::Max);
  std::vector<double> medians;
  for (size_t b = 0; b < k; ++b)
    medians.push_back(median({times.begin() + b * reps, times.begin() + (b + 1) * reps}));
  return medians;
}

}  // namespace bench
