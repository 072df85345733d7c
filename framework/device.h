// Devices a tensor's storage can live on.
#pragma once

namespace minidl {

enum class Device { CPU, CUDA };

inline const char* device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

// True when `d` can hold tensors in this process: always for the CPU; for
// CUDA when minidl was built with it and a GPU is present (or a test has
// installed a backend for it, see backend/kernels.h).
bool device_available(Device d);

namespace cuda {
// float32 GEMM and convolution on CUDA may use TF32 tensor cores (10-bit
// mantissa inputs) when allowed; off by default, as in PyTorch. No effect on
// the CPU or in a build without CUDA.
void set_allow_tf32(bool allow);
bool allow_tf32();
}  // namespace cuda

}  // namespace minidl
