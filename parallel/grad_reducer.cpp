#include "parallel/grad_reducer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "parallel/init.h"

namespace minidl::parallel {

std::vector<std::vector<size_t>> plan_buckets(const std::vector<Tensor>& tensors,
                                              size_t bucket_bytes) {
  std::vector<std::vector<size_t>> buckets;
  size_t bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    size_t b = static_cast<size_t>(tensors[i].numel()) * sizeof(float);
    if (buckets.empty() || bytes + b > bucket_bytes) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(i);
    bytes += b;
  }
  return buckets;
}

namespace {
// A bucket is allreduced in pieces of at most 1 MiB: each is packed just
// before its allreduce and unpacked just after, so it is still in cache (L2)
// for MPI and for the unpacking. Pieces under 64 KiB cost latency rather than
// bandwidth: they are started non-blocking and finished at the end, so their
// latencies overlap (Iallreduce costs 1.5-2x a blocking call on large ones).
constexpr size_t kPieceElements = (size_t{1} << 20) / sizeof(float);
constexpr size_t kSmallPieceElements = (size_t{64} << 10) / sizeof(float);
}  // namespace

namespace detail {

bool grad_is_private(const Tensor& param) {
  const std::shared_ptr<TensorImpl>& g = param.impl().grad;
  return g && g.use_count() == 1 && g->device == Device::CPU && g->storage &&
         g->storage.use_count() == 1 && g->storage->owned;
}

namespace {
template <class T, class Convert>
void load(const void* src, size_t begin, size_t n, float* dst, Convert convert) {
  const T* s = static_cast<const T*>(src) + begin;
  for (size_t k = 0; k < n; ++k) dst[k] = convert(s[k]);
}

// dst[k] = convert(src[k] / divisor), one pass (src may be dst). For a power-of-two
// divisor, src[k] * (1 / divisor) is the same number (both round the same exact
// quotient once) and several times cheaper than a division.
template <class T, class Convert>
void store(const float* src, void* out, size_t begin, size_t n, float divisor, Convert convert) {
  T* dst = static_cast<T*>(out) + begin;
  int exponent = 0;
  if (divisor == 1.0f) {
    for (size_t k = 0; k < n; ++k) dst[k] = convert(src[k]);
  } else if (std::frexp(divisor, &exponent) == 0.5f) {
    const float inverse = 1.0f / divisor;
    for (size_t k = 0; k < n; ++k) dst[k] = convert(src[k] * inverse);
  } else {
    for (size_t k = 0; k < n; ++k) dst[k] = convert(src[k] / divisor);
  }
}
}  // namespace

void to_float32(const Tensor& g, size_t begin, size_t n, float* dst) {
  if (!g.defined()) {
    std::memset(dst, 0, n * sizeof(float));
    return;
  }
  const void* p = g.raw_data();
  switch (g.dtype()) {
    case kFloat32:
      if (static_cast<const float*>(p) + begin != dst)
        std::memcpy(dst, static_cast<const float*>(p) + begin, n * sizeof(float));
      break;
    case kFloat16: load<Half>(p, begin, n, dst, [](Half x) { return half_to_float(x); }); break;
    case kInt32: load<int32_t>(p, begin, n, dst, [](int32_t x) { return float(x); }); break;
    case kInt64: load<int64_t>(p, begin, n, dst, [](int64_t x) { return float(x); }); break;
  }
}

void from_float32(const float* src, const Tensor& out, size_t begin, size_t n, float divisor) {
  void* p = out.raw_data();
  switch (out.dtype()) {
    case kFloat32:
      if (divisor != 1.0f)
        store<float>(src, p, begin, n, divisor, [](float x) { return x; });
      else if (static_cast<float*>(p) + begin != src)
        std::memcpy(static_cast<float*>(p) + begin, src, n * sizeof(float));
      break;
    case kFloat16:
      store<Half>(src, p, begin, n, divisor, [](float x) { return float_to_half(x); });
      break;
    case kInt32:
      store<int32_t>(src, p, begin, n, divisor, [](float x) { return static_cast<int32_t>(x); });
      break;
    case kInt64:
      store<int64_t>(src, p, begin, n, divisor, [](float x) { return static_cast<int64_t>(x); });
      break;
  }
}

}  // namespace detail

DistributedGradReducer::DistributedGradReducer(std::vector<Tensor> parameters, bool mean,
                                               std::optional<int> degree, size_t bucket_bytes,
                                               std::shared_ptr<Communicator> group)
    : params_(std::move(parameters)), mean_(mean), bucket_bytes_(bucket_bytes),
      group_(group ? std::move(group) : world_ptr()) {
  if (degree && *degree <= 0)
    throw std::invalid_argument(cat("DistributedGradReducer: degree must be > 0, got ", *degree));
  degree_ = degree ? *degree : group_->size();
  for (size_t i = 0; i < params_.size(); ++i)
    MINIDL_CHECK(params_[i].defined(), "DistributedGradReducer: parameter ", i, " is undefined");
  buckets_ = plan_buckets(params_, bucket_bytes_);
  offset_.resize(params_.size());
  for (const auto& bucket : buckets_) {
    size_t n = 0;
    for (size_t i : bucket) {
      offset_[i] = n;
      n += static_cast<size_t>(params_[i].numel());
    }
    for (size_t s = 0; s < n; s += kPieceElements)
      if (std::min(n - s, kPieceElements) < kSmallPieceElements)
        small_elements_ += std::min(n - s, kPieceElements);
  }
}

DistributedGradReducer::DistributedGradReducer(std::vector<Tensor> parameters,
                                               const GradReducerOptions& o)
    : DistributedGradReducer(std::move(parameters), o.mean, o.degree, o.bucket_bytes, o.group) {}

bool DistributedGradReducer::check(const std::vector<Tensor>& grads) const {
  MINIDL_CHECK(grads.size() == params_.size(), "DistributedGradReducer: got ", grads.size(),
               " gradients for ", params_.size(), " parameters");
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) continue;
    MINIDL_CHECK(grads[i].shape() == params_[i].shape(), "DistributedGradReducer: gradient ", i,
                 " has shape ", grads[i].shape(), " but parameter ", i, " has shape ",
                 params_[i].shape());
    MINIDL_CHECK(grads[i].device() == Device::CPU, "DistributedGradReducer: gradient ", i,
                 " is not on the CPU");
  }
  MINIDL_CHECK(group_->rank() >= 0, "DistributedGradReducer: this process is not a member of "
               "the reducer's group (from new_group); only its members may reduce");
  return !(group_->size() == 1 && (!mean_ || degree_ == 1));
}

std::vector<Tensor> DistributedGradReducer::run(const std::vector<Tensor>& grads,
                                                const std::vector<char>& in_place) {
  const float divisor = mean_ ? static_cast<float>(degree_) : 1.0f;
  std::vector<Tensor> out(grads.size());
  for (size_t i = 0; i < grads.size(); ++i)
    out[i] = in_place[i] ? grads[i]
                         : Tensor::empty(params_[i].shape(),
                                         grads[i].defined() ? grads[i].dtype() : params_[i].dtype());
  struct Piece {
    const std::vector<size_t>* bucket;
    size_t begin, end;  // in the bucket's layout
    float* data;
    std::unique_ptr<Work> work;  // small pieces: in flight until the end
  };
  // Calls f(i, begin, n, at): elements [begin, begin + n) of tensor i lie at `at`.
  auto each_part = [&](const Piece& pc, auto f) {
    for (size_t i : *pc.bucket) {
      const size_t lo = std::max(pc.begin, offset_[i]);
      const size_t hi = std::min(pc.end, offset_[i] + static_cast<size_t>(params_[i].numel()));
      if (lo < hi) f(i, lo - offset_[i], hi - lo, pc.data + (lo - pc.begin));
    }
  };
  auto unpack = [&](const Piece& pc) {
    each_part(pc, [&](size_t i, size_t begin, size_t n, const float* at) {
      detail::from_float32(at, out[i], begin, n, divisor);
    });
  };
  if (small_.size() < small_elements_) small_.resize(small_elements_);
  size_t small_used = 0;
  std::vector<Piece> in_flight;
  for (const auto& bucket : buckets_) {
    const size_t last = bucket.back();
    const size_t total = offset_[last] + static_cast<size_t>(params_[last].numel());
    // A bucket of one float32 result is reduced where the result lies: no
    // packing, and the unpacking is only the division (if any).
    float* const direct =
        bucket.size() == 1 && out[last].dtype() == kFloat32 ? out[last].data<float>() : nullptr;
    for (size_t s = 0; s < total; s += kPieceElements) {
      Piece pc{&bucket, s, std::min(total, s + kPieceElements), nullptr, nullptr};
      const bool small = pc.end - pc.begin < kSmallPieceElements;
      if (direct) {
        pc.data = direct + s;
      } else if (small) {
        pc.data = small_.data() + small_used;
        small_used += pc.end - pc.begin;
      } else {
        if (flat_.size() < pc.end - pc.begin) flat_.resize(pc.end - pc.begin);
        pc.data = flat_.data();
      }
      each_part(pc, [&](size_t i, size_t begin, size_t n, float* at) {
        detail::to_float32(grads[i], begin, n, at);
      });
      if (small) {
        pc.work = group_->allreduce_async(pc.data, pc.end - pc.begin, ElemType::Float32,
                                          ReduceOp::Sum);
        in_flight.push_back(std::move(pc));
      } else {
        group_->allreduce(pc.data, pc.end - pc.begin, ElemType::Float32, ReduceOp::Sum);
        unpack(pc);
      }
    }
  }
  for (Piece& pc : in_flight) {
    pc.work->wait();
    unpack(pc);
  }
  return out;
}

std::vector<Tensor> DistributedGradReducer::reduce(const std::vector<Tensor>& grads) {
  if (!check(grads)) return grads;
  return run(grads, std::vector<char>(grads.size(), 0));
}

void DistributedGradReducer::reduce_grads() {
  std::vector<char> in_place(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) in_place[i] = detail::grad_is_private(params_[i]);
  std::vector<Tensor> grads;
  grads.reserve(params_.size());
  for (const Tensor& p : params_) grads.push_back(p.grad());
  if (!check(grads)) return;
  std::vector<Tensor> reduced = run(grads, in_place);
  for (size_t i = 0; i < params_.size(); ++i)
    if (!reduced[i].same(grads[i])) params_[i].set_grad(reduced[i]);
}

}  // namespace minidl::parallel
