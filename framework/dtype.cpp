#include "framework/dtype.h"

#include <bit>

namespace minidl {

size_t dtype_size(DType t) {
  switch (t) {
    case kFloat32: return 4;
    case kFloat16: return 2;
    case kInt32: return 4;
    case kInt64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case kFloat32: return "float32";
    case kFloat16: return "float16";
    case kInt32: return "int32";
    case kInt64: return "int64";
  }
  return "?";
}

float half_to_float(Half h) {
  uint32_t sign = (h.bits & 0x8000u) << 16, exp = (h.bits >> 10) & 0x1f, man = h.bits & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);  // inf / nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);  // normal
  } else if (man == 0) {
    bits = sign;  // zero
  } else {        // subnormal: renormalise
    int e = -1;
    do {
      ++e;
      man <<= 1;
    } while ((man & 0x400u) == 0);
    bits = sign | ((112 - e) << 23) | ((man & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

Half float_to_half(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u)  // inf or nan
    return {static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0))};
  if (absx >= 0x477ff000u) return {static_cast<uint16_t>(sign | 0x7c00u)};  // overflow
  if (absx < 0x38800000u) {  // subnormal half or zero: add as float, magic rounding
    float a = std::bit_cast<float>(absx) + 0.5f;  // 0.5 = 2^-1: shifts man into place
    return {static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(a) - 0x3f000000u))};
  }
  uint32_t mant_odd = (absx >> 13) & 1;
  absx += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
  return {static_cast<uint16_t>(sign | (absx >> 13))};
}

}  // namespace minidl
