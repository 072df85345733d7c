// Element types. float16 is a storage type: ops compute in float32.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace minidl {

enum class DType { Float32, Float16, Int32, Int64 };
inline constexpr DType kFloat32 = DType::Float32, kFloat16 = DType::Float16,
                       kInt32 = DType::Int32, kInt64 = DType::Int64;

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "float32", ...
inline bool is_floating(DType t) { return t == kFloat32 || t == kFloat16; }

// IEEE half stored as its bit pattern; conversions round to nearest even.
struct Half {
  uint16_t bits = 0;
};
float half_to_float(Half h);
Half float_to_half(float f);

// Maps a C++ element type to its DType.
template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = kFloat32; };
template <> struct dtype_of<Half> { static constexpr DType value = kFloat16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = kInt32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = kInt64; };

}  // namespace minidl
