#include "parallel/grad_bucket.h"

#include <bit>
#include <cstring>

#include "framework/autograd.h"

namespace minidl::parallel {

namespace {

// dst [n] = g as float32 times s (zeros for an undefined g): host loops
void to_float32(const Tensor& g, float* dst, size_t n, float s) {
  if (!g.defined()) {
    std::memset(dst, 0, n * sizeof(float));
    return;
  }
  const void* p = g.raw_data();
  auto load = [&](auto convert, const auto* src) {
    for (size_t k = 0; k < n; ++k) dst[k] = convert(src[k]) * s;
  };
  switch (g.dtype()) {
    case kFloat32:
      if (s == 1.0f) {
        std::memcpy(dst, p, n * sizeof(float));
      } else {
        const float* src = static_cast<const float*>(p);
#pragma omp simd
        for (size_t k = 0; k < n; ++k) dst[k] = src[k] * s;
      }
      break;
    case kFloat16:
      load([](Half x) { return half_to_float(x); }, static_cast<const Half*>(p));
      break;
    case kInt32:
      load([](int32_t x) { return float(x); }, static_cast<const int32_t*>(p));
      break;
    case kInt64:
      load([](int64_t x) { return float(x); }, static_cast<const int64_t*>(p));
      break;
  }
}

// out = src [out.numel()] cast to out's dtype
void from_float32(const float* src, const Tensor& out) {
  const size_t n = static_cast<size_t>(out.numel());
  void* p = out.raw_data();
  auto store = [&](auto convert, auto* dst) {
    for (size_t k = 0; k < n; ++k) dst[k] = convert(src[k]);
  };
  switch (out.dtype()) {
    case kFloat32:
      std::memcpy(p, src, n * sizeof(float));
      break;
    case kFloat16:
      store([](float x) { return float_to_half(x); }, static_cast<Half*>(p));
      break;
    case kInt32:
      store([](float x) { return static_cast<int32_t>(x); }, static_cast<int32_t*>(p));
      break;
    case kInt64:
      store([](float x) { return static_cast<int64_t>(x); }, static_cast<int64_t*>(p));
      break;
  }
}

// x [n] *= s
void scale(float* x, size_t n, float s) {
  if (s == 1.0f) return;
#pragma omp simd
  for (size_t k = 0; k < n; ++k) x[k] *= s;
}

// x [n] /= divisor
void divide(float* x, size_t n, float divisor) {
  if (divisor == 1.0f) return;
#pragma omp simd
  for (size_t k = 0; k < n; ++k) x[k] /= divisor;
}

// The same on a device, as tensor ops (the same float32 operations as the
// host loops above, so the same bits).
void from_float32(const Tensor& src, Tensor out) {
  if (out.device() == Device::CPU) return from_float32(src.data<float>(), out);
  out.copy_(src);  // casts to out's dtype
}
void divide(Tensor x, float divisor) {
  NoGradGuard no_grad;
  if (x.device() == Device::CPU)
    return divide(x.data<float>(), static_cast<size_t>(x.numel()), divisor);
  if (divisor != 1.0f) x.copy_(x / divisor);
}

// Parameter k's part of `flat` as a tensor of its shape (a view).
Tensor part(const Tensor& flat, size_t offset, const Tensor& param) {
  NoGradGuard no_grad;
  const int64_t begin = static_cast<int64_t>(offset);
  return flat.slice(begin, begin + param.numel()).reshape(param.shape());
}

// `param`'s part of the float32 buffer `flat` (from `offset`) becomes g as
// float32 times s, or with `in_place` (it holds the gradient already) is
// multiplied by s. On the CPU the host loops run on the buffer's memory (a
// view per parameter and step would cost more than the loop); on a device,
// tensor ops on a view.
void fill_part(const Tensor& flat, size_t offset, const Tensor& param, const Tensor& g, float s,
               bool in_place) {
  if (flat.device() == Device::CPU) {
    float* f = flat.data<float>() + offset;
    const size_t n = static_cast<size_t>(param.numel());
    return in_place ? scale(f, n, s) : to_float32(g, f, n, s);
  }
  if (in_place && s == 1.0f) return;
  NoGradGuard no_grad;
  Tensor dst = part(flat, offset, param);
  if (in_place) {
    dst.copy_(dst * s);
  } else if (!g.defined()) {
    dst.fill_(0);
  } else {
    MINIDL_CHECK(g.device() == dst.device(), "gradient bucket: a gradient ", g.shape(), " is on ",
                 device_name(g.device()), " but its parameter is on ", device_name(dst.device()));
    const Tensor f = g.detach().to(kFloat32);
    dst.copy_(s == 1.0f ? f : f * s);
  }
}

}  // namespace

MeanSplit mean_split(int degree, int size) {
  if (degree == 2 && size == 2) return {1.0f, ReduceOp::Avg, 1.0f};
  if (std::has_single_bit(static_cast<unsigned>(degree)))
    return {1.0f / degree, ReduceOp::Sum, 1.0f};
  return {1.0f, ReduceOp::Sum, static_cast<float>(degree)};
}

GradBucket::GradBucket(std::vector<Tensor> params) : params_(std::move(params)) {
  for (const Tensor& p : params_) {
    MINIDL_CHECK(p.device() == params_[0].device(), "gradient bucket: parameter ", p.shape(),
                 " is on ", device_name(p.device()), " and parameter ", params_[0].shape(),
                 " on ", device_name(params_[0].device()), "; move the network to one device");
    offsets_.push_back(numel_);
    numel_ += static_cast<size_t>(p.numel());
  }
}

Device GradBucket::device() const { return params_.empty() ? Device::CPU : params_[0].device(); }

bool GradBucket::holds_view(size_t k) const {
  const std::shared_ptr<TensorImpl>& g = params_[k].impl().grad;
  return g && flat_.defined() && g.use_count() == 1 && g->storage == flat_.impl().storage &&
         g->dtype == kFloat32 && g->offset == flat_.impl().offset + offsets_[k] * sizeof(float);
}

Tensor GradBucket::view(size_t k) const { return part(flat_, offsets_[k], params_[k]); }

const Tensor& GradBucket::pack(float s) {
  std::vector<char> in_place(params_.size(), 0);
  long views = 0;
  for (size_t k = 0; k < params_.size(); ++k) {
    in_place[k] = holds_view(k);
    views += in_place[k];
  }
  if (!flat_.defined() || flat_.impl().storage.use_count() != 1 + views) {
    // someone else sees the old one
    flat_ = Tensor::empty({static_cast<int64_t>(numel_)}, kFloat32, device());
    std::fill(in_place.begin(), in_place.end(), 0);
  }
  for (size_t k = 0; k < params_.size(); ++k)
    fill_part(flat_, offsets_[k], params_[k], params_[k].grad(), s, in_place[k]);
  return flat_;
}

void GradBucket::unpack(float divisor) {
  divide(flat_, divisor);
  for (size_t k = 0; k < params_.size(); ++k) {
    if (holds_view(k)) continue;
    Tensor& p = params_[k];
    const std::shared_ptr<TensorImpl>& g = p.impl().grad;
    const DType dtype = g ? g->dtype : p.dtype();
    if (dtype == kFloat32) {
      p.set_grad(view(k));
      continue;
    }
    // Cast back over the gradient itself when nothing else can see it.
    const bool own = g && g.use_count() == 1 && g->storage && g->storage.use_count() == 1 &&
                     g->storage->owned && g->device == p.device();
    Tensor out = own ? p.grad() : Tensor::empty(p.shape(), dtype, p.device());
    from_float32(view(k), out);
    if (!own) p.set_grad(out);
  }
}

Tensor GradBucket::pack_new(const std::vector<Tensor>& grads, float s) const {
  Tensor buffer = Tensor::empty({static_cast<int64_t>(numel_)}, kFloat32, device());
  for (size_t k = 0; k < params_.size(); ++k)
    fill_part(buffer, offsets_[k], params_[k], grads[k], s, /*in_place=*/false);
  return buffer;
}

std::vector<Tensor> GradBucket::unpack_new(const Tensor& buffer, const std::vector<Tensor>& grads,
                                           float divisor) const {
  divide(buffer, divisor);
  std::vector<Tensor> out;
  for (size_t k = 0; k < params_.size(); ++k) {
    const DType dtype = grads[k].defined() ? grads[k].dtype() : params_[k].dtype();
    out.push_back(part(buffer, offsets_[k], params_[k]));
    if (dtype == kFloat32) continue;
    Tensor cast = Tensor::empty(params_[k].shape(), dtype, device());
    from_float32(out.back(), cast);
    out.back() = cast;
  }
  return out;
}

}  // namespace minidl::parallel
