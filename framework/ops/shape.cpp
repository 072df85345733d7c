// Shape ops (reshape, flatten, concat, slice, and issue 22's permute, narrow,
// cat, stack, split, squeeze, expand, pad), gather by label, and cast. Views
// share storage and carry strides; copies (contiguous, cat, pad, a reshape
// the strides do not allow) are the device's strided_copy kernel.
#include <algorithm>
#include <cassert>
#include <numeric>
#include <optional>

#include "framework/ops.h"
#include "framework/ops/util.h"

namespace minidl {
namespace {

// A tensor sharing x's storage with another shape, element strides (empty:
// row-major) and byte offset.
Tensor alias(const Tensor& x, const Shape& shape, std::vector<int64_t> strides, size_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = x.impl().storage;
  impl->offset = offset;
  impl->shape = shape;
  impl->strides = std::move(strides);
  impl->dtype = x.dtype();
  impl->device = x.device();
  return Tensor(std::move(impl));
}

// x's block [.., start:start + length, ..] along dim, a view (no autograd)
Tensor window(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  Shape s = x.shape();
  s[dim] = length;
  const std::vector<int64_t> st = x.strides();
  const size_t skip = x.numel() == 0 ? 0 : start * st[dim] * dtype_size(x.dtype());  // huge empty dims
  return alias(x, s, st, x.impl().offset + skip);
}

// Strides that show x's elements (row-major order) with `shape`, if any:
// x's dims are cut into runs that are contiguous among themselves, and each
// run must be covered by whole dims of `shape` (PyTorch's view rule).
std::optional<std::vector<int64_t>> view_strides(const Tensor& x, const Shape& shape) {
  const Shape& xs = x.shape();
  const std::vector<int64_t> xst = x.strides();
  std::vector<int64_t> st(shape.size(), 1);
  int64_t v = static_cast<int64_t>(shape.size()) - 1;
  int64_t run = 1, covered = 1, base = xst.back();
  for (int64_t d = x.dim() - 1; d >= 0; --d) {
    run *= xs[d];
    const bool run_ends = d == 0 || (xs[d - 1] != 1 && xst[d - 1] != run * base);
    if (!run_ends) continue;
    for (; v >= 0 && (covered < run || shape[v] == 1); --v) {
      st[v] = covered * base;
      covered *= shape[v];
    }
    if (covered != run) return std::nullopt;
    if (d > 0) base = xst[d - 1], run = 1, covered = 1;
  }
  if (v != -1) return std::nullopt;
  return st;
}

}  // namespace

bool all_contiguous(std::initializer_list<Tensor> ts) {
  return std::all_of(ts.begin(), ts.end(),
                     [](const Tensor& t) { return !t.defined() || t.is_contiguous(); });
}

Tensor dense(const Tensor& t) { return !t.defined() || t.is_contiguous() ? t : contiguous(t.detach()); }

// x -> x itself when contiguous, else a row-major copy
Tensor contiguous(const Tensor& x) {
  if (!x.defined() || x.is_contiguous()) return x;
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  copy_view(x, out);
  return record(out, "contiguous", {x}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

// x -> the same elements viewed with `shape` (one dim may be -1)
Tensor reshape(const Tensor& x, const Shape& shape_in) {
  Shape shape = shape_in;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      MINIDL_CHECK(infer < 0, "reshape: ", x.shape(), " -> ", shape_in, ": only one dim may be -1");
      infer = static_cast<int64_t>(i);
    } else {
      MINIDL_CHECK(shape[i] >= 0, "reshape: ", x.shape(), " -> ", shape_in, ": negative dim");
      MINIDL_CHECK(!__builtin_mul_overflow(known, shape[i], &known), "reshape: ", x.shape(), " (",
                   x.numel(), " elements) -> ", shape_in, ": the sizes multiply past 2^63");
    }
  }
  if (infer >= 0) {
    MINIDL_CHECK(known > 0 && x.numel() % known == 0, "reshape: ", x.shape(), " -> ", shape_in,
                 ": cannot infer the -1 dim");
    shape[infer] = x.numel() / known;
  }
  MINIDL_CHECK(numel_of(shape) == x.numel(), "reshape: ", x.shape(), " (", x.numel(),
               " elements) -> ", shape_in, " (", numel_of(shape), " elements)");
  Tensor out;
  if (x.is_contiguous()) {
    out = alias(x, shape, {}, x.impl().offset);
  } else if (auto st = view_strides(x, shape)) {
    out = alias(x, shape, *st, x.impl().offset);
  } else {
    return reshape(contiguous(x), shape);  // the strides allow no view: a copy
  }
  Shape xs = x.shape();
  return record(out, "reshape", {x}, [xs](const Tensor& g) {
    return std::vector<Tensor>{reshape(g, xs)};
  });
}

// x [d0, ..., ds, ..., de, ...] -> [d0, ..., ds * ... * de, ...] (a view)
Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (x.dim() == 0) return reshape(x, {1});
  start_dim = normalize_dim(start_dim, x.dim(), "flatten");
  end_dim = normalize_dim(end_dim, x.dim(), "flatten");
  MINIDL_CHECK(start_dim <= end_dim, "flatten: start_dim ", start_dim, " after end_dim ", end_dim,
               " for shape ", x.shape());
  const Shape& xs = x.shape();
  Shape s(xs.begin(), xs.begin() + start_dim);
  s.push_back(numel_of(Shape(xs.begin() + start_dim, xs.begin() + end_dim + 1)));
  s.insert(s.end(), xs.begin() + end_dim + 1, xs.end());
  return reshape(x, s);
}

// xs[i] [Ni, ...] -> [sum Ni, ...]
Tensor concat(const std::vector<Tensor>& xs) {
  MINIDL_CHECK(!xs.empty(), "concat: expected at least one tensor");
  const Tensor& first = xs[0];
  MINIDL_CHECK(first.dim() >= 1, "concat: expected tensors of at least 1 dim, got shape ", first.shape());
  int64_t rows = 0;
  for (const Tensor& t : xs) {
    MINIDL_CHECK(t.dtype() == first.dtype(), "concat: dtypes ", dtype_name(first.dtype()), " and ",
                 dtype_name(t.dtype()), " differ");
    kernels_for("concat", first, {&t});
    bool same_tail = t.dim() == first.dim() &&
                     std::equal(t.shape().begin() + 1, t.shape().end(), first.shape().begin() + 1);
    MINIDL_CHECK(same_tail, "concat: shapes ", first.shape(), " and ", t.shape(),
                 " differ outside dim 0");
    rows += t.size(0);
  }
  Shape s = first.shape();
  s[0] = rows;
  Tensor out = Tensor::empty(s, first.dtype(), first.device());
  int64_t at = 0;
  for (const Tensor& t : xs) {
    out.slice(at, at + t.size(0)).copy_(t);
    at += t.size(0);
  }
  return record(out, "concat", xs, [xs](const Tensor& g) {
    std::vector<Tensor> gs;
    int64_t at = 0;
    for (const Tensor& t : xs) {
      gs.push_back(slice(g, at, at + t.size(0)).clone());
      at += t.size(0);
    }
    return gs;
  });
}

// x [N, ...] -> rows [start, end) as a view [end - start, ...]
Tensor slice(const Tensor& x, int64_t start, int64_t end) {
  MINIDL_CHECK(x.dim() >= 1, "slice: expected a tensor of at least 1 dim, got shape ", x.shape());
  const int64_t n = x.size(0);
  MINIDL_CHECK(0 <= start && start <= end && end <= n, "slice: rows [", start, ", ", end,
               ") out of range for shape ", x.shape());
  return narrow(x, 0, start, end - start);
}

// x [N, C], labels [N] -> out [N], out[i] = x[i, labels[i]]
Tensor gather(const Tensor& x, const Tensor& labels) {
  require_f32("gather", x);
  require_dim("gather", x, 2);
  MINIDL_CHECK(labels.dtype() == kInt64 || labels.dtype() == kInt32, "gather: expected int32 or "
               "int64 labels, got ", dtype_name(labels.dtype()));
  MINIDL_CHECK(labels.shape() == Shape{x.size(0)}, "gather: input ", x.shape(), " and labels ",
               labels.shape(), ": expected labels [", x.size(0), "]");
  const Kernels& kern = kernels_for("gather", x, {&labels});
  if (labels.device() == Device::CPU) check_labels("gather", labels, x, "input");
  const int64_t n = x.size(0), c = x.size(1);
  Tensor out = empty_like(x, {n});
  kern.gather(n, c, dense(x).data_ptr<float>(), dense(labels).raw_data_ptr(), labels.dtype(),
              out.data_ptr<float>());
  Shape xs = x.shape();
  return record(out, "gather", {x}, [xs, labels, n, c](const Tensor& g) {
    Tensor gx = empty_like(g, xs);
    kernels(g.device()).gather_backward(n, c, g.data_ptr<float>(), dense(labels).raw_data_ptr(),
                                        labels.dtype(), gx.data_ptr<float>());
    return std::vector<Tensor>{gx};
  });
}

void check_labels(const char* op, const Tensor& labels_in, const Tensor& x, const char* what) {
  const Tensor labels = dense(labels_in);
  const int64_t c = x.size(1);
  const void* at = labels.raw_data_ptr();
  const bool is64 = labels.dtype() == kInt64;
  const char* where = labels.dim() > 1 ? " at flat position " : " at row ";
  for (int64_t i = 0, n = labels.numel(); i < n; ++i) {
    const int64_t v =
        is64 ? static_cast<const int64_t*>(at)[i] : static_cast<const int32_t*>(at)[i];
    MINIDL_CHECK(v >= 0 && v < c, op, ": label ", v, where, i, " out of range [0, ", c, ") for ",
                 what, " ", x.shape());
  }
}

// x -> x converted to dtype; gradients flow between float types
Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor out = Tensor::empty(x.shape(), dtype, x.device());
  kernels(x.device()).cast(x.dtype(), dtype, x.numel(), dense(x).raw_data_ptr(), out.raw_data_ptr());
  if (!is_floating(dtype)) return out;
  DType from = x.dtype();
  return record(out, "cast", {x}, [from](const Tensor& g) {
    return std::vector<Tensor>{cast(g, from)};
  });
}

// ---- shape ops (issue 22) ----
namespace {

// Whether a merged map's source is its (contiguous) destination's last two
// dims swapped: [batch.., rows, cols] row-major read as [batch.., cols, rows]
bool is_batched_transpose(const StridedCopy& m) {
  const int n = m.nd;
  if (n < 2 || m.src_stride[n - 2] != 1 || m.src_stride[n - 1] != m.size[n - 2]) return false;
  int64_t dense = m.size[n - 1] * m.size[n - 2];
  for (int d = n - 3; d >= 0; dense *= m.size[d--])
    if (m.src_stride[d] != dense) return false;
  return true;
}

}  // namespace

void copy_view(const Tensor& src, const Tensor& dst) {
  assert(src.shape() == dst.shape() && src.dtype() == dst.dtype());
  const Shape& size = dst.shape();
  const std::vector<int64_t> src_st = src.strides(), dst_st = dst.strides();
  for (int64_t d = 0; d < dst.dim(); ++d)
    MINIDL_CHECK(dst_st[d] != 0 || size[d] == 1, "copy_: destination ", size, " with strides ",
                 Shape(dst_st), " is an expanded view: several of its elements share one "
                 "memory location (clone it first)");
  if (dst.numel() == 0) return;
  const Kernels& kern = kernels_for("copy_", dst, {&src});
  const char* from = view_ptr(src);
  char* to = view_ptr(dst);
  const int64_t nd = dst.dim();
  StridedCopy m;  // dims of size 1 dropped, neighbours contiguous on both sides merged
  for (int64_t d = 0; d < nd; ++d) {
    if (size[d] == 1) continue;
    if (m.nd > 0 && m.src_stride[m.nd - 1] == src_st[d] * size[d] &&
        m.dst_stride[m.nd - 1] == dst_st[d] * size[d]) {
      m.size[m.nd - 1] *= size[d];
      m.src_stride[m.nd - 1] = src_st[d];
      m.dst_stride[m.nd - 1] = dst_st[d];
      continue;
    }
    MINIDL_CHECK(m.nd < kMaxDims, "copy_: shape ", size, " with strides ", Shape(src_st), " and ",
                 Shape(dst_st), " has more than ", kMaxDims, " dims that cannot be merged");
    m.size[m.nd] = size[d];
    m.src_stride[m.nd] = src_st[d];
    m.dst_stride[m.nd++] = dst_st[d];
  }
  if (src.dtype() == kFloat32 && dst.is_contiguous() && is_batched_transpose(m)) {
    // [batch, rows, cols] read as [batch, cols, rows] (after merging: NHWC
    // into NCHW too): the tiled transpose kernel
    const int64_t rows = m.size[m.nd - 1], cols = m.size[m.nd - 2];
    return kern.transpose(dst.numel() / (rows * cols), rows, cols,
                          reinterpret_cast<const float*>(from), reinterpret_cast<float*>(to));
  }
  kern.strided_copy(dtype_size(src.dtype()), m, from, to);
}

// x [d0, ..., dn] -> [d_dims[0], ..., d_dims[n]] (a view)
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  const int64_t nd = x.dim();
  MINIDL_CHECK(static_cast<int64_t>(dims.size()) == nd, "permute: ", dims.size(),
               " dims given for shape ", x.shape());
  std::vector<int64_t> norm(nd), inverse(nd, -1);
  for (int64_t i = 0; i < nd; ++i) {
    norm[i] = normalize_dim(dims[i], nd, "permute");
    MINIDL_CHECK(inverse[norm[i]] < 0, "permute: dim ", dims[i], " repeated for shape ", x.shape());
    inverse[norm[i]] = i;
  }
  const std::vector<int64_t> xst = x.strides();
  Shape os(nd);
  std::vector<int64_t> st(nd);
  for (int64_t i = 0; i < nd; ++i) {
    os[i] = x.shape()[norm[i]];
    st[i] = xst[norm[i]];
  }
  Tensor out = alias(x, os, st, x.impl().offset);
  return record(out, "permute", {x},
                [inverse](const Tensor& g) { return std::vector<Tensor>{permute(g, inverse)}; });
}

// x [.., D, ..] -> [.., length, ..], elements start.. of dim (a view)
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  MINIDL_CHECK(x.dim() >= 1, "narrow: expected a tensor of at least 1 dim, got shape ", x.shape());
  dim = normalize_dim(dim, x.dim(), "narrow");
  const int64_t size = x.size(dim);
  const int64_t from = start < 0 ? start + size : start;
  MINIDL_CHECK(from >= 0 && length >= 0 && from <= size - length, "narrow: start ", start,
               " and length ", length, " out of range for dim ", dim, " of shape ", x.shape(),
               " (size ", size, ")");
  const Shape xs = x.shape();
  return record(window(x, dim, from, length), "narrow", {x}, [xs, dim, from](const Tensor& g) {
    Tensor gx = Tensor::zeros(xs, g.dtype(), g.device());
    copy_view(g, window(gx, dim, from, g.size(dim)));
    return std::vector<Tensor>{gx};
  });
}

// x [.., D, ..] -> elements [start, end) of dim, clamped as Python slices (step 1)
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end) {
  MINIDL_CHECK(x.dim() >= 1, "slice: expected a tensor of at least 1 dim, got shape ", x.shape());
  dim = normalize_dim(dim, x.dim(), "slice");
  const int64_t size = x.size(dim);
  auto clamp = [size](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
  const int64_t from = clamp(start), to = std::max(from, clamp(end));
  return narrow(x, dim, from, to - from);
}

// x -> pieces of split_size along dim (the last may be smaller)
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  MINIDL_CHECK(x.dim() >= 1, "split: expected a tensor of at least 1 dim, got shape ", x.shape());
  dim = normalize_dim(dim, x.dim(), "split");
  const int64_t size = x.size(dim);
  MINIDL_CHECK(split_size > 0 || (split_size == 0 && size == 0), "split: split_size ", split_size,
               " for dim ", dim, " of shape ", x.shape(), ": expected a positive size");
  if (size == 0) return {narrow(x, dim, 0, 0)};
  std::vector<Tensor> out;
  for (int64_t at = 0; at < size; at += split_size)
    out.push_back(narrow(x, dim, at, std::min(split_size, size - at)));
  return out;
}

// x -> pieces of the given sizes along dim (they must sum to its size)
std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes,
                                     int64_t dim) {
  MINIDL_CHECK(x.dim() >= 1, "split_with_sizes: expected a tensor of at least 1 dim, got shape ",
               x.shape());
  dim = normalize_dim(dim, x.dim(), "split_with_sizes");
  int64_t total = 0;
  for (int64_t s : sizes) {
    MINIDL_CHECK(s >= 0, "split_with_sizes: negative size ", s, " for shape ", x.shape());
    total += s;
  }
  MINIDL_CHECK(total == x.size(dim), "split_with_sizes: sizes ", Shape(sizes), " sum to ", total,
               ", expected ", x.size(dim), " (dim ", dim, " of shape ", x.shape(), ")");
  std::vector<Tensor> out;
  int64_t at = 0;
  for (int64_t s : sizes) {
    out.push_back(narrow(x, dim, at, s));
    at += s;
  }
  return out;
}

// x -> at most `chunks` pieces of ceil(size / chunks) along dim
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  MINIDL_CHECK(chunks > 0, "chunk: expected a positive number of chunks, got ", chunks);
  MINIDL_CHECK(x.dim() >= 1, "chunk: expected a tensor of at least 1 dim, got shape ", x.shape());
  const int64_t size = x.size(dim);
  return split(x, (size + chunks - 1) / chunks, dim);
}

// xs[i] [.., Di, ..] -> [.., sum Di, ..] along dim
Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  MINIDL_CHECK(!xs.empty(), "cat: expected at least one tensor");
  const Tensor& first = xs[0];
  MINIDL_CHECK(first.dim() >= 1, "cat: expected tensors of at least 1 dim, got shape ",
               first.shape());
  dim = normalize_dim(dim, first.dim(), "cat");
  int64_t total = 0;
  for (const Tensor& t : xs) {
    MINIDL_CHECK(t.dtype() == first.dtype(), "cat: dtypes ", dtype_name(first.dtype()), " and ",
                 dtype_name(t.dtype()), " differ");
    kernels_for("cat", first, {&t});
    bool same = t.dim() == first.dim();
    for (int64_t d = 0; same && d < t.dim(); ++d) same = d == dim || t.size(d) == first.size(d);
    MINIDL_CHECK(same, "cat: shapes ", first.shape(), " and ", t.shape(), " differ outside dim ",
                 dim);
    total += t.size(dim);
  }
  Shape os = first.shape();
  os[dim] = total;
  Tensor out = Tensor::empty(os, first.dtype(), first.device());
  std::vector<int64_t> starts, lengths;
  for (int64_t at = 0; const Tensor& t : xs) {
    copy_view(t, window(out, dim, at, t.size(dim)));
    starts.push_back(at);
    lengths.push_back(t.size(dim));
    at += t.size(dim);
  }
  return record(out, "cat", xs, [starts, lengths, dim](const Tensor& g) {
    std::vector<Tensor> gs;  // views of g
    for (size_t i = 0; i < starts.size(); ++i) gs.push_back(window(g, dim, starts[i], lengths[i]));
    return gs;
  });
}

// xs[i] [S] (all alike) -> [.., len(xs), ..] with the new dim at `dim`
Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  MINIDL_CHECK(!xs.empty(), "stack: expected at least one tensor");
  for (const Tensor& t : xs)
    MINIDL_CHECK(t.shape() == xs[0].shape(), "stack: shapes ", xs[0].shape(), " and ", t.shape(),
                 " differ");
  dim = normalize_dim(dim, xs[0].dim() + 1, "stack");
  std::vector<Tensor> us;
  for (const Tensor& t : xs) us.push_back(unsqueeze(t, dim));
  return cat(us, dim);
}

// x [..] -> [.., 1, ..] with the new dim at `dim` in [-(n+1), n] (a view)
Tensor unsqueeze(const Tensor& x, int64_t dim) {
  dim = normalize_dim(dim, x.dim() + 1, "unsqueeze");
  Shape s = x.shape();
  s.insert(s.begin() + dim, 1);
  return reshape(x, s);
}

// x -> x without dim `dim` if its size is 1, else x's shape (a view)
Tensor squeeze(const Tensor& x, int64_t dim) {
  dim = normalize_dim(dim, x.dim(), "squeeze");
  Shape s = x.shape();
  if (x.dim() > 0 && s[dim] == 1) s.erase(s.begin() + dim);
  return reshape(x, s);
}

// x -> x without its dims of size 1 (a view)
Tensor squeeze(const Tensor& x) {
  Shape s;
  for (int64_t d : x.shape())
    if (d != 1) s.push_back(d);
  return reshape(x, s);
}

// x [.., D, ..] -> [.., sizes.., ..], prod(sizes) = D (one may be -1; a view)
Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes) {
  dim = normalize_dim(dim, x.dim(), "unflatten");
  MINIDL_CHECK(!sizes.empty(), "unflatten: expected at least one size for shape ", x.shape());
  Shape inner = sizes;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < inner.size(); ++i) {
    if (inner[i] == -1 && infer < 0)
      infer = static_cast<int64_t>(i);
    else
      known *= inner[i];
  }
  if (infer >= 0 && known > 0 && x.size(dim) % known == 0) inner[infer] = x.size(dim) / known;
  MINIDL_CHECK(infer < 0 || inner[infer] >= 0, "unflatten: cannot infer the -1 in ", sizes,
               " for dim ", dim, " of shape ", x.shape());
  MINIDL_CHECK(numel_of(inner) == x.size(dim), "unflatten: sizes ", sizes, " do not multiply to ",
               x.size(dim), " (dim ", dim, " of shape ", x.shape(), ")");
  Shape s(x.shape().begin(), x.shape().begin() + dim);
  s.insert(s.end(), inner.begin(), inner.end());
  s.insert(s.end(), x.shape().begin() + dim + 1, x.shape().end());
  return reshape(x, s);
}

// x [..] -> [shape] broadcast (-1 keeps a dim; a view, stride 0 where
// broadcast); backward sums
Tensor expand(const Tensor& x, const Shape& shape) {
  const int64_t nd = static_cast<int64_t>(shape.size()), lead = nd - x.dim();
  MINIDL_CHECK(lead >= 0, "expand: shape ", shape, " has fewer dims than input ", x.shape());
  Shape os = shape;
  const std::vector<int64_t> xst = x.strides();
  std::vector<int64_t> src_st(nd, 0);
  for (int64_t d = 0; d < nd; ++d) {
    if (d < lead) {
      MINIDL_CHECK(os[d] >= 0, "expand: input ", x.shape(), " -> ", shape,
                   ": -1 or a negative size in a new leading dim");
      continue;
    }
    const int64_t have = x.shape()[d - lead];
    if (os[d] == -1) os[d] = have;
    MINIDL_CHECK(have == os[d] || have == 1, "expand: input ", x.shape(), " -> ", shape, ": dim ",
                 d, " of size ", have, " can only expand from size 1");
    if (have == os[d]) src_st[d] = xst[d - lead];
  }
  if (os == x.shape()) return x;
  Tensor out = alias(x, os, src_st, x.impl().offset);
  const Shape xs = x.shape();
  return record(out, "expand", {x},
                [xs](const Tensor& g) { return std::vector<Tensor>{sum_to(g, xs)}; });
}

// x [.., Si, ..] -> [.., Si + left_i + right_i, ..], pairs (left, right) from
// the last dim back (F.pad, constant mode); negative amounts crop
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, double value) {
  const int64_t np = static_cast<int64_t>(pads.size()) / 2;
  MINIDL_CHECK(pads.size() % 2 == 0 && np <= x.dim(), "pad: ", pads.size(),
               " pad amounts for input ", x.shape(), ": expected an even number, at most ",
               2 * x.dim());
  Tensor cropped = x;
  std::vector<int64_t> left(x.dim(), 0), right(x.dim(), 0);
  for (int64_t i = 0; i < np; ++i) {
    const int64_t d = x.dim() - 1 - i, size = x.size(d);
    MINIDL_CHECK(size + pads[2 * i] + pads[2 * i + 1] >= 0, "pad: input ", x.shape(), " with pads ",
                 Shape(pads), ": dim ", d, " of size ", size, " would become negative");
    left[d] = std::max<int64_t>(pads[2 * i], 0);
    right[d] = std::max<int64_t>(pads[2 * i + 1], 0);
    const int64_t from = std::max<int64_t>(-pads[2 * i], 0),
                  to = size - std::max<int64_t>(-pads[2 * i + 1], 0);
    if (from > 0 || to < size) cropped = narrow(cropped, d, from, std::max<int64_t>(to - from, 0));
  }
  if (std::all_of(left.begin(), left.end(), [](int64_t v) { return v == 0; }) &&
      std::all_of(right.begin(), right.end(), [](int64_t v) { return v == 0; }))
    return cropped;
  const Shape cs = cropped.shape();
  Shape os = cs;
  for (int64_t d = 0; d < x.dim(); ++d) os[d] += left[d] + right[d];
  Tensor out = Tensor::full(os, value, x.dtype(), x.device());
  auto inner = [left, cs](const Tensor& t) {  // t's block where cropped sits
    Tensor w = t;
    for (size_t d = 0; d < cs.size(); ++d) w = window(w, d, left[d], cs[d]);
    return w;
  };
  copy_view(cropped, inner(out));
  return record(out, "pad", {cropped},
                [inner](const Tensor& g) { return std::vector<Tensor>{inner(g)}; });
}

}  // namespace minidl
