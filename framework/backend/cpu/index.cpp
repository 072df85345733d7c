// CPU kernels for the table's index entries (issue 22): index_select and
// index_add, gather_dim and scatter_add_dim, and the ternary select `where`
// (see backend/kernels.h). Letters: OUTER, D, INNER the dims around the
// indexed one, I the number of indices.
#include <cmath>
#include <cstring>

#include "framework/backend/activations.h"
#include "framework/backend/cpu/cpu.h"
#include "framework/backend/cpu/dispatch.h"

namespace minidl::cpu {
namespace {

int64_t index_at(const void* index, DType t, int64_t i) {
  return t == kInt64 ? static_cast<const int64_t*>(index)[i]
                     : static_cast<int64_t>(static_cast<const int32_t*>(index)[i]);
}

}  // namespace

// x [OUTER, D, INNER], index [I] -> out [OUTER, I, INNER]
void index_select(size_t es, int64_t outer, int64_t d, int64_t inner, const void* x, int64_t count,
                  const void* index, DType it, void* out) {
  const char* src = static_cast<const char*>(x);
  char* dst = static_cast<char*>(out);
  const size_t row = inner * es;
#pragma omp parallel for if (outer * count * inner > 65536)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < count; ++i) {
      const int64_t j = index_at(index, it, i);
      char* to = dst + (o * count + i) * row;
      if (j < 0 || j >= d)
        std::memset(to, 0xff, row);
      else
        std::memcpy(to, src + (o * d + j) * row, row);
    }
}

// src [OUTER, I, INNER] -> out [OUTER, D, INNER] += at index[i]
void index_add(int64_t outer, int64_t d, int64_t inner, int64_t count, const void* index, DType it,
               const float* src, float* out) {
#pragma omp parallel for if (outer * count * inner > 65536)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < count; ++i) {
      const int64_t j = index_at(index, it, i);
      if (j < 0 || j >= d) continue;
      const float* s = src + (o * count + i) * inner;
      float* t = out + (o * d + j) * inner;
      for (int64_t k = 0; k < inner; ++k) t[k] += s[k];
    }
}

// x [OUTER, D, INNER], index [OUTER, I, INNER] -> out [OUTER, I, INNER]
void gather_dim(int64_t outer, int64_t d, int64_t inner, int64_t count, const float* x,
                const void* index, DType it, float* out) {
  const int64_t n = outer * count * inner;
#pragma omp parallel for if (n > 65536)
  for (int64_t e = 0; e < n; ++e) {
    const int64_t k = e % inner, o = e / (inner * count), j = index_at(index, it, e);
    out[e] = j >= 0 && j < d ? x[(o * d + j) * inner + k] : NAN;
  }
}

// src, index [OUTER, I, INNER] -> out [OUTER, D, INNER] += src (serial: indices may repeat)
void scatter_add_dim(int64_t outer, int64_t d, int64_t inner, int64_t count, const void* index,
                     DType it, const float* src, float* out) {
  const int64_t n = outer * count * inner;
  for (int64_t e = 0; e < n; ++e) {
    const int64_t k = e % inner, o = e / (inner * count), j = index_at(index, it, e);
    if (j >= 0 && j < d) out[(o * d + j) * inner + k] += src[e];
  }
}

namespace {

// A row of where's output, o [n] = c ? a : b, each of c, a, b read with
// stride 1 (C1, A1, B1) or 0 (broadcast); a bit-level pick, so the loop
// vectorizes (a `?:` between loads makes GCC branch)
template <class C, bool C1, bool A1, bool B1>
MINIDL_CLONES void select_row(int64_t n, const C* c, const float* a, const float* b, float* o) {
  for (int64_t j = 0; j < n; ++j)
    o[j] = act::pick(c[C1 ? j : 0] != C(0), a[A1 ? j : 0], b[B1 ? j : 0]);
}

// The row by its strides: those of 0 and 1 in the loops above, others here
template <class C>
void select_strided(int64_t n, const C* c, int64_t ic, const float* a, int64_t ia,
                    const float* b, int64_t ib, float* o) {
  const auto unit = [](int64_t st) { return st == 0 || st == 1; };
  if (!unit(ic) || !unit(ia) || !unit(ib)) {
    for (int64_t j = 0; j < n; ++j) o[j] = c[j * ic] != C(0) ? a[j * ia] : b[j * ib];
    return;
  }
  using Row = void (*)(int64_t, const C*, const float*, const float*, float*);
  static constexpr Row rows[8] = {
      select_row<C, 0, 0, 0>, select_row<C, 0, 0, 1>, select_row<C, 0, 1, 0>,
      select_row<C, 0, 1, 1>, select_row<C, 1, 0, 0>, select_row<C, 1, 0, 1>,
      select_row<C, 1, 1, 0>, select_row<C, 1, 1, 1>};
  rows[ic * 4 + ia * 2 + ib](n, c, a, b, o);
}

}  // namespace

// out [sel.n] = cond ? a : b
void where(const Select& s, const void* cond, DType ct, const float* a, const float* b,
           float* out) {
  // rows of the innermost dim: the outer offsets once per row (a division per
  // dim), then strides along the row
  const int last = s.nd - 1;
  const int64_t inner = s.nd > 0 ? s.size[last] : 1, rows = inner > 0 ? s.n / inner : 0;
  const int64_t ic = s.nd > 0 ? s.stride_c[last] : 0, ia = s.nd > 0 ? s.stride_a[last] : 0,
                ib = s.nd > 0 ? s.stride_b[last] : 0;
#pragma omp parallel for if (s.n > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rem = r, oc = 0, oa = 0, ob = 0;
    for (int d = last - 1; d >= 0; --d) {
      const int64_t idx = rem % s.size[d];
      rem /= s.size[d];
      oc += idx * s.stride_c[d];
      oa += idx * s.stride_a[d];
      ob += idx * s.stride_b[d];
    }
    float* o = out + r * inner;
    if (ct == kInt64)
      select_strided(inner, static_cast<const int64_t*>(cond) + oc, ic, a + oa, ia, b + ob, ib, o);
    else if (ct == kInt32)
      select_strided(inner, static_cast<const int32_t*>(cond) + oc, ic, a + oa, ia, b + ob, ib, o);
    else
      select_strided(inner, static_cast<const float*>(cond) + oc, ic, a + oa, ia, b + ob, ib, o);
  }
}

}  // namespace minidl::cpu
