// The maximum of 2x2 windows, 16 in the lanes of AVX-512 vectors: shared by
// max_pool2d's kernel (kernels.cpp) and the fused conv + relu + pool
// (conv_lanes.cpp), so both give the same bits and the same argmax.
#pragma once
#include "framework/backend/cpu/dispatch.h"
#if MINIDL_HAVE_AVX512
// GCC 12 warns that its own _mm512_undefined_*, inside some intrinsics, "may
// be used uninitialized" (a known false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <limits>

namespace minidl::cpu {

// One window per lane, cells p, q (top row) and u, v (bottom row).
struct Max2x2 {
  __m512 max;         // the first maximum; NaN where a cell is NaN
  __m512i cell;       // its cell: 0 p, 1 q, 2 u, 3 v (3 where a cell is NaN)
  __mmask16 any_nan;  // lanes with a NaN cell
};

MINIDL_AVX512_BEGIN
inline Max2x2 max2x2(__m512 p, __m512 q, __m512 u, __m512 v) {
  // std::max(a, b) is max_ps(b, a), down to which zero (+0 or -0) it keeps
  __m512 m = _mm512_max_ps(_mm512_max_ps(v, u), _mm512_max_ps(q, p));
  const __mmask16 any_nan = _mm512_cmp_ps_mask(p, q, _CMP_UNORD_Q) |
                            _mm512_cmp_ps_mask(u, v, _CMP_UNORD_Q);
  m = _mm512_mask_mov_ps(m, any_nan, _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN()));
  // not-max flags: the cell is past p, past q, past u (all read true against NaN)
  const __mmask16 f = _mm512_cmp_ps_mask(p, m, _CMP_NEQ_UQ);
  const __mmask16 fs = f & _mm512_cmp_ps_mask(q, m, _CMP_NEQ_UQ);
  const __mmask16 fst = fs & _mm512_cmp_ps_mask(u, m, _CMP_NEQ_UQ);
  const __m512i one = _mm512_set1_epi32(1);
  __m512i cell = _mm512_maskz_mov_epi32(f, one);
  cell = _mm512_mask_add_epi32(cell, fs, cell, one);
  cell = _mm512_mask_add_epi32(cell, fst, cell, one);
  return {m, cell, any_nan};
}
MINIDL_AVX512_END

}  // namespace minidl::cpu
#endif
