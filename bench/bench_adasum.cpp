// AdaSum against averaging (DistributedGradReducer, one fused bucket) on the
// same gradient sets, LeNet-5's and the MLP's. Run under mpirun with a
// power-of-two number of ranks:
//
//   mpirun -np 2 build/bin/bench_adasum [--reps 300]
//
// Per set, one line: the microseconds of one reduction of every gradient
// (AdaSum::reduce and DistributedGradReducer::reduce, both returning new
// tensors) and the ratio adasum / mean. time = the median over repetitions of
// the slowest rank's time; the two take turns within each repetition, after a
// barrier each, so load from other processes falls on both alike.
#include <cstdio>
#include <functional>
#include <vector>

#include "bench_ranks.h"
#include "framework/random.h"
#include "parallel/adasum.h"
#include "parallel/grad_reducer.h"
#include "parallel/init.h"

using namespace minidl;

int main(int argc, char** argv) {
  bench::Flags flags(argc, argv, {{"reps", "300"}}, "[--reps N]  (run under mpirun -np 2, 4, ...)");
  const int reps = static_cast<int>(flags.integer("reps"));
  parallel::init();
  const int n = parallel::world_size(), rank = parallel::rank();
  parallel::AdaSum adasum;  // throws unless n is a power of two >= 2
  if (rank == 0) {
    bench::print_load_note();
    std::printf("# %d ranks, %d repetitions, median of the slowest rank\n", n, reps);
    std::printf("%-6s %7s %9s %10s %10s %7s\n", "set", "tensors", "bytes", "adasum_us", "mean_us",
                "ratio");
  }
  manual_seed(rank);  // each rank its own gradients
  for (const bench::GradSet& set : bench::kGradSets) {
    std::vector<Tensor> params, grads;
    size_t count = 0;
    for (const Shape& s : set.shapes) {
      params.push_back(Tensor::zeros(s));
      grads.push_back(Tensor::randn(s));
      count += static_cast<size_t>(grads.back().numel());
    }
    parallel::DistributedGradReducer reducer(params);
    std::vector<double> t = bench::median_max_seconds(reps, {[&] { adasum.reduce(grads); },
                                                      [&] { reducer.reduce(grads); }});
    if (rank == 0)
      std::printf("%-6s %7zu %9zu %10.1f %10.1f %7.2f\n", set.name, grads.size(),
                  count * sizeof(float), t[0] * 1e6, t[1] * 1e6, t[0] / t[1]);
  }
}
