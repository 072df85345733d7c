// Bus bandwidth of DistributedGradReducer::reduce_grads against raw MPI on the
// same number of float32 bytes, for LeNet-5 and MLP gradient sets. Run under
// mpirun:
//
//   mpirun -np 2 build/bin/bench_allreduce [--reps 300]
//
// Per case, one line: the reducer (fused: one 25 MiB bucket, with mean = true,
// then with mean = false; per-tensor: one bucket per gradient, mean), and raw
// MPI_Allreduce on one contiguous float32 buffer of the same size, both in
// place (MPI_IN_PLACE, as the reducer calls it) and out of place (a separate
// send buffer), as busbw = 2 (n - 1) / n * bytes / time in GB/s (nccl-tests'
// convention). ratio = reducer busbw / the faster raw variant's. With raw
// MPI a mean costs one pass more than a sum (a multiply by 1 / n for a
// power-of-two n): mean_us is that (the in-place sum, then the pass), and
// vs_mean = mean_us / reducer_us for the mean rows. The reducer has no such
// pass on two ranks (see ReduceOp::Avg); on more it multiplies before the sum. time = the median over
// repetitions of the slowest rank's time. The variants take turns within
// each repetition, after a barrier each, so load from other processes falls
// on all of them alike.
//
// Before each timed call, every variant's input is written afresh (untimed),
// as a backward writes the gradients before each reduction. A send buffer
// nobody writes between calls stays clean in the caches and makes MPI's
// out-of-place call look up to 20% faster than it is on fresh data, in this
// machine's slow spells. The reducer's gradients stay in its bucket buffer
// between calls, as in training without zero_grad() (see
// parallel/grad_bucket.h), and are rewritten there.
#define OMPI_SKIP_MPICXX 1  // the C API only (Open MPI's C++ bindings need their own library)
#include <mpi.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench_ranks.h"
#include "framework/random.h"
#include "parallel/grad_reducer.h"
#include "parallel/init.h"

using namespace minidl;

int main(int argc, char** argv) {
  bench::Flags flags(argc, argv, {{"reps", "300"}}, "[--reps N]  (run under mpirun -np N)");
  const int reps = static_cast<int>(flags.integer("reps"));
  parallel::init();
  const int n = parallel::world_size(), rank = parallel::rank();
  if (rank == 0) {
    bench::print_load_note();
    std::printf("# %d ranks, %d repetitions, median of the slowest rank; busbw in GB/s\n", n, reps);
    std::printf("%-6s %-10s %7s %9s %10s %10s %11s %9s %9s %9s %9s %7s %7s\n", "set", "reducer",
                "tensors", "bytes", "reducer_us", "inplace_us", "outplace_us", "mean_us", "reducer",
                "inplace", "outplace", "ratio", "vs_mean");
  }
  manual_seed(rank);
  for (const bench::GradSet& set : bench::kGradSets) {
    std::vector<Tensor> params;
    size_t count = 0;
    for (const Shape& s : set.shapes) {
      params.push_back(Tensor::zeros(s).requires_grad_());
      count += static_cast<size_t>(params.back().numel());
    }
    std::vector<float> in_place(count), send(count), recv(count), mean(count);
    const int icount = static_cast<int>(count);
    const double bytes = static_cast<double>(count * sizeof(float));
    auto busbw = [&](double s) { return 2.0 * (n - 1) / n * bytes / s / 1e9; };
    auto fill = [&](float* x, size_t k) {  // fresh values, as a backward writes them
      for (size_t i = 0; i < k; ++i) x[i] = static_cast<float>((i + rank) % 8) * 0.125f;
    };
    struct Variant {
      const char* name;
      bool mean;
      size_t bucket_bytes;
    };
    for (const Variant& v : {Variant{"fused", true, parallel::kDefaultBucketBytes},
                             Variant{"fused-sum", false, parallel::kDefaultBucketBytes},
                             Variant{"per-tensor", true, 0}}) {
      for (Tensor& p : params) p.set_grad(Tensor::zeros(p.shape()));
      parallel::DistributedGradReducer reducer(params, v.mean, std::nullopt, v.bucket_bytes);
      std::vector<float*> inputs = {nullptr, in_place.data(), send.data(), mean.data()};
      std::vector<double> t = bench::median_max_seconds(
          reps,
          {[&] { reducer.reduce_grads(); },
           [&] {
             MPI_Allreduce(MPI_IN_PLACE, in_place.data(), icount, MPI_FLOAT, MPI_SUM,
                           MPI_COMM_WORLD);
           },
           [&] {
             MPI_Allreduce(send.data(), recv.data(), icount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
           },
           [&] {  // what a mean costs with raw MPI: the in-place sum, then one pass
             MPI_Allreduce(MPI_IN_PLACE, mean.data(), icount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
             const float inverse = 1.0f / static_cast<float>(n);
             for (float& x : mean) x *= inverse;
           }},
          [&](size_t b) {
            if (inputs[b]) return fill(inputs[b], count);
            for (Tensor& p : params)  // in place: the reducer's views (no handle kept)
              fill(p.grad().data<float>(), static_cast<size_t>(p.numel()));
          });
      const double raw = std::min(t[1], t[2]);
      if (rank == 0)
        std::printf("%-6s %-10s %7zu %9.0f %10.1f %10.1f %11.1f %9.1f %9.3f %9.3f %9.3f %7.2f %7.2f\n",
                    set.name, v.name, params.size(), bytes, t[0] * 1e6, t[1] * 1e6, t[2] * 1e6,
                    t[3] * 1e6, busbw(t[0]), busbw(t[1]), busbw(t[2]), n > 1 ? raw / t[0] : 0.0,
                    n > 1 && v.mean ? t[3] / t[0] : 0.0);
    }
  }
}
