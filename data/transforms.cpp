#include "data/transforms.h"

#include <algorithm>
#include <cstring>

#include "framework/random.h"

namespace minidl::data {
namespace {

// True when nothing else can see x's values, so a transform may overwrite them
// (a pipeline's map on a temporary dataset then needs no second copy).
bool sole_owner(const Tensor& x) {
  return x.is_contiguous() && x.impl_ptr().use_count() == 1 && x.impl().storage.use_count() == 1 &&
         x.impl().storage->owned && !x.requires_grad() && x.impl().grad_fn == nullptr;
}

}  // namespace

Tensor Rescale::operator()(Tensor x) const {
  MINIDL_CHECK(x.defined(), "Rescale: undefined data tensor");
  if (x.dtype() != kFloat32) x = x.to(kFloat32).detach();
  Tensor out = sole_owner(x) ? x : Tensor::empty(x.shape());
  const Tensor xc = x.contiguous();
  const float* in = xc.data<float>();
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
  const Tensor xc = x.contiguous();
  const float* in = xc.data<float>();
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
  const Tensor xc = x.contiguous();
  const char* in = static_cast<const char*>(xc.raw_data());
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

RandomShift::RandomShift(int64_t max_shift, uint64_t seed, double fill)
    : max_shift(max_shift), seed(seed), fill(fill) {
  MINIDL_CHECK(max_shift >= 0 && max_shift <= 1024,
               "RandomShift: max_shift must be from 0 to 1024 pixels, got ", max_shift);
}

std::array<int64_t, 2> RandomShift::shift(int64_t epoch, int64_t index) const {
  const uint64_t h = splitmix64(splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(epoch)) ^
                                static_cast<uint64_t>(index));
  const uint64_t span = static_cast<uint64_t>(2 * max_shift + 1);  // the 32-bit halves' bias is < 1e-6
  return {static_cast<int64_t>((h >> 32) % span) - max_shift,
          static_cast<int64_t>((h & 0xFFFFFFFFu) % span) - max_shift};
}

// batch [B, ..., H, W] -> [B, ..., H, W]; each sample's planes shifted by its (dy, dx).
Tensor RandomShift::operator()(Tensor batch, int64_t epoch, std::span<const int64_t> index) const {
  MINIDL_CHECK(batch.defined() && batch.dim() >= 3 && batch.dtype() == kFloat32,
               "RandomShift: expected float32 images [B, ..., H, W] (map Rescale first), got ",
               batch.defined() ? cat(dtype_name(batch.dtype()), " ", batch.shape())
                               : std::string("an undefined tensor"));
  MINIDL_CHECK(static_cast<int64_t>(index.size()) == batch.size(0), "RandomShift: ",
               index.size(), " sample indices for a batch of ", batch.size(0));
  const int64_t b = batch.size(0), h = batch.size(-2), w = batch.size(-1);
  const int64_t planes = b ? batch.numel() / (b * h * w) : 0;  // per sample
  Tensor out = Tensor::empty(batch.shape());
  const Tensor bc = batch.contiguous();
  const float* in = bc.data<float>();
  float* o = out.data<float>();
  const float f = static_cast<float>(fill);
  for (int64_t s = 0; s < b; ++s) {
    const auto [dy, dx] = shift(epoch, index[s]);
    // Output columns x0..x1 read input columns x0 + dx..x1 + dx; the rest is fill.
    const int64_t x0 = std::clamp<int64_t>(-dx, 0, w), x1 = std::clamp<int64_t>(w - dx, x0, w);
    for (int64_t p = 0; p < planes; ++p, in += h * w, o += h * w)
      for (int64_t y = 0; y < h; ++y) {
        float* row = o + y * w;
        if (y + dy < 0 || y + dy >= h) {
          std::fill(row, row + w, f);
          continue;
        }
        std::fill(row, row + x0, f);
        if (x1 > x0) std::copy(in + (y + dy) * w + x0 + dx, in + (y + dy) * w + x1 + dx, row + x0);
        std::fill(row + x1, row + w, f);
      }
  }
  return out;
}

}  // namespace minidl::data
