// Checks shared by the op files.
#pragma once
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

}  // namespace minidl
