// Reductions over any set of dims: sum, mean, max, min, var, std, logsumexp,
// norm (and argmax, argmin, no grad).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

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

// s as [outer, R, inner]: R the dims first..last
struct Block {
  int64_t outer = 1, r = 1, inner = 1;
};
Block block_of(const Shape& s, int64_t first, int64_t last) {
  Block b;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d)
    (d < first ? b.outer : d <= last ? b.r : b.inner) *= s[d];
  return b;
}

// x viewed as [outer, R, inner] -> [outer, inner] (dims first..last kept as 1)
Tensor reduce_block(const Tensor& x, int64_t first, int64_t last, ReduceOp op) {
  const Shape& s = x.shape();
  const auto [outer, r, inner] = block_of(s, first, last);
  Shape os = s;
  for (int64_t d = first; d <= last; ++d) os[d] = 1;
  Tensor out = empty_like(x, os);
  kernels(x.device()).reduce(op, outer, r, inner, dense(x).data_ptr<float>(), out.data_ptr<float>());
  return out;
}

// x's dims by stride, largest first: the order they lie in memory when x
// is a permuted view of a row-major tensor
std::vector<int64_t> memory_order(const Tensor& x) {
  const std::vector<int64_t> st = x.strides();
  std::vector<int64_t> order(st.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return st[a] > st[b]; });
  return order;
}

// Reduces the dims in blocks of adjacent dims, last block first; keeps dims.
// A permuted view of a row-major tensor is reduced in its memory's order,
// without a copy, and the result (dims kept) viewed back in x's order.
Tensor reduce_dims(const Tensor& x, const std::vector<int64_t>& dims, ReduceOp op) {
  if (!x.is_contiguous()) {
    const std::vector<int64_t> order = memory_order(x);
    if (Tensor in_memory = permute(x.detach(), order); in_memory.is_contiguous()) {
      std::vector<int64_t> back(order.size()), reduced;  // back: x's dim -> its place in memory
      for (size_t k = 0; k < order.size(); ++k) back[order[k]] = static_cast<int64_t>(k);
      for (int64_t d : dims) reduced.push_back(back[d]);
      std::sort(reduced.begin(), reduced.end());
      return permute(reduce_dims(in_memory, reduced, op), back);
    }
  }
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
    return std::vector<Tensor>{expand(g.reshape(kept), in_shape)};  // a view, stride 0 on dims
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
    // dims side by side (or none): one pass, the bits of the mask, sum, div and mul below
    const int64_t first = dims.empty() ? x.dim() : dims.front();
    const int64_t last = dims.empty() ? x.dim() - 1 : dims.back();
    if (last - first + 1 == static_cast<int64_t>(dims.size())) {
      const auto [outer, r, inner] = block_of(x.shape(), first, last);
      Tensor gx = empty_like(x, x.shape());
      kernels(x.device()).max_backward(outer, r, inner, dense(x.detach()).data_ptr<float>(),
                                       dense(kept).data_ptr<float>(), dense(g).data_ptr<float>(),
                                       gx.data_ptr<float>());
      return std::vector<Tensor>{gx};
    }
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
  kernels(x.device()).argmax(n, c, dense(xf).data_ptr<float>(), out.data_ptr<int64_t>());
  return out;
}

// ---- math (issue 22) ----

// -max(-x): negation is exact, so the values, the NaN rule and the tie split are max's
Tensor min(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  require_nonempty("min", x);
  MINIDL_CHECK(is_floating(x.dtype()), "min: expected a float tensor, got ", dtype_name(x.dtype()));
  return neg(max(neg(x), dims, keepdim));
}

// x [N, C] -> [N] int64: argmax of -x (exact)
Tensor argmin(const Tensor& x) {
  require_nonempty("argmin", x);
  return argmax(neg(x.dtype() == kFloat32 ? x.detach() : cast(x.detach(), kFloat32)));
}

namespace {

// x [outer, D, inner] -> [outer, inner] (dim removed, or kept as 1), the
// first largest along dim; smallest on -x
Tensor arg_along(const Tensor& x, int64_t dim, bool keepdim, bool smallest, const char* op) {
  require_nonempty(op, x);
  dim = normalize_dim(dim, x.dim(), op);
  Tensor xf = x.dtype() == kFloat32 ? x.detach() : cast(x.detach(), kFloat32);
  if (smallest) xf = neg(xf);
  int64_t outer = 1, inner = 1, d = x.dim() == 0 ? 1 : x.size(dim);
  for (int64_t i = 0; i < dim; ++i) outer *= x.size(i);
  for (int64_t i = dim + 1; i < x.dim(); ++i) inner *= x.size(i);
  if (inner > 1) xf = transpose(xf.reshape({outer, d, inner}), 1, 2);  // [outer, inner, D]
  Tensor flat = argmax(xf.reshape({outer * inner, d}));
  Shape s = x.shape();
  if (x.dim() > 0) {
    if (keepdim)
      s[dim] = 1;
    else
      s.erase(s.begin() + dim);
  }
  return flat.reshape(s);
}

}  // namespace

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_along(x, dim, keepdim, false, "argmax");
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_along(x, dim, keepdim, true, "argmin");
}

// sum((x - mean)^2) / (n - correction), two passes (no cancellation)
Tensor var(const Tensor& x, const std::vector<int64_t>& dims_in, bool unbiased, bool keepdim) {
  require_nonempty("var", x);
  MINIDL_CHECK(is_floating(x.dtype()), "var: expected a float tensor, got ", dtype_name(x.dtype()));
  if (x.dtype() == kFloat16)
    return cast(var(cast(x, kFloat32), dims_in, unbiased, keepdim), kFloat16);
  auto dims = norm_dims(x, dims_in, "var");
  int64_t count = 1;
  for (int64_t d : dims) count *= x.shape()[d];
  Tensor d = sub(x, mean(x, dims, true));
  // n - 1 = 0 divides by zero: NaN (inf for nonzero sums), as PyTorch
  return div(sum(mul(d, d), dims, keepdim),
             scalar_like(static_cast<double>(count - (unbiased ? 1 : 0)), x));
}

Tensor std(const Tensor& x, const std::vector<int64_t>& dims, bool unbiased, bool keepdim) {
  MINIDL_CHECK(is_floating(x.dtype()), "std: expected a float tensor, got ", dtype_name(x.dtype()));
  return sqrt(var(x, dims, unbiased, keepdim));
}

// m + log(sum(exp(x - m))), m = max(x) detached (the gradient is softmax(x)
// either way), clamped to the finite floats so rows of -inf give -inf and a
// +inf gives +inf (inf - inf would be NaN)
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim) {
  require_nonempty("logsumexp", x);
  MINIDL_CHECK(is_floating(x.dtype()), "logsumexp: expected a float tensor, got ",
               dtype_name(x.dtype()));
  if (x.dtype() == kFloat16) return cast(logsumexp(cast(x, kFloat32), dims_in, keepdim), kFloat16);
  auto dims = norm_dims(x, dims_in, "logsumexp");
  const double big = std::numeric_limits<float>::max();
  Tensor m = clamp(max(x.detach(), dims, true), -big, big);
  Tensor out = add(log(sum(exp(sub(x, m)), dims, true)), m);
  return keepdim ? out : out.reshape(reduced_shape(x.shape(), dims, false));
}

// p = 2: sqrt(sum(x^2)) with gradient x / norm (0 where the norm is 0);
// p = 1: sum(|x|); p = inf: max(|x|); else sum(|x|^p)^(1/p)
Tensor norm(const Tensor& x, double p, const std::vector<int64_t>& dims_in, bool keepdim) {
  MINIDL_CHECK(p > 0, "norm: expected p > 0 (1, 2, inf or another positive order), got ", p,
               " for shape ", x.shape());
  MINIDL_CHECK(is_floating(x.dtype()), "norm: expected a float tensor, got ",
               dtype_name(x.dtype()));
  if (x.dtype() == kFloat16) return cast(norm(cast(x, kFloat32), p, dims_in, keepdim), kFloat16);
  auto dims = norm_dims(x, dims_in, "norm");
  if (p == 1) return sum(abs(x), dims, keepdim);
  if (std::isinf(p)) return max(abs(x), dims, keepdim);
  if (p != 2) return pow(sum(pow(abs(x), p), dims, keepdim), 1 / p);
  Tensor kept = sqrt(sum(mul(x.detach(), x.detach()), dims, true));
  Tensor out = kept.reshape(reduced_shape(x.shape(), dims, keepdim));
  return record(out, "norm", {x}, [x, kept](const Tensor& g) {
    Tensor safe = add(kept, eq(kept, 0.0));  // 1 where the norm is 0 (x is 0 there)
    return std::vector<Tensor>{mul(g.reshape(kept.shape()), div(x, safe))};
  });
}

}  // namespace minidl
