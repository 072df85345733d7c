// matmul, linear and transpose. Every product is the device's gemm kernel
// (OpenBLAS or oneDNN sgemm on the CPU, cuBLAS on CUDA).
#include <algorithm>
#include <numeric>

#include "framework/ops.h"
#include "framework/ops/util.h"

namespace minidl {
namespace {

// torch.matmul's general case, composed from ops (so the backward is theirs:
// expand sums over the broadcast batch dims): 1-D operands become a row or a
// column, batch dims broadcast and merge into one, and the 3-D product below
// runs once. a [..., M, K] x b [..., K, N] -> [broadcast(...), M, N].
Tensor matmul_broadcast(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  MINIDL_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: ", a.shape(), " x ", b.shape(),
               ": expected operands of at least 1 dim");
  MINIDL_CHECK((a.dim() >= 2 || !ta) && (b.dim() >= 2 || !tb), "matmul: ", a.shape(),
               (ta ? "^T" : ""), " x ", b.shape(), (tb ? "^T" : ""),
               ": a 1-D operand cannot be transposed");
  const Tensor a2 = a.dim() == 1 ? unsqueeze(a, 0) : a;   // [K] -> [1, K]
  const Tensor b2 = b.dim() == 1 ? unsqueeze(b, -1) : b;  // [K] -> [K, 1]
  const Shape ab(a2.shape().begin(), a2.shape().end() - 2),
      bb(b2.shape().begin(), b2.shape().end() - 2);
  const int64_t m = a2.size(ta ? -1 : -2), k = a2.size(ta ? -2 : -1);
  const int64_t kb = b2.size(tb ? -1 : -2), n = b2.size(tb ? -2 : -1);
  MINIDL_CHECK(k == kb, "matmul: ", a.shape(), (ta ? "^T" : ""), " x ", b.shape(), (tb ? "^T" : ""),
               ": inner dimensions ", k, " and ", kb, " differ");
  for (size_t i = 1; i <= std::min(ab.size(), bb.size()); ++i) {
    const int64_t da = ab[ab.size() - i], db = bb[bb.size() - i];
    MINIDL_CHECK(da == db || da == 1 || db == 1, "matmul: ", a.shape(), " x ", b.shape(),
                 ": batch dims ", ab, " and ", bb, " do not broadcast");
  }
  const Shape batch = broadcast_shape(ab, bb, "matmul");
  const int64_t nb = numel_of(batch);
  auto merged = [&](const Tensor& t, const Shape& own) {  // [batch..., R, C] -> [nb, R, C]
    Shape full = batch;
    full.push_back(t.size(-2));
    full.push_back(t.size(-1));
    return reshape(own == batch ? t : expand(t, full), {nb, t.size(-2), t.size(-1)});
  };
  Tensor out;
  if (bb.empty() && !ta)  // one GEMM over the stacked rows of a
    out = matmul(reshape(a2, {nb * a2.size(-2), a2.size(-1)}), b2, false, tb);
  else
    out = matmul(merged(a2, ab), merged(b2, bb), ta, tb);
  Shape os = batch;
  if (a.dim() > 1) os.push_back(m);
  if (b.dim() > 1) os.push_back(n);
  return reshape(out, os);
}

// A GEMM operand as the kernel reads it: row-major matrices of `ld`
// elements a row, `batch` elements apart, read transposed or not. A view
// with unit stride along its last dim goes in as it is (a narrow of the
// columns: ld is the full row); one with unit stride along the dim before
// (a transpose) goes in as the other layout, read the other way; any other
// view is copied first.
struct Operand {
  Tensor held;  // keeps a copy alive
  const float* p;
  bool trans;
  int64_t ld, batch;
};
Operand operand(const Tensor& t, bool trans) {
  const int64_t r = t.size(-2), c = t.size(-1);
  const std::vector<int64_t> st = t.strides();
  const int64_t sr = st[st.size() - 2], sc = st.back(), sb = t.dim() == 3 ? st[0] : 0;
  const float* p = reinterpret_cast<const float*>(view_ptr(t));
  if ((sc == 1 || c == 1) && (r == 1 || sr >= std::max<int64_t>(c, 1)))
    return {t, p, trans, r == 1 ? std::max<int64_t>(c, 1) : sr, sb};
  if ((sr == 1 || r == 1) && (c == 1 || sc >= std::max<int64_t>(r, 1)))
    return {t, p, !trans, c == 1 ? std::max<int64_t>(r, 1) : sc, sb};
  Tensor d = dense(t);
  return {d, d.data_ptr<float>(), trans, c, r * c};
}

}  // namespace

// op(a) [B, M, K] x op(b) [B, K, N] -> [B, M, N] (B = 1 for 2-D operands); the
// gradients are products again: C = op(A) op(B) gives dA = g op(B)^T (A^T:
// op(B) g^T) and dB = op(A)^T g (B^T: g^T op(A)).
Tensor matmul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  require_f32("matmul", a, "left operand");
  require_f32("matmul", b, "right operand");
  const bool plain = (a.dim() == 2 && b.dim() == 2) || (a.dim() == 3 && b.dim() == 2 && !ta) ||
                     (a.dim() == 3 && b.dim() == 3 && a.size(0) == b.size(0));
  if (!plain) return matmul_broadcast(a, b, ta, tb);
  const bool batched = a.dim() == 3;
  MINIDL_CHECK((a.dim() == 2 && b.dim() == 2) || (batched && (b.dim() == 3 || b.dim() == 2)),
               "matmul: ", a.shape(), " x ", b.shape(),
               ": expected 2-D x 2-D, or 3-D x 3-D or 2-D (batched)");
  const int64_t batch = batched ? a.size(0) : 1;
  const int64_t m = a.size(ta ? -1 : -2), k = a.size(ta ? -2 : -1);
  const int64_t kb = b.size(tb ? -1 : -2), n = b.size(tb ? -2 : -1);
  MINIDL_CHECK(k == kb, "matmul: ", a.shape(), (ta ? "^T" : ""), " x ", b.shape(),
               (tb ? "^T" : ""), ": inner dimensions ", k, " and ", kb, " differ");
  const bool b_batched = b.dim() == 3;
  MINIDL_CHECK(!b_batched || b.size(0) == batch, "matmul: ", a.shape(), " x ", b.shape(),
               ": batch sizes ", batch, " and ", b.size(0), " differ");
  if (batched && !b_batched) {  // one GEMM over the stacked rows
    MINIDL_CHECK(!ta, "matmul: ", a.shape(), "^T x ", b.shape(), ": a batched left operand "
                 "against a 2-D right one cannot be transposed");
    return matmul(a.reshape({batch * m, k}), b, false, tb).reshape({batch, m, n});
  }
  const Kernels& kern = kernels_for("matmul", a, {&b});
  Tensor out = empty_like(a, batched ? Shape{batch, m, n} : Shape{m, n});
  const Operand oa = operand(a, ta), ob = operand(b, tb);
  kern.gemm(oa.trans, ob.trans, m, n, k, 1.f, oa.p, oa.ld, oa.batch, ob.p, ob.ld, ob.batch, 0.f,
            out.data_ptr<float>(), n, m * n, batch);
  return record(out, "matmul", {a, b}, [a, b, ta, tb](const Tensor& g) {
    Tensor ga, gb;
    if (a.requires_grad()) ga = ta ? matmul(b, g, tb, true) : matmul(g, b, false, !tb);
    if (b.requires_grad()) gb = tb ? matmul(g, a, true, ta) : matmul(a, g, !ta, false);
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
  const Kernels& kern = kernels_for("linear", x, {&w, &b});
  Tensor out = empty_like(x, {n, out_f});
  kern.linear(n, in, out_f, dense(x).data_ptr<float>(), dense(w).data_ptr<float>(),
              b.defined() ? dense(b).data_ptr<float>() : nullptr, out.data_ptr<float>());
  return record(out, "linear", {x, w, b}, [x, w, b](const Tensor& g) {
    Tensor gx, gw, gb;
    if (x.requires_grad()) gx = matmul(g, w);                   // [N, OUT] x [OUT, IN]
    if (w.requires_grad()) gw = matmul(g, x, /*trans_a=*/true);  // [N, OUT]^T x [N, IN]
    if (b.defined() && b.requires_grad()) gb = sum(g, {0});     // column sums
    return std::vector<Tensor>{gx, gw, gb};
  });
}

// x [..., A, ..., B, ...] -> [..., B, ..., A, ...] (a view)
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  d0 = normalize_dim(d0, x.dim(), "transpose");
  d1 = normalize_dim(d1, x.dim(), "transpose");
  std::vector<int64_t> dims(x.dim());
  std::iota(dims.begin(), dims.end(), 0);
  if (x.dim() > 0) std::swap(dims[d0], dims[d1]);
  return permute(x, dims);
}

}  // namespace minidl
