#include "parallel/adasum.h"

#include <algorithm>

#include "parallel/init.h"
#include "parallel/timeline.h"

namespace minidl::parallel {

AdaSum::AdaSum(std::shared_ptr<Communicator> group)
    : group_(group ? std::move(group) : world_ptr()) {
  const int p = group_->size();
  MINIDL_CHECK(group_->rank() >= 0, "AdaSum: this process is not a member of the group (from "
               "new_group) of ", p, " ranks; only its members may build an AdaSum");
  MINIDL_CHECK(p >= 2, "AdaSum: needs a distributed job, but the group has 1 rank; start the "
               "program under mpirun (e.g. mpirun -np 2, or --nprocs 2 in the examples) with a "
               "power-of-two number of ranks");
  MINIDL_CHECK((p & (p - 1)) == 0, "AdaSum: the number of ranks must be a power of two "
               "(2, 4, 8, ...), got ", p);
  // Level l merges blocks of 2^l ranks into blocks of 2^(l+1): every rank
  // takes part in making every block's communicator (split is collective).
  for (int block = 2; block < p; block *= 2) {
    std::shared_ptr<Communicator> mine;
    for (int first = 0; first < p; first += block) {
      std::vector<int> ranks(block);
      for (int i = 0; i < block; ++i) ranks[i] = first + i;
      auto c = group_->split(ranks);
      if (c->rank() >= 0) mine = std::move(c);
    }
    level_groups_.push_back(std::move(mine));
  }
  level_groups_.push_back(group_);
}

void AdaSum::exchange(const float* send, size_t ns, float* recv, size_t nr, int partner,
                      int tag) {
  if (group_->rank() < partner) {
    group_->send(send, ns * sizeof(float), partner, tag);
    group_->recv(recv, nr * sizeof(float), partner, tag);
  } else {
    group_->recv(recv, nr * sizeof(float), partner, tag);
    group_->send(send, ns * sizeof(float), partner, tag);
  }
}

namespace {

// a, b [n] -> out += {a.b, |a|^2, |b|^2}, in double.
void accumulate_dots(const float* a, const float* b, size_t n, double* out) {
  double ab = 0, aa = 0, bb = 0;
#pragma omp simd reduction(+ : ab, aa, bb)
  for (size_t i = 0; i < n; ++i) {
    const double x = a[i], y = b[i];
    ab += x * y;
    aa += x * x;
    bb += y * y;
  }
  out[0] += ab;
  out[1] += aa;
  out[2] += bb;
}

// out[i] = ca a[i] + cb b[i] for i < n, in double, rounded once.
void combine(const float* a, const float* b, double ca, double cb, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(ca * a[i] + cb * b[i]);
}

}  // namespace

std::vector<Tensor> AdaSum::reduce(const std::vector<Tensor>& grads) {
  const size_t t_count = grads.size();
  offset_.assign(1, 0);
  for (size_t i = 0; i < t_count; ++i) {
    const Tensor& g = grads[i];
    MINIDL_CHECK(g.defined(), "AdaSum: gradient ", i, " is undefined");
    MINIDL_CHECK(g.dtype() == kFloat32 || g.dtype() == kFloat16, "AdaSum: gradient ", i, " ",
                 g.shape(), " has dtype ", dtype_name(g.dtype()), "; expected float32 or float16");
    offset_.push_back(offset_.back() + static_cast<size_t>(g.numel()));
  }
  const size_t n = offset_.back();
  flat_.resize(n);
  TimelineScope scope("adasum", "communication",
                      {{"tensors", static_cast<int64_t>(grads.size())},
                       {"bytes", static_cast<int64_t>(n * sizeof(float))}});
  recv_.resize((n + 1) / 2);
  dots_.resize(3 * t_count);
  // Gradient i as float32 in flat_ (a device's gradients are copied to the host here).
  auto in_flat = [&](size_t i) {
    return Tensor::from_blob(flat_.data() + offset_[i], grads[i].shape(), kFloat32, /*copy=*/false);
  };
  for (size_t i = 0; i < t_count; ++i) in_flat(i).copy_(grads[i]);

  // 1. Reduce-scatter: slice[l] is what this rank holds before level l.
  const int rank = group_->rank(), k = levels();
  std::vector<std::pair<size_t, size_t>> slice{{0, n}};
  for (int l = 0; l < k; ++l) {
    // A collective of the level's block of 2^(l+1) ranks (the dots are summed over it).
    auto level_scope = TimelineScope::collective(
        [&] { return "adasum level " + std::to_string(l); }, "communication", 2 << l,
        /*group=*/rank & ~((2 << l) - 1), {{"level", l}, {"partner", rank ^ (1 << l)}});
    const auto [lo, hi] = slice.back();
    const size_t mid = lo + (hi - lo) / 2;
    const bool lower = (rank & (1 << l)) == 0;
    const size_t keep_lo = lower ? lo : mid, keep_hi = lower ? mid : hi;
    const size_t give_lo = lower ? mid : lo, give_hi = lower ? hi : mid;
    exchange(flat_.data() + give_lo, give_hi - give_lo, recv_.data(), keep_hi - keep_lo,
             rank ^ (1 << l), /*tag=*/l);
    // a: the lower block's partial result, b: the upper block's.
    float* mine = flat_.data() + keep_lo;
    const float* a = lower ? mine : recv_.data();
    const float* b = lower ? recv_.data() : mine;

    // Tensors [first, last) overlap [keep_lo, keep_hi).
    const size_t first = std::upper_bound(offset_.begin(), offset_.end(), keep_lo) - offset_.begin() - 1;
    std::fill(dots_.begin(), dots_.end(), 0.0);
    size_t last = first;
    for (; last < t_count && offset_[last] < keep_hi; ++last) {
      const size_t s = std::max(offset_[last], keep_lo), e = std::min(offset_[last + 1], keep_hi);
      accumulate_dots(a + (s - keep_lo), b + (s - keep_lo), e - s, &dots_[3 * last]);
    }
    if (t_count > 0) level_groups_[l]->allreduce(dots_.data(), dots_.size());
    for (size_t t = first; t < last; ++t) {
      const double ab = dots_[3 * t], aa = dots_[3 * t + 1], bb = dots_[3 * t + 2];
      const double ca = aa > 0 ? 1 - ab / (2 * aa) : 1, cb = bb > 0 ? 1 - ab / (2 * bb) : 1;
      const size_t s = std::max(offset_[t], keep_lo), e = std::min(offset_[t + 1], keep_hi);
      combine(a + (s - keep_lo), b + (s - keep_lo), ca, cb, e - s, mine + (s - keep_lo));
    }
    slice.emplace_back(keep_lo, keep_hi);
  }

  // 2. Allgather: undo the halving, swapping halves with the same partners.
  for (int l = k - 1; l >= 0; --l) {
    auto gather_scope = TimelineScope::collective(  // a pair's exchange
        [&] { return "adasum gather " + std::to_string(l); }, "communication", 2,
        /*group=*/std::min(rank, rank ^ (1 << l)), {{"level", l}, {"partner", rank ^ (1 << l)}});
    const auto [lo, hi] = slice[l];
    const auto [keep_lo, keep_hi] = slice[l + 1];
    const size_t give_lo = keep_lo == lo ? keep_hi : lo, give_hi = keep_lo == lo ? hi : keep_lo;
    exchange(flat_.data() + keep_lo, keep_hi - keep_lo, flat_.data() + give_lo,
             give_hi - give_lo, rank ^ (1 << l), /*tag=*/k + l);
  }

  std::vector<Tensor> out(t_count);
  for (size_t i = 0; i < t_count; ++i) {
    out[i] = Tensor::empty(grads[i].shape(), grads[i].dtype(), grads[i].device());
    out[i].copy_(in_flat(i));  // cast back to the gradient's dtype and device
  }
  return out;
}

void adasum_allreduce(std::vector<Tensor>& grads, Communicator& group) {
  // A non-owning handle: the caller keeps `group` alive for the call.
  AdaSum op(std::shared_ptr<Communicator>(std::shared_ptr<Communicator>(), &group));
  grads = op.reduce(grads);
}

AdaSumByGradWrapCell::AdaSumByGradWrapCell(optim::Optimizer& optimizer,
                                           std::shared_ptr<Communicator> group)
    : optimizer_(optimizer), adasum_(std::move(group)) {}

void AdaSumByGradWrapCell::step() {
  std::vector<Tensor> grads;
  for (const Tensor& p : optimizer_.parameters()) grads.push_back(p.grad());
  (*this)(grads);
}

void AdaSumByGradWrapCell::operator()(const std::vector<Tensor>& grads) {
  const std::vector<Tensor>& params = optimizer_.parameters();
  MINIDL_CHECK(grads.size() == params.size(), "AdaSumByGradWrapCell: got ", grads.size(),
               " gradients for ", params.size(), " parameters");
  std::vector<Tensor> filled(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) {
      filled[i] = Tensor::zeros(params[i].shape(), kFloat32, params[i].device());
      continue;
    }
    MINIDL_CHECK(grads[i].shape() == params[i].shape(), "AdaSumByGradWrapCell: gradient ", i,
                 " has shape ", grads[i].shape(), " but parameter ", i, " has shape ",
                 params[i].shape());
    filled[i] = grads[i];
  }
  std::vector<Tensor> combined = adasum_.reduce(filled);
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor p = params[i];
    p.set_grad(combined[i]);
  }
  TimelineScope scope("optimizer step", "compute");
  optimizer_.step();
}

}  // namespace minidl::parallel
