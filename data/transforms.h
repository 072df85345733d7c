// Transforms for Dataset::map: each maps the whole data tensor [N, ...] (all N
// samples at once, since the dataset lives in memory) to a new one with the
// same N. Any callable Tensor(Tensor) is a transform; these are the usual ones,
// named as in MindSpore's vision transforms.
//
// Random augmentations are BatchTransforms instead (Dataset::augment): the
// pipeline applies them to each batch as it gathers it, anew every epoch.
#pragma once
#include <array>
#include <functional>
#include <span>
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

// A transform of one batch, for Dataset::augment: data [B, ...] of the batch,
// the epoch (from 0), and each row's sample index (its row in
// Dataset::data()) -> the new data [B, ...]. Its random draws must depend on
// (epoch, index) alone, never on the batch or on call order: then a sample's
// draw does not change with the batch size, the prefetch thread's timing or
// the number of ranks, and a resumed epoch draws it again. It may run on the
// prefetch thread and on the caller's at once, so it keeps no mutable state.
using BatchTransform =
    std::function<Tensor(Tensor batch, int64_t epoch, std::span<const int64_t> index)>;

// Random translation of images: data float32 [B, ..., H, W] (e.g. [B, C, H, W]);
// every image of sample `index` in epoch `epoch` moves by the same (dy, dx),
// each drawn uniformly from -max_shift..max_shift as a hash of (seed, epoch,
// index):
//   out[y][x] = in[y + dy][x + dx], or `fill` where that falls outside.
// This is torchvision's RandomCrop(size=(H, W), padding=max_shift, fill):
// cropping the padded image at (max_shift + dy, max_shift + dx). Give `fill`
// in the data's units, e.g. -mean / std for a black border after Normalize.
// Throws for max_shift outside 0..1024, and for data that is not float32 with
// at least 3 dimensions.
struct RandomShift {
  RandomShift(int64_t max_shift, uint64_t seed, double fill = 0);
  Tensor operator()(Tensor batch, int64_t epoch, std::span<const int64_t> index) const;
  // The (dy, dx) that sample `index` gets in epoch `epoch`.
  std::array<int64_t, 2> shift(int64_t epoch, int64_t index) const;
  int64_t max_shift;
  uint64_t seed;
  double fill;
};

}  // namespace minidl::data
