// Stands in for CUDA's cuda_fp16.h in the CUDA-on-CPU emulator: __half as its
// bit pattern, converted by minidl's own float16 routines (framework/dtype.h,
// round to nearest even, as __float2half_rn).
#pragma once
#include "framework/dtype.h"

struct __half {
  minidl::Half bits;
};
inline __half __float2half_rn(float f) { return {minidl::float_to_half(f)}; }
inline float __half2float(__half h) { return minidl::half_to_float(h.bits); }
