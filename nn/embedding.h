// Embedding: a lookup table of learned vectors, one row per id.
#pragma once
#include <memory>
#include <optional>

#include "nn/cell.h"

namespace minidl::nn {

// ids [...] (int32 or int64, any shape) -> weight[ids] [..., DIM].
// Parameter: weight [NUM, DIM], initialised N(0, 1) as PyTorch's, with the
// padding row (when padding_idx is given) zeroed. The padding row gets no
// gradient (its value is still read, as in PyTorch). padding_idx may be
// negative (counted from NUM); outside [-NUM, NUM) throws minidl::Error.
// An id outside [0, NUM) throws minidl::Error naming the id and its position
// (the ids are checked on the host: ids on a GPU are copied back first).
// Inside a CUDA graph capture, which cannot read back, they go unchecked:
// the GPU's lookup gives a row of NaN for such an id.
class Embedding : public Cell {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim,
            std::optional<int64_t> padding_idx = std::nullopt);
  // A table holding `embeddings` [NUM, DIM] (copied); freeze: its weight
  // does not require grad (PyTorch's default).
  static std::shared_ptr<Embedding> from_pretrained(
      const Tensor& embeddings, bool freeze = true,
      std::optional<int64_t> padding_idx = std::nullopt);
  using Cell::forward;
  Tensor forward(const Tensor& ids) override;

  const int64_t num_embeddings, embedding_dim;
  const std::optional<int64_t> padding_idx;  // in [0, NUM) once constructed
  Tensor weight;
};

}  // namespace minidl::nn
