// Indexing ops of issue 22: index_select (backward index_add), where and
// masked_fill (a select kernel: the unchosen side is never read into the
// result), gather and scatter_add along a dim, tril/triu, one_hot. Host indices are checked here;
// device kernels trust theirs.
#include <algorithm>

#include "framework/ops.h"
#include "framework/ops/util.h"

namespace minidl {
namespace {

void require_index_dtype(const char* op, const Tensor& index, const char* what = "index") {
  MINIDL_CHECK(index.dtype() == kInt64 || index.dtype() == kInt32, op,
               ": expected an int32 or "
               "int64 ",
               what, ", got ", dtype_name(index.dtype()), " (shape ", index.shape(), ")");
}

// Throws unless every element of a host index lies in [0, size), naming the
// first that does not, its position, and the dim it indexes.
void check_index(const char* op, const Tensor& index, int64_t size, int64_t dim, const Tensor& x) {
  if (index.device() != Device::CPU) return;
  const Tensor idx = dense(index);
  const void* at = idx.raw_data_ptr();
  const bool is64 = idx.dtype() == kInt64;
  for (int64_t i = 0, n = idx.numel(); i < n; ++i) {
    const int64_t v =
        is64 ? static_cast<const int64_t*>(at)[i] : static_cast<const int32_t*>(at)[i];
    MINIDL_CHECK(v >= 0 && v < size, op, ": index ", v, " at position ", i, " out of range [0, ",
                 size, ") for dim ", dim, " of input ", x.shape());
  }
}

// x [.., D, ..] viewed as [outer, D, inner] around dim
struct Around {
  int64_t outer = 1, d = 1, inner = 1;
};
Around around(const Shape& s, int64_t dim) {
  Around a;
  for (int64_t i = 0; i < static_cast<int64_t>(s.size()); ++i)
    (i < dim ? a.outer : i == dim ? a.d : a.inner) *= s[i];
  return a;
}

// t's strides (a view's own) broadcast to out shape os: 0 where t's dim is 1 or absent
void broadcast_strides(const Tensor& t, const Shape& os, int64_t* st) {
  const int64_t lead = os.size() - t.dim();
  const std::vector<int64_t> ts = t.strides();
  for (int64_t d = 0; d < static_cast<int64_t>(os.size()); ++d)
    st[d] = d < lead || t.shape()[d - lead] == 1 ? 0 : ts[d - lead];
}

}  // namespace

// x [.., D, ..], index [I] -> [.., I, ..]
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  MINIDL_CHECK(x.dim() >= 1, "index_select: expected an input of at least 1 dim, got shape ",
               x.shape());
  require_index_dtype("index_select", index);
  MINIDL_CHECK(index.dim() == 1, "index_select: expected a 1-D index, got shape ", index.shape(),
               " (input ", x.shape(), ")");
  dim = normalize_dim(dim, x.dim(), "index_select");
  const Kernels& kern = kernels_for("index_select", x, {&index});
  check_index("index_select", index, x.size(dim), dim, x);
  if (!all_contiguous({x, index})) return index_select(contiguous(x), dim, contiguous(index));
  if (x.dtype() == kFloat16 && x.requires_grad())  // the backward adds in float32
    return cast(index_select(cast(x, kFloat32), dim, index), kFloat16);
  const Around ar = around(x.shape(), dim);
  const int64_t count = index.numel();
  Shape os = x.shape();
  os[dim] = count;
  Tensor out = Tensor::empty(os, x.dtype(), x.device());
  kern.index_select(dtype_size(x.dtype()), ar.outer, ar.d, ar.inner, x.raw_data_ptr(), count,
                    index.raw_data_ptr(), index.dtype(), out.raw_data_ptr());
  const Shape xs = x.shape();
  return record(out, "index_select", {x}, [xs, ar, count, index](const Tensor& g) {
    Tensor gx = Tensor::zeros(xs, kFloat32, g.device());
    kernels(g.device())
        .index_add(ar.outer, ar.d, ar.inner, count, index.raw_data_ptr(), index.dtype(),
                   g.data_ptr<float>(), gx.data_ptr<float>());
    return std::vector<Tensor>{gx};
  });
}

// cond, a, b broadcast -> cond ? a : b
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  MINIDL_CHECK(cond.dtype() == kFloat32 || cond.dtype() == kInt32 || cond.dtype() == kInt64,
               "where: expected a condition of dtype float32, int32 or int64, got ",
               dtype_name(cond.dtype()), " (shape ", cond.shape(), ")");
  require_f32("where", a, "a");
  require_f32("where", b, "b");
  const Kernels& kern = kernels_for("where", a, {&b, &cond});
  const Shape os =
      broadcast_shape(broadcast_shape(cond.shape(), a.shape(), "where"), b.shape(), "where");
  MINIDL_CHECK(os.size() <= static_cast<size_t>(kMaxDims), "where: shape ", os, " has more than ",
               kMaxDims, " dims");
  Select sel;
  sel.n = numel_of(os);
  sel.nd = static_cast<int>(os.size());
  std::copy(os.begin(), os.end(), sel.size);
  broadcast_strides(cond, os, sel.stride_c);  // views are read through their strides
  broadcast_strides(a, os, sel.stride_a);
  broadcast_strides(b, os, sel.stride_b);
  Tensor out = empty_like(a, os);
  kern.where(sel, view_ptr(cond), cond.dtype(), reinterpret_cast<const float*>(view_ptr(a)),
             reinterpret_cast<const float*>(view_ptr(b)), out.data_ptr<float>());
  const Tensor c = cond.detach();
  const Shape sa = a.shape(), sb = b.shape();
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();  // masked_fill's a: no
  return record(out, "where", {a, b}, [c, sa, sb, need_a, need_b](const Tensor& g) {
    const Tensor zero = scalar_like(0, g);
    return std::vector<Tensor>{need_a ? sum_to(where(c, g, zero), sa) : Tensor(),
                               need_b ? sum_to(where(c, zero, g), sb) : Tensor()};
  });
}

// x, mask broadcast to x -> value where mask, else x
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  require_f32("masked_fill", x);
  MINIDL_CHECK(broadcast_shape(mask.shape(), x.shape(), "masked_fill") == x.shape(),
               "masked_fill: mask ", mask.shape(), " does not broadcast to input ", x.shape());
  return where(mask, scalar_like(value, x), x);
}

// x [.., D, ..], index (x's rank, int32/int64 in [0, D), no larger than x
// outside dim) -> out [index's shape] = x at index along dim (torch.gather)
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  require_f32("gather", x);
  require_index_dtype("gather", index);
  MINIDL_CHECK(index.dim() == x.dim() && x.dim() >= 1, "gather: index ", index.shape(),
               " and input ", x.shape(), ": expected the same number of dims (at least 1)");
  dim = normalize_dim(dim, x.dim(), "gather");
  if (!index.is_contiguous()) return gather(x, dim, contiguous(index));
  Tensor xn = x;  // x cut to index's size outside dim
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d == dim) continue;
    MINIDL_CHECK(index.size(d) <= x.size(d), "gather: index ", index.shape(), " and input ",
                 x.shape(), ": index larger than the input in dim ", d);
    if (index.size(d) < x.size(d)) xn = narrow(xn, d, 0, index.size(d));
  }
  xn = contiguous(xn);
  const Kernels& kern = kernels_for("gather", x, {&index});
  check_index("gather", index, x.size(dim), dim, x);
  const Around ar = around(xn.shape(), dim);
  const int64_t count = index.size(dim);
  Tensor out = empty_like(x, index.shape());
  kern.gather_dim(ar.outer, ar.d, ar.inner, count, xn.data_ptr<float>(), index.raw_data_ptr(),
                  index.dtype(), out.data_ptr<float>());
  const Shape xs = xn.shape();
  return record(out, "gather", {xn}, [xs, ar, count, index](const Tensor& g) {
    Tensor gx = Tensor::zeros(xs, kFloat32, g.device());
    kernels(g.device())
        .scatter_add_dim(ar.outer, ar.d, ar.inner, count, index.raw_data_ptr(), index.dtype(),
                         g.data_ptr<float>(), gx.data_ptr<float>());
    return std::vector<Tensor>{gx};
  });
}

// x [.., D, ..], index and src (index no larger than src, nor than x outside
// dim) -> x with src added at index along dim (torch.scatter_add)
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  require_f32("scatter_add", x);
  require_f32("scatter_add", src, "src");
  require_index_dtype("scatter_add", index);
  MINIDL_CHECK(index.dim() == x.dim() && src.dim() == x.dim() && x.dim() >= 1,
               "scatter_add: input ", x.shape(), ", index ", index.shape(), " and src ",
               src.shape(), ": expected the same number of dims (at least 1)");
  dim = normalize_dim(dim, x.dim(), "scatter_add");
  if (!index.is_contiguous()) return scatter_add(x, dim, contiguous(index), src);
  Tensor sn = src;              // src cut to index's shape
  Shape block = index.shape();  // x's block that index addresses: D along dim
  block[dim] = x.size(dim);
  std::vector<int64_t> pads;  // zero padding of the block up to x, from the last dim
  for (int64_t d = x.dim() - 1; d >= 0; --d) {
    MINIDL_CHECK(index.size(d) <= src.size(d) && (d == dim || index.size(d) <= x.size(d)),
                 "scatter_add: input ", x.shape(), ", index ", index.shape(), " and src ",
                 src.shape(), ": index larger than src, or than the input outside dim ", dim);
    if (index.size(d) < src.size(d)) sn = narrow(sn, d, 0, index.size(d));
    pads.push_back(0);
    pads.push_back(x.size(d) - block[d]);
  }
  sn = contiguous(sn);
  const Kernels& kern = kernels_for("scatter_add", x, {&index, &src});
  check_index("scatter_add", index, x.size(dim), dim, x);
  const Around ar = around(block, dim);
  const int64_t count = index.size(dim);
  Tensor added = Tensor::zeros(block, kFloat32, x.device());
  kern.scatter_add_dim(ar.outer, ar.d, ar.inner, count, index.raw_data_ptr(), index.dtype(),
                       sn.data_ptr<float>(), added.data_ptr<float>());
  added = record(added, "scatter_add", {sn}, [dim, index](const Tensor& g) {
    return std::vector<Tensor>{gather(g, dim, index)};
  });
  return add(x, block == x.shape() ? added : pad(added, pads));
}

// x [.., R, C] -> x where column - row <= diagonal (tril) or >= diagonal (triu), else 0
namespace {
Tensor triangle(const char* op, const Tensor& x, int64_t diagonal, bool lower) {
  require_f32(op, x);
  MINIDL_CHECK(x.dim() >= 2, op, ": expected an input of at least 2 dims, got shape ", x.shape());
  // column - row [R, C], made on x's device (a CUDA graph can capture it; exact below 2^24)
  const int64_t rows = x.size(-2), cols = x.size(-1);
  const Tensor offset = sub(Tensor::arange(cols, kFloat32, x.device()).reshape({1, cols}),
                            Tensor::arange(rows, kFloat32, x.device()).reshape({rows, 1}));
  const double d = static_cast<double>(diagonal);
  return where(lower ? le(offset, d) : ge(offset, d), x, scalar_like(0, x));
}
}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) { return triangle("tril", x, diagonal, true); }
Tensor triu(const Tensor& x, int64_t diagonal) { return triangle("triu", x, diagonal, false); }

// ids [S] int32/int64 in [0, C) -> [S, C] int64, 1 at ids (built on the host)
Tensor one_hot(const Tensor& ids, int64_t num_classes) {
  require_index_dtype("one_hot", ids, "ids");
  const Tensor host = ids.contiguous().cpu().to(kInt64);
  const int64_t* v = host.data<int64_t>();
  int64_t c = num_classes;
  if (c < 0) {
    MINIDL_CHECK(num_classes == -1, "one_hot: num_classes ", num_classes, ": expected -1 or >= 0");
    MINIDL_CHECK(host.numel() > 0, "one_hot: cannot infer num_classes from empty ids ",
                 ids.shape());
    c = *std::max_element(v, v + host.numel()) + 1;
  }
  for (int64_t i = 0; i < host.numel(); ++i)
    MINIDL_CHECK(v[i] >= 0 && v[i] < c, "one_hot: id ", v[i], " at position ", i,
                 " out of range [0, ", c, ") (ids ", ids.shape(), ")");
  Shape os = ids.shape();
  os.push_back(c);
  Tensor out = Tensor::zeros(os, kInt64);
  for (int64_t i = 0; i < host.numel(); ++i) out.data<int64_t>()[i * c + v[i]] = 1;
  return out.to(ids.device());
}

}  // namespace minidl
