// A floating value converted to an integer type the way CUDA's conversion
// instructions do it (cvt.rzi.sat): toward zero, NaN -> 0, values at or beyond
// the type's range (+-inf included) -> its max or min. A plain static_cast of
// such a value is undefined behaviour in C++; the CPU and CUDA casts and fills
// both call this, so every device gives the same integers. Usable from host
// code and CUDA device code alike.
#pragma once
#include <cstdint>
#include <type_traits>

#include "framework/backend/host_device.h"

namespace minidl {

// v (float or double) -> I (int32_t or int64_t), saturating as above.
template <class I, class F>
MINIDL_HOST_DEVICE inline I float_to_int(F v) {
  static_assert(std::is_integral_v<I> && std::is_signed_v<I> && std::is_floating_point_v<F>);
  constexpr I kMax = static_cast<I>((uint64_t{1} << (8 * sizeof(I) - 1)) - 1);
  constexpr I kMin = -kMax - 1;
  // 2^(bits-1), exact in float and double
  constexpr F kLimit = static_cast<F>(uint64_t{1} << (8 * sizeof(I) - 1));
  if (v != v) return 0;           // NaN
  if (v >= kLimit) return kMax;   // +inf and everything past max
  if (v <= -kLimit) return kMin;  // -inf and everything down to min (min itself is exact)
  return static_cast<I>(v);       // |v| < 2^(bits-1): defined, truncates toward zero
}

}  // namespace minidl
