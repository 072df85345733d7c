// Runtime CPU dispatch for the hot loops. The default build (MINIDL_NATIVE
// OFF) compiles the library for the x86-64 baseline, so it runs on any x86-64
// CPU, and CMake defines MINIDL_CPU_DISPATCH (GCC on x86-64):
// - MINIDL_CLONES before a function compiles it, and the OpenMP regions in
//   it, three times: for x86-64-v4 (AVX-512 F, BW, CD, DQ, VL), x86-64-v3
//   (AVX2, FMA) and the baseline; the dynamic loader picks the best the CPU
//   has once, when the library loads (GCC's target_clones, an ifunc). For
//   plain loops that the compiler vectorizes.
// - Code written with AVX-512 intrinsics sits between MINIDL_AVX512_BEGIN and
//   MINIDL_AVX512_END (after the #includes: only the functions defined there
//   are compiled for AVX-512) inside `#if MINIDL_HAVE_AVX512`, and is called
//   only when cpu_has_avx512() says so.
// With MINIDL_NATIVE (-march=native) there are no clones, and the AVX-512
// code is compiled where the building machine has AVX-512 (__AVX512F__).
#pragma once

#if defined(MINIDL_CPU_DISPATCH)
#define MINIDL_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define MINIDL_HAVE_AVX512 1
#define MINIDL_AVX512_BEGIN \
  _Pragma("GCC push_options") _Pragma("GCC target(\"arch=x86-64-v4\")")
#define MINIDL_AVX512_END _Pragma("GCC pop_options")
#else
#define MINIDL_CLONES
#define MINIDL_AVX512_BEGIN
#define MINIDL_AVX512_END
#if defined(__AVX512F__)
#define MINIDL_HAVE_AVX512 1
#else
#define MINIDL_HAVE_AVX512 0
#endif
#endif

namespace minidl::cpu {

// Whether the AVX-512 code may run here: it was compiled in and the CPU has
// x86-64-v4's AVX-512.
inline bool cpu_has_avx512() {
#if defined(MINIDL_CPU_DISPATCH)
  static const bool has = __builtin_cpu_supports("x86-64-v4");
  return has;
#elif defined(__AVX512F__)
  return true;
#else
  return false;
#endif
}

}  // namespace minidl::cpu
