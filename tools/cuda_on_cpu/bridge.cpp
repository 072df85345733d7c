// The two settings the emulated kernels read from the library's public API
// (framework/cuda.h). This file is compiled without runtime.cpp's renaming
// of `cuda`, so it reaches the library's own minidl::cuda.
#include "framework/cuda.h"

namespace minidl::cuda_on_cpu {

bool allow_tf32() { return cuda::allow_tf32(); }
bool cudnn_forced() { return cuda::conv_algorithm() == cuda::ConvAlgorithm::Cudnn; }
bool direct_forced() { return cuda::conv_algorithm() == cuda::ConvAlgorithm::Direct; }

}  // namespace minidl::cuda_on_cpu
