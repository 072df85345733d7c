#include "data/transforms.h"

#include <cstring>

namespace minidl::data {
namespace {

// True when nothing else can see x's values, so a transform may overwrite them
// (a pipeline's map on a temporary dataset then needs no second copy).
bool sole_owner(const Tensor& x) {
  return x.impl_ptr().use_count() == 1 && x.impl().storage.use_count() == 1 &&
         x.impl().storage->owned && !x.requires_grad() && x.impl().grad_fn == nullptr;
}

}  // namespace

Tensor Rescale::operator()(Tensor x) const {
  MINIDL_CHECK(x.defined(), "Rescale: undefined data tensor");
  if (x.dtype() != kFloat32) x = x.to(kFloat32).detach();
  Tensor out = sole_owner(x) ? x : Tensor::empty(x.shape());
  const float* in = x.data<float>();
  float* o = out.data<float>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) o[i] = static_cast<float>(in[i] * scale + shift);
  return out;
}

Normalize::Normalize(std::vector<double> mean_, std::vector<double> std_)
    : mean(std::move(mean_)), std(std::move(std_)) {
  MINIDL_CHECK(!mean.empty() && mean.size() == std.size(), "Normalize: mean and std need the same ",
               "non-zero number of channels, got ", mean.size(), " means and ", std.size(),
               " stds");
  for (size_t c = 0; c < std.size(); ++c)
    MINIDL_CHECK(std[c] != 0, "Normalize: std must be non-zero, got 0 for channel ", c);
}

Tensor Normalize::operator()(Tensor x) const {
  MINIDL_CHECK(x.defined(), "Normalize: undefined data tensor");
  const int64_t channels = static_cast<int64_t>(mean.size());
  if (channels > 1)
    MINIDL_CHECK(x.dim() >= 2 && x.size(1) == channels, "Normalize: ", channels,
                 " channel means and stds need data [N, ", channels,
                 ", ...] (channels first), got ", x.shape());
  if (x.dtype() != kFloat32) x = x.to(kFloat32).detach();
  Tensor out = sole_owner(x) ? x : Tensor::empty(x.shape());
  const float* in = x.data<float>();
  float* o = out.data<float>();
  // Samples are [C, inner]: one (mean, std) per run of `inner` values.
  const int64_t runs = channels > 1 ? x.size(0) * channels : 1;
  const int64_t inner = runs ? x.numel() / runs : 0;
  for (int64_t r = 0; r < runs; ++r) {
    const double m = mean[r % channels], inv = 1.0 / std[r % channels];
    for (int64_t i = r * inner; i < (r + 1) * inner; ++i)
      o[i] = static_cast<float>((in[i] - m) * inv);
  }
  return out;
}

namespace {
template <size_t bytes>
void hwc_to_chw(const char* in, char* out, int64_t n, int64_t h, int64_t w, int64_t c) {
  for (int64_t s = 0; s < n; ++s, in += h * w * c * bytes, out += h * w * c * bytes)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t k = 0; k < c; ++k)
          std::memcpy(out + ((k * h + y) * w + x) * bytes, in + ((y * w + x) * c + k) * bytes,
                      bytes);
}
}  // namespace

Tensor HWC2CHW::operator()(Tensor x) const {
  MINIDL_CHECK(x.defined() && x.dim() == 4, "HWC2CHW: expected data [N, H, W, C], got ",
               x.defined() ? to_string(x.shape()) : "an undefined tensor");
  const int64_t n = x.size(0), h = x.size(1), w = x.size(2), c = x.size(3);
  Tensor out = Tensor::empty({n, c, h, w}, x.dtype());
  const char* in = static_cast<const char*>(x.raw_data());
  char* o = static_cast<char*>(out.raw_data());
  switch (dtype_size(x.dtype())) {
    case 2:
      hwc_to_chw<2>(in, o, n, h, w, c);
      break;
    case 4:
      hwc_to_chw<4>(in, o, n, h, w, c);
      break;
    case 8:
      hwc_to_chw<8>(in, o, n, h, w, c);
      break;
  }
  return out;
}

Tensor TypeCast::operator()(Tensor x) const {
  MINIDL_CHECK(x.defined(), "TypeCast: undefined data tensor");
  return x.to(dtype).detach();
}

}  // namespace minidl::data
