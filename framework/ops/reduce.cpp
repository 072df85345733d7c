// Reductions over any set of dims: sum, mean, max (and argmax, no grad).
#include <algorithm>

#include "framework/ops.h"
#include "framework/ops/util.h"

namespace minidl {
namespace {

// Sorted, unique, non-negative dims; empty means all.
std::vector<int64_t> norm_dims(const Tensor& x, std::vector<int64_t> dims, const char* op) {
  if (dims.empty())
    for (int64_t d = 0; d < x.dim(); ++d) dims.push_back(d);
  for (auto& d : dims) d = normalize_dim(d, x.dim(), op);
  std::sort(dims.begin(), dims.end());
  MINIDL_CHECK(std::adjacent_find(dims.begin(), dims.end()) == dims.end(), op,
               ": a dim appears twice for shape ", x.shape());
  if (x.dim() == 0) dims.clear();  // dim 0 / -1 of a 0-d tensor: nothing to reduce
  return dims;
}

Shape reduced_shape(const Shape& s, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d) {
    bool r = std::binary_search(dims.begin(), dims.end(), d);
    if (!r) out.push_back(s[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

// x viewed as [outer, R, inner] -> [outer, inner] (dims first..last kept as 1)
Tensor reduce_block(const Tensor& x, int64_t first, int64_t last, ReduceOp op) {
  const Shape& s = x.shape();
  int64_t outer = 1, r = 1, inner = 1;
  for (int64_t d = 0; d < first; ++d) outer *= s[d];
  for (int64_t d = first; d <= last; ++d) r *= s[d];
  for (int64_t d = last + 1; d < x.dim(); ++d) inner *= s[d];
  Shape os = s;
  for (int64_t d = first; d <= last; ++d) os[d] = 1;
  Tensor out = empty_like(x, os);
  kernels(x.device()).reduce(op, outer, r, inner, x.data_ptr<float>(), out.data_ptr<float>());
  return out;
}

// Reduces the dims in blocks of adjacent dims, last block first; keeps dims.
Tensor reduce_dims(const Tensor& x, const std::vector<int64_t>& dims, ReduceOp op) {
  Tensor cur = x;
  for (size_t j = dims.size(); j > 0;) {
    size_t i = j - 1;
    while (i > 0 && dims[i - 1] == dims[i] - 1) --i;
    cur = reduce_block(cur, dims[i], dims[j - 1], op);
    j = i;
  }
  return cur;
}

}  // namespace

// x -> x summed over dims
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim) {
  MINIDL_CHECK(is_floating(x.dtype()), "sum: expected a float tensor, got ", dtype_name(x.dtype()));
  if (x.dtype() == kFloat16) return cast(sum(cast(x, kFloat32), dims_in, keepdim), kFloat16);
  auto dims = norm_dims(x, dims_in, "sum");
  Tensor out = reduce_dims(x, dims, ReduceOp::Sum).reshape(reduced_shape(x.shape(), dims, keepdim));
  Shape in_shape = x.shape(), kept = reduced_shape(x.shape(), dims, true);
  return record(out, "sum", {x}, [in_shape, kept](const Tensor& g) {
    return std::vector<Tensor>{add(g.reshape(kept), Tensor::zeros(in_shape, kFloat32, g.device()))};
  });
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim) {
  require_nonempty("mean", x);
  MINIDL_CHECK(is_floating(x.dtype()), "mean: expected a float tensor, got ", dtype_name(x.dtype()));
  // float16: sum and divide in float32 (the count itself may not fit a float16)
  if (x.dtype() == kFloat16) return cast(mean(cast(x, kFloat32), dims_in, keepdim), kFloat16);
  auto dims = norm_dims(x, dims_in, "mean");
  int64_t count = 1;
  for (int64_t d : dims) count *= x.shape()[d];
  return sum(x, dims, keepdim) / static_cast<double>(count);
}

// Gradient flows to every maximal element, split evenly between ties (torch.amax).
Tensor max(const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim) {
  require_nonempty("max", x);
  MINIDL_CHECK(is_floating(x.dtype()), "max: expected a float tensor, got ", dtype_name(x.dtype()));
  if (x.dtype() == kFloat16) return cast(max(cast(x, kFloat32), dims_in, keepdim), kFloat16);
  auto dims = norm_dims(x, dims_in, "max");
  Tensor kept = reduce_dims(x, dims, ReduceOp::Max);
  Tensor out = kept.reshape(reduced_shape(x.shape(), dims, keepdim));
  return record(out, "max", {x}, [x, kept, dims](const Tensor& g) {
    Tensor mask = broadcast_map(x.detach(), kept, "max_backward", BinaryOp::Equal);
    Tensor ties = sum(mask, dims, true);
    return std::vector<Tensor>{mul(mask, div(g.reshape(kept.shape()), ties))};
  });
}

// x [N, C] -> [N] int64
Tensor argmax(const Tensor& x) {
  require_nonempty("argmax", x);
  Tensor xf = x.dtype() == kFloat32 ? x : cast(x.detach(), kFloat32);
  int64_t c = x.size(-1), n = x.numel() / c;
  Shape s = x.shape();
  s.pop_back();
  Tensor out = Tensor::empty(s, kInt64, x.device());
  kernels(x.device()).argmax(n, c, xf.data_ptr<float>(), out.data_ptr<int64_t>());
  return out;
}

}  // namespace minidl
