// Checks shared by the op files, and the way an op reaches its device's kernels.
#pragma once
#include "framework/backend/backend.h"
#include "framework/tensor.h"

namespace minidl {

inline void require_f32(const char* op, const Tensor& t, const char* what = "input") {
  MINIDL_CHECK(t.dtype() == kFloat32, op, ": expected ", what, " of dtype float32, got ",
               dtype_name(t.dtype()), " (shape ", t.shape(), ")");
}

inline void require_dim(const char* op, const Tensor& t, int64_t ndim, const char* what = "input") {
  MINIDL_CHECK(t.dim() == ndim, op, ": expected a ", ndim, "-D ", what, ", got shape ", t.shape());
}

inline void require_nonempty(const char* op, const Tensor& t) {
  MINIDL_CHECK(t.numel() > 0, op, ": empty tensor of shape ", t.shape());
}

// The kernel table of the first tensor's device; throws when another defined
// tensor is on a different device, naming both.
inline const Kernels& kernels_for(const char* op, const Tensor& a,
                                  std::initializer_list<const Tensor*> others = {}) {
  for (const Tensor* t : others)
    MINIDL_CHECK(!t->defined() || t->device() == a.device(), op, ": tensors on two devices: ",
                 a.shape(), " on ", device_name(a.device()), " and ", t->shape(), " on ",
                 device_name(t->device()));
  return kernels(a.device());
}

// t itself when contiguous, else a row-major copy outside autograd: what a
// kernel reads (the op records t itself, and its backward sees t's shape).
Tensor dense(const Tensor& t);
// Whether every defined tensor is contiguous: an op whose kernels read
// several inputs, in its forward and its backward, calls itself again on
// contiguous(...) of them otherwise (the copies then sit in the graph).
bool all_contiguous(std::initializer_list<Tensor> ts);
// dst <- src elementwise through both tensors' strides (same shape, dtype
// and device; no autograd). Throws when dst is an expanded view (stride 0).
void copy_view(const Tensor& src, const Tensor& dst);

// Element 0 of t, view or not, for kernels that take t's strides.
inline char* view_ptr(const Tensor& t) {
  return static_cast<char*>(t.impl().storage->data) + t.impl().offset;
}

// A float32 tensor's data, or null where it is undefined (optional kernel arguments).
inline float* ptr(const Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; }

// An uninitialised float32 tensor on t's device.
inline Tensor empty_like(const Tensor& t, const Shape& shape) {
  return Tensor::empty(shape, kFloat32, t.device());
}

// Throws unless every label of a host tensor lies in [0, x.size(1)), naming
// the first that does not and x as `what` (other devices' kernels trust
// their labels).
void check_labels(const char* op, const Tensor& labels, const Tensor& x, const char* what);

// The device's elementwise kernels on float32 tensors, without autograd:
// out = op(a, b) broadcast (name is the op for errors), out = op(x, s).
Tensor broadcast_map(const Tensor& a, const Tensor& b, const char* name, BinaryOp op);
// The coalesced index map of broadcasting a and b to out (kernels.h's Broadcast).
Broadcast broadcast_index(const Shape& a, const Shape& b, const Shape& out, const char* name);
Tensor unary_map(const Tensor& x, UnaryOp op, float s = 0);
// g [x's shape] -> g f(x), f the op (kernels.h's unary_grad), no autograd
Tensor unary_grad_map(const Tensor& g, const Tensor& x, UnaryOp op, float s = 0);

// acc += g in place (no autograd): acc a contiguous float32 tensor, g a
// float32 tensor of its shape on its device, any view. g is read through its
// strides where its innermost dim (after merging the dims that can be) has
// stride 0 or 1 (expand's, permute's, slices' views), else copied out first.
void add_into(const Tensor& acc, const Tensor& g);

}  // namespace minidl
