#include "nn/embedding.h"

#include "framework/cuda_graph.h"
#include "framework/ops.h"
#include "nn/init.h"

namespace minidl::nn {
namespace {

std::optional<int64_t> checked_padding(std::optional<int64_t> idx, int64_t num) {
  if (!idx) return idx;
  MINIDL_CHECK(*idx >= -num && *idx < num, "Embedding(", num, "): padding_idx ", *idx,
               " is outside [", -num, ", ", num, ")");
  return *idx < 0 ? *idx + num : *idx;
}

}  // namespace

Embedding::Embedding(int64_t num, int64_t dim, std::optional<int64_t> pad)
    : num_embeddings(num), embedding_dim(dim), padding_idx(checked_padding(pad, num)) {
  MINIDL_CHECK(num > 0 && dim > 0,
               "Embedding: expected positive num_embeddings and embedding_dim, got ", num, " and ",
               dim);
  weight = Tensor::empty({num, dim});
  init::normal(/*std=*/1)(weight, init::fans_of(weight.shape()));
  if (padding_idx) weight.slice(*padding_idx, *padding_idx + 1).fill_(0);
  register_parameter("weight", weight);
}

std::shared_ptr<Embedding> Embedding::from_pretrained(const Tensor& embeddings, bool freeze,
                                                      std::optional<int64_t> padding_idx) {
  MINIDL_CHECK(embeddings.defined() && embeddings.dim() == 2,
               "Embedding::from_pretrained: expected embeddings [NUM, DIM], got ",
               embeddings.defined() ? to_string(embeddings.shape()) : std::string("undefined"));
  auto table = std::make_shared<Embedding>(embeddings.size(0), embeddings.size(1), padding_idx);
  {
    NoGradGuard no_grad;
    table->weight.copy_(embeddings.to(table->weight.device()));  // the padding row as given
  }
  table->weight.requires_grad_(!freeze);
  return table;
}

// ids [...] -> [..., DIM]
Tensor Embedding::forward(const Tensor& ids) {
  MINIDL_CHECK(ids.dtype() == kInt32 || ids.dtype() == kInt64, "Embedding(", num_embeddings, ", ",
               embedding_dim, "): expected ids of dtype int32 or int64, got ",
               dtype_name(ids.dtype()), " of shape ", ids.shape());
  const Tensor flat = ids.reshape({-1});
  if (!cuda::is_capturing()) {  // a capture cannot read back (the header says what happens)
    const std::vector<int64_t> host = flat.cpu().to(kInt64).to_vector<int64_t>();
    for (size_t i = 0; i < host.size(); ++i)
      MINIDL_CHECK(host[i] >= 0 && host[i] < num_embeddings, "Embedding(", num_embeddings, ", ",
                   embedding_dim, "): id ", host[i], " at flat position ", i, " of ids ",
                   ids.shape(), " is outside [0, ", num_embeddings, ")");
  }
  Shape out_shape = ids.shape();
  out_shape.push_back(embedding_dim);
  Tensor rows = index_select(weight, 0, flat);  // [N, DIM]
  if (padding_idx) {
    // The padding row's value comes through the detached weight: no gradient.
    const Tensor keep = ne(flat, static_cast<double>(*padding_idx));  // float32 0 or 1
    rows = where(keep.reshape({flat.numel(), 1}), rows, index_select(weight.detach(), 0, flat));
  }
  return rows.reshape(out_shape);
}

}  // namespace minidl::nn
