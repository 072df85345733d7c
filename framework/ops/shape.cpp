// Shape ops (reshape, flatten, concat, slice), gather by label, and cast.
#include "framework/ops.h"
#include "framework/ops/util.h"

namespace minidl {
namespace {

// A tensor sharing x's storage with another shape and byte offset.
Tensor alias(const Tensor& x, const Shape& shape, size_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = x.impl().storage;
  impl->offset = offset;
  impl->shape = shape;
  impl->dtype = x.dtype();
  impl->device = x.device();
  return Tensor(std::move(impl));
}

}  // namespace

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
  Tensor out = alias(x, shape, x.impl().offset);
  Shape xs = x.shape();
  return record(out, "reshape", {x}, [xs](const Tensor& g) {
    return std::vector<Tensor>{reshape(g, xs)};
  });
}

// x [d0, ..., dk, ...] -> [d0, ..., prod(dk...)]
Tensor flatten(const Tensor& x, int64_t start_dim) {
  if (x.dim() == 0) return reshape(x, {1});
  start_dim = normalize_dim(start_dim, x.dim(), "flatten");
  Shape s(x.shape().begin(), x.shape().begin() + start_dim);
  s.push_back(-1);
  if (x.numel() == 0) s.back() = numel_of(Shape(x.shape().begin() + start_dim, x.shape().end()));
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
  Shape s = x.shape();
  s[0] = end - start;
  const size_t row_bytes = (n ? x.nbytes() / n : 0);
  Tensor out = alias(x, s, x.impl().offset + start * row_bytes);
  Shape xs = x.shape();
  return record(out, "slice", {x}, [xs, start](const Tensor& g) {
    Tensor gx = Tensor::zeros(xs, g.dtype(), g.device());
    gx.slice(start, start + g.size(0)).copy_(g);
    return std::vector<Tensor>{gx};
  });
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
  kern.gather(n, c, x.data_ptr<float>(), labels.raw_data_ptr(), labels.dtype(),
              out.data_ptr<float>());
  Shape xs = x.shape();
  return record(out, "gather", {x}, [xs, labels, n, c](const Tensor& g) {
    Tensor gx = empty_like(g, xs);
    kernels(g.device()).gather_backward(n, c, g.data_ptr<float>(), labels.raw_data_ptr(),
                                        labels.dtype(), gx.data_ptr<float>());
    return std::vector<Tensor>{gx};
  });
}

void check_labels(const char* op, const Tensor& labels, const Tensor& x, const char* what) {
  const int64_t c = x.size(1);
  for (int64_t i = 0; i < labels.numel(); ++i) {
    const int64_t v = labels.dtype() == kInt64 ? labels.data<int64_t>()[i] : labels.data<int32_t>()[i];
    MINIDL_CHECK(v >= 0 && v < c, op, ": label ", v, " at row ", i, " out of range [0, ", c,
                 ") for ", what, " ", x.shape());
  }
}

// x -> x converted to dtype; gradients flow between float types
Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor out = Tensor::empty(x.shape(), dtype, x.device());
  kernels(x.device()).cast(x.dtype(), dtype, x.numel(), x.raw_data_ptr(), out.raw_data_ptr());
  if (!is_floating(dtype)) return out;
  DType from = x.dtype();
  return record(out, "cast", {x}, [from](const Tensor& g) {
    return std::vector<Tensor>{cast(g, from)};
  });
}

}  // namespace minidl
