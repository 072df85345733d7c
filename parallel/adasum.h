// AdaSum: combines gradients across ranks by adaptive summation (Maleki et
// al., "AdaSum: Scaling Distributed Training with Adaptive Summation"), as
// MindSpore's nn.AdaSumByGradWrapCell does.
//
//   parallel::init();                                   // under mpirun -np 2, 4, 8, ...
//   optim::Momentum opt(net.trainable_params(), /*lr=*/0.01, /*momentum=*/0.9);
//   parallel::AdaSumByGradWrapCell adasum(opt);         // throws alone, or on 3 ranks
//   loss.backward();
//   adasum.step();       // every .grad() becomes the AdaSum over ranks; then opt.step()
//   adasum.zero_grad();
// or on a list of tensors:
//   parallel::AdaSum op;                                // sub-communicators made once
//   std::vector<Tensor> combined = op(grads);
//
// The operator, per gradient tensor (each tensor gets its own coefficients):
//   Adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b,
// with a.b, |a|^2 and |b|^2 accumulated in double and a side of zero norm
// taking coefficient 1 (Adasum(0, b) = b). Orthogonal a and b give a + b;
// parallel ones (b = c a) give their mean (a + b) / 2.
// Over P = 2^k ranks the result is the pairwise tree on whole vectors,
//   ((g0 + g1) + (g2 + g3)) + ((g4 + g5) + (g6 + g7))    (+ meaning Adasum),
// left operands from the lower ranks. It is computed on all gradients packed
// into one float32 vector of N elements (float16 gradients are widened, and the
// result is rounded back to each gradient's dtype):
// 1. Reduce-scatter by recursive vector halving and distance doubling. At level
//    l = 0..k-1 rank r pairs with r ^ 2^l; both hold the same slice S of their
//    blocks' partial results (a block: the 2^l ranks sharing r >> l). The lower
//    rank keeps the first half of S and the upper the second; each sends the
//    half it gives up (blocking send/recv, the lower rank sending first, so
//    the pair cannot deadlock). Per tensor, the partial a.b, |a|^2, |b|^2 over
//    the kept halves are summed by an allreduce over the 2^(l+1) ranks of the
//    merged block (one sub-communicator per level, made at construction),
//    which gives the whole-vector values, and the kept half becomes Adasum(a, b).
// 2. Allgather by distance halving: the levels in reverse, each pair swaps its
//    halves, so every rank ends with the whole combined vector (bit-identical
//    on every rank).
// Each rank sends about N elements in each phase, as a halving-doubling
// allreduce does, plus one allreduce of 3 doubles per tensor per level.
// Devices: the packed vector and the arithmetic are on the host, whatever the
// backend (NCCL included). Gradients on a device are copied into it and the
// results copied back to each gradient's device: the same bits as on the CPU.
//
// Errors (minidl::Error, thrown at construction, as the reference raises):
// a group of one rank (no distributed job), a rank count that is not a power
// of two (any power of two from 2 up works; the reference wants 16 or more),
// a process outside the group. reduce() throws for an undefined gradient or a
// dtype other than float32/float16. Every rank must pass the same number of
// tensors with the same shapes (it is a collective); a mismatch is undefined
// (usually a recv length error).
#pragma once
#include <memory>
#include <vector>

#include "framework/tensor.h"
#include "optim/optimizer.h"
#include "parallel/communicator.h"

namespace minidl::parallel {

class AdaSum {
 public:
  // Collective over `group` (null: the world; needs parallel::init() first):
  // makes the sub-communicators of the levels. Throws as described above.
  explicit AdaSum(std::shared_ptr<Communicator> group = nullptr);

  // The AdaSum over the group's ranks of each grads[i], as new tensors of the
  // same shapes and dtypes; the inputs are not modified. Collective.
  std::vector<Tensor> reduce(const std::vector<Tensor>& grads);
  std::vector<Tensor> operator()(const std::vector<Tensor>& grads) { return reduce(grads); }

  Communicator& group() const { return *group_; }
  int levels() const { return static_cast<int>(level_groups_.size()); }  // log2(group size)

 private:
  // Sends ns floats from `send` to `partner` and receives nr floats into
  // `recv`; the lower rank of the pair sends first.
  void exchange(const float* send, size_t ns, float* recv, size_t nr, int partner, int tag);

  std::shared_ptr<Communicator> group_;
  // level_groups_[l]: this rank's block of 2^(l+1) ranks (the last is group_).
  std::vector<std::shared_ptr<Communicator>> level_groups_;
  std::vector<size_t> offset_;  // element offset of each tensor in flat_, and N at the end
  std::vector<float> flat_;     // every gradient as float32, one after the other
  std::vector<float> recv_;     // the partner's half of the current slice
  std::vector<double> dots_;    // per tensor: a.b, |a|^2, |b|^2
};

// One-shot form: every grads[i] is replaced by a new tensor holding the AdaSum
// over `group`'s ranks (the old tensors are not modified). Builds an AdaSum,
// sub-communicators included, on each call: keep an AdaSum for repeated use.
void adasum_allreduce(std::vector<Tensor>& grads, Communicator& group);

// MindSpore's AdaSumByGradWrapCell: wraps an optimizer so that each step first
// combines the gradients of its parameters across the group's ranks with
// AdaSum, then runs the optimizer (recorded as "optimizer step" on the timeline,
// after "adasum"). Throws at construction like AdaSum.
// A parameter without a gradient counts as zeros (every rank must keep the
// same layout) and gets the combined gradient, since Adasum(0, b) = b.
class AdaSumByGradWrapCell {
 public:
  explicit AdaSumByGradWrapCell(optim::Optimizer& optimizer,
                                std::shared_ptr<Communicator> group = nullptr);

  // Every parameter's .grad() becomes the AdaSum over ranks (set_grad); then
  // optimizer.step(). Collective.
  void step();
  // The reference's construct(grads): `grads` (one per parameter, same
  // shapes) are combined, set as the parameters' gradients, and the optimizer
  // steps. Throws minidl::Error naming the index and both shapes on a mismatch.
  void operator()(const std::vector<Tensor>& grads);
  void zero_grad() { optimizer_.zero_grad(); }

  optim::Optimizer& optimizer() const { return optimizer_; }
  AdaSum& adasum() { return adasum_; }

 private:
  optim::Optimizer& optimizer_;
  AdaSum adasum_;
};

}  // namespace minidl::parallel
