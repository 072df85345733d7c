// GradBucket: some parameters' gradients side by side in one float32 buffer,
// the unit that one allreduce carries (for DistributedGradReducer and
// DataParallel).
//
//   GradBucket bucket({fc2.weight, fc2.bias});
//   const Tensor& flat = bucket.pack(0.5f);   // the gradients as float32, times 0.5
//   comm.allreduce(flat);
//   bucket.unpack(1.0f);                      // each .grad() now holds its part
//
// The buffer lives on the parameters' device (all on one; the constructor
// throws otherwise): on the CPU, packing and unpacking are host loops; on
// another device, tensor ops doing the same float32 arithmetic, so a bucket
// on the device gives the CPU's bits wherever its kernels do.
//
// Gradient as bucket view (PyTorch DDP's gradient_as_bucket_view): unpack()
// leaves each float32 gradient as a view into the buffer. The optimizer reads
// it there, a backward without zero_grad() accumulates into it there, and the
// next pack() finds it in place: nothing is copied in or out. Any other
// gradient is copied in (cast to float32; an undefined one as zeros): a new
// one from a backward after zero_grad(), a float16 one, one given with
// set_grad(). Float16 results are cast back into their gradient.
//
// The buffer is reused only while nothing else refers to it than the
// parameters' own gradients (each held by its parameter alone). If anything
// else holds one of them (`Tensor g = p.grad();` kept across the step), pack()
// moves the bucket to a new buffer and leaves the old values to their holder,
// so a reduction never changes a tensor the caller holds.
#pragma once
#include <cstddef>
#include <vector>

#include "framework/tensor.h"
#include "parallel/communicator.h"

namespace minidl::parallel {

// How a mean over `degree` ranks is taken on a communicator of `size`:
// - two ranks, degree 2: the communicator's Avg, which MPI computes inside
//   the reduction ((a + b) / 2, no pass over the data of its own);
// - degree a power of two: every gradient times 1 / degree before the sum
//   (exact, so the same numbers as dividing after it; folded into the copy
//   into the bucket where there is one);
// - otherwise: the sum divided by degree after it.
// All three give the same float32 numbers (barring overflow and subnormals).
struct MeanSplit {
  float scale = 1.0f;             // before the allreduce
  ReduceOp op = ReduceOp::Sum;    // the allreduce
  float divisor = 1.0f;           // after it
};
MeanSplit mean_split(int degree, int size);

class GradBucket {
 public:
  explicit GradBucket(std::vector<Tensor> params);

  size_t numel() const { return numel_; }
  Device device() const;  // the parameters' (the CPU for none)

  // The gradients as float32 in the bucket's buffer ([numel], on the
  // parameters' device), each times `scale` (applied to every value: exact
  // for a power of two).
  const Tensor& pack(float scale);
  // The buffer divided by `divisor` (1: as is), then the results handed to
  // the parameters as above.
  void unpack(float divisor);

  // For DistributedGradReducer::reduce(): `grads` (one per parameter, not the
  // parameters' own) packed into a new [numel] float32 buffer on the device, times `scale`.
  // unpack_new() divides that buffer and returns the results: float32 ones as
  // views into it, others cast to their gradient's dtype; the inputs are
  // never written.
  Tensor pack_new(const std::vector<Tensor>& grads, float scale) const;
  std::vector<Tensor> unpack_new(const Tensor& buffer, const std::vector<Tensor>& grads,
                                 float divisor) const;

 private:
  std::vector<Tensor> params_;
  std::vector<size_t> offsets_;
  size_t numel_ = 0;
  Tensor flat_;  // [numel] float32, allocated at the first pack

  // True when param k's gradient is its view into flat_, held by the parameter alone.
  bool holds_view(size_t k) const;
  Tensor view(size_t k) const;
};

}  // namespace minidl::parallel
