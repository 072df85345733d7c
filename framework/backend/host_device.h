// MINIDL_HOST_DEVICE marks a function that both host code and CUDA kernels
// call: __host__ __device__ under nvcc, nothing elsewhere (the CPU backend,
// and the CUDA-on-CPU emulator, which compiles the .cu files as C++).
#pragma once

#if defined(__CUDACC__)
#define MINIDL_HOST_DEVICE __host__ __device__
#else
#define MINIDL_HOST_DEVICE
#endif
