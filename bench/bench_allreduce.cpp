// Bus bandwidth of DistributedGradReducer::reduce_grads against a raw
// MPI_Allreduce of the same number of float32 bytes, on LeNet-5 and MLP
// gradient sets. Run under mpirun:
//
//   mpirun -np 2 build/bin/bench_allreduce [--reps 200]
//
// busbw = 2 (n - 1) / n * bytes / time (nccl-tests' convention for allreduce),
// time = the median over repetitions of the slowest rank's time; every
// repetition starts after a barrier.
#define OMPI_SKIP_MPICXX 1  // the C API only (Open MPI's C++ bindings need their own library)
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench_common.h"
#include "framework/random.h"
#include "parallel/grad_reducer.h"
#include "parallel/init.h"

using namespace minidl;

struct GradSet {
  const char* name;
  std::vector<Shape> shapes;
};

const std::vector<GradSet> kSets = {
    {"lenet", {{6, 1, 5, 5}, {6}, {16, 6, 5, 5}, {16}, {120, 400}, {120}, {84, 120}, {84}, {10, 84}, {10}}},
    {"mlp", {{512, 784}, {512}, {512, 512}, {512}, {10, 512}, {10}}},
};

// Median over reps of the slowest rank's seconds for body().
template <class Body>
double median_max_seconds(int reps, Body body) {
  for (int i = 0; i < 5; ++i) body();
  std::vector<double> times(reps);
  for (int i = 0; i < reps; ++i) {
    parallel::barrier();
    auto t0 = bench::Clock::now();
    body();
    times[i] = bench::seconds_since(t0);
  }
  parallel::world().allreduce(times.data(), times.size(), parallel::ReduceOp::Max);
  return bench::median(times);
}

int main(int argc, char** argv) {
  bench::Flags flags(argc, argv, {{"reps", "300"}}, "[--reps N]  (run under mpirun -np N)");
  const int reps = static_cast<int>(flags.integer("reps"));
  parallel::init();
  const int n = parallel::world_size(), rank = parallel::rank();
  const double bus_factor = 2.0 * (n - 1) / n;
  if (rank == 0) {
    bench::print_load_note();
    std::printf("# %d ranks, %d repetitions, median of the slowest rank; busbw in GB/s\n", n, reps);
    std::printf("%-6s %-10s %7s %9s %12s %12s %9s %9s %7s\n", "set", "buckets", "tensors", "bytes",
                "reducer_us", "raw_us", "reducer", "raw", "ratio");
  }
  manual_seed(rank);
  for (const GradSet& set : kSets) {
    std::vector<Tensor> params;
    size_t count = 0;
    for (const Shape& s : set.shapes) {
      params.push_back(Tensor::zeros(s).requires_grad_());
      params.back().set_grad(Tensor::randn(s));
      count += static_cast<size_t>(params.back().numel());
    }
    std::vector<float> raw(count, 1.0f);
    const double bytes = static_cast<double>(count * sizeof(float));
    double raw_s = median_max_seconds(reps, [&] {
      MPI_Allreduce(MPI_IN_PLACE, raw.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    });
    for (size_t bucket_bytes : {parallel::kDefaultBucketBytes, size_t{0}}) {
      parallel::DistributedGradReducer reducer(params, /*mean=*/true, std::nullopt, bucket_bytes);
      double red_s = median_max_seconds(reps, [&] { reducer.reduce_grads(); });
      double red_bw = bus_factor * bytes / red_s / 1e9, raw_bw = bus_factor * bytes / raw_s / 1e9;
      if (rank == 0)
        std::printf("%-6s %-10s %7zu %9.0f %12.1f %12.1f %9.3f %9.3f %7.2f\n", set.name,
                    bucket_bytes ? "fused" : "per-tensor", params.size(), bytes, red_s * 1e6,
                    raw_s * 1e6, red_bw, raw_bw, n > 1 ? red_bw / raw_bw : 0.0);
    }
  }
}
