// matmul, linear and transpose. Every product goes through cblas_sgemm.
#include <algorithm>
#include <cstring>

#include "framework/backend/cpu/cpu.h"
#include "framework/ops.h"
#include "framework/ops/util.h"

namespace minidl {

// a [M, K] x b [K, N] -> [M, N]
// a [B, M, K] x b [B, K, N] -> [B, M, N];  a [B, M, K] x b [K, N] -> [B, M, N]
Tensor matmul(const Tensor& a, const Tensor& b) {
  require_f32("matmul", a, "left operand");
  require_f32("matmul", b, "right operand");
  const bool batched = a.dim() == 3;
  MINIDL_CHECK((a.dim() == 2 && b.dim() == 2) || (batched && (b.dim() == 3 || b.dim() == 2)),
               "matmul: ", a.shape(), " x ", b.shape(),
               ": expected 2-D x 2-D, or 3-D x 3-D or 2-D (batched)");
  const int64_t batch = batched ? a.size(0) : 1, m = a.size(-2), k = a.size(-1);
  const int64_t kb = b.size(-2), n = b.size(-1);
  MINIDL_CHECK(k == kb, "matmul: ", a.shape(), " x ", b.shape(), ": inner dimensions ", k,
               " and ", kb, " differ");
  const bool b_batched = b.dim() == 3;
  MINIDL_CHECK(!b_batched || b.size(0) == batch, "matmul: ", a.shape(), " x ", b.shape(),
               ": batch sizes ", batch, " and ", b.size(0), " differ");
  if (batched && !b_batched) {  // one GEMM over the stacked rows
    Tensor out = matmul(a.reshape({batch * m, k}), b);
    return out.reshape({batch, m, n});
  }
  Tensor out = Tensor::empty(batched ? Shape{batch, m, n} : Shape{m, n});
  const float *pa = a.data<float>(), *pb = b.data<float>();
  float* po = out.data<float>();
  for (int64_t i = 0; i < batch; ++i)
    cpu::gemm(false, false, m, n, k, 1.f, pa + i * m * k, pb + i * k * n, 0.f, po + i * m * n);
  return record(out, "matmul", {a, b}, [a, b, batch, m, n, k](const Tensor& g) {
    // ga = g b^T [M, K]; gb = a^T g [K, N]
    Tensor ga, gb;
    const float *pg = g.data<float>(), *pa = a.data<float>(), *pb = b.data<float>();
    if (a.requires_grad()) {
      ga = Tensor::empty(a.shape());
      for (int64_t i = 0; i < batch; ++i)
        cpu::gemm(false, true, m, k, n, 1.f, pg + i * m * n, pb + i * k * n, 0.f,
                  ga.data<float>() + i * m * k);
    }
    if (b.requires_grad()) {
      gb = Tensor::empty(b.shape());
      for (int64_t i = 0; i < batch; ++i)
        cpu::gemm(true, false, k, n, m, 1.f, pa + i * m * k, pg + i * m * n, 0.f,
                  gb.data<float>() + i * k * n);
    }
    return std::vector<Tensor>{ga, gb};
  });
}

// x [N, IN], w [OUT, IN], b [OUT] -> [N, OUT]
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  require_f32("linear", x);
  require_f32("linear", w, "weight");
  require_dim("linear", x, 2);
  require_dim("linear", w, 2, "weight");
  const int64_t n = x.size(0), in = x.size(1), out_f = w.size(0);
  MINIDL_CHECK(w.size(1) == in, "linear: input ", x.shape(), " and weight ", w.shape(),
               ": expected weight [out, ", in, "], got in-features ", w.size(1));
  if (b.defined()) {
    require_f32("linear", b, "bias");
    MINIDL_CHECK(b.shape() == Shape{out_f}, "linear: weight ", w.shape(), " and bias ", b.shape(),
                 ": expected bias [", out_f, "]");
  }
  Tensor out = Tensor::empty({n, out_f});
  float* po = out.data<float>();
  const float* pb = b.defined() ? b.data<float>() : nullptr;
  if (n <= 32 && out_f > n) {
    // Small batch: out^T [OUT, N] = w [OUT, IN] x^T [IN, N], then transposed.
    // OpenBLAS is faster with the weight in that place (784->512 at N 32: 153
    // vs 204 us on 1 thread, 110 vs 127 on 2; from N 48 on it is not, and on
    // 2 threads slower). bench_ops' linear_b32 case measures it.
    std::vector<float> t(static_cast<size_t>(out_f * n), 0.f);
    if (pb)
      for (int64_t o = 0; o < out_f; ++o) std::fill_n(t.data() + o * n, n, pb[o]);
    cpu::gemm(false, true, out_f, n, in, 1.f, w.data<float>(), x.data<float>(), pb ? 1.f : 0.f,
              t.data());
    cpu::transpose(t.data(), out_f, n, po);
  } else {
    if (pb)
      for (int64_t i = 0; i < n; ++i) std::copy(pb, pb + out_f, po + i * out_f);
    cpu::gemm(false, true, n, out_f, in, 1.f, x.data<float>(), w.data<float>(), pb ? 1.f : 0.f, po);
  }
  return record(out, "linear", {x, w, b}, [x, w, b, n, in, out_f](const Tensor& g) {
    Tensor gx, gw, gb;
    const float* pg = g.data<float>();
    if (x.requires_grad()) {  // gx [N, IN] = g [N, OUT] w [OUT, IN]
      gx = Tensor::empty(x.shape());
      cpu::gemm(false, false, n, in, out_f, 1.f, pg, w.data<float>(), 0.f, gx.data<float>());
    }
    if (w.requires_grad()) {  // gw [OUT, IN] = g^T [OUT, N] x [N, IN]
      gw = Tensor::empty(w.shape());
      cpu::gemm(true, false, out_f, in, n, 1.f, pg, x.data<float>(), 0.f, gw.data<float>());
    }
    if (b.defined() && b.requires_grad()) {  // gb [OUT] = column sums of g
      gb = Tensor::zeros({out_f});
      float* pgb = gb.data<float>();
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < out_f; ++j) pgb[j] += pg[i * out_f + j];
    }
    return std::vector<Tensor>{gx, gw, gb};
  });
}

// x [..., A, ..., B, ...] -> [..., B, ..., A, ...] (a contiguous copy)
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  d0 = normalize_dim(d0, x.dim(), "transpose");
  d1 = normalize_dim(d1, x.dim(), "transpose");
  if (d0 == d1 || x.dim() < 2) return x.clone();
  Shape os = x.shape();
  std::swap(os[d0], os[d1]);
  Tensor out = Tensor::empty(os, x.dtype());
  const int64_t nd = x.dim(), rows = x.shape()[nd - 2], cols = x.shape()[nd - 1];
  if (x.dtype() == kFloat32 && std::min(d0, d1) == nd - 2) {
    // [batch, rows, cols] -> [batch, cols, rows]: the tiled kernel per matrix
    for (int64_t i = 0; rows * cols > 0 && i < x.numel() / (rows * cols); ++i)
      cpu::transpose(x.data<float>() + i * rows * cols, rows, cols,
                     out.data<float>() + i * rows * cols);
  } else {  // any dtype, any two dims: element by element
    const int64_t es = static_cast<int64_t>(dtype_size(x.dtype()));
    std::vector<int64_t> in_strides(nd, 1);
    for (int64_t d = nd - 2; d >= 0; --d) in_strides[d] = in_strides[d + 1] * x.shape()[d + 1];
    std::swap(in_strides[d0], in_strides[d1]);  // stride of each output dim in x
    const char* src = static_cast<const char*>(x.raw_data());
    char* dst = static_cast<char*>(out.raw_data());
    std::vector<int64_t> idx(nd, 0);
    for (int64_t o = 0; o < out.numel(); ++o) {
      int64_t off = 0;
      for (int64_t d = 0; d < nd; ++d) off += idx[d] * in_strides[d];
      std::memcpy(dst + o * es, src + off * es, es);
      for (int64_t d = nd - 1; d >= 0 && ++idx[d] == os[d]; --d) idx[d] = 0;
    }
  }
  return record(out, "transpose", {x}, [d0, d1](const Tensor& g) {
    return std::vector<Tensor>{transpose(g, d0, d1)};
  });
}

}  // namespace minidl
