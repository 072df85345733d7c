// Transforms for Dataset::map: each maps the whole data tensor [N, ...] (all N
// samples at once, since the dataset lives in memory) to a new one with the
// same N. Any callable Tensor(Tensor) is a transform; these are the usual ones,
// named as in MindSpore's vision transforms.
#pragma once
#include <functional>
#include <vector>

#include "framework/tensor.h"

namespace minidl::data {

using Transform = std::function<Tensor(Tensor)>;

// out = x * scale + shift, in float32 (MindSpore's Rescale(rescale, shift)):
// Rescale(1.0 / 255, 0) maps MNIST's 0..255 to [0, 1].
struct Rescale {
  Rescale(double scale, double shift) : scale(scale), shift(shift) {}
  Tensor operator()(Tensor x) const;
  double scale, shift;
};

// out = (x - mean) / std, in float32. One (mean, std) applies to every value;
// lists of C means and stds apply per channel to x [N, C, ...] (channels first,
// so after HWC2CHW). Throws for a zero std, lists of different or zero length,
// or a channel count that does not match x.
struct Normalize {
  Normalize(double mean, double std)
      : Normalize(std::vector<double>{mean}, std::vector<double>{std}) {}
  Normalize(std::vector<double> mean, std::vector<double> std);
  Tensor operator()(Tensor x) const;
  std::vector<double> mean, std;
};

// [N, H, W, C] -> [N, C, H, W], any dtype. Throws for x that is not 4-D.
struct HWC2CHW {
  Tensor operator()(Tensor x) const;
};

// Casts the data to `dtype` (e.g. kFloat16 to halve its memory).
struct TypeCast {
  explicit TypeCast(DType dtype) : dtype(dtype) {}
  Tensor operator()(Tensor x) const;
  DType dtype;
};

}  // namespace minidl::data
