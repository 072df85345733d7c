// The CUDA-on-CPU emulator's one entry for tests (tools/cuda_on_cpu).
#pragma once

namespace minidl::testing {

// Installs, under Device::CUDA, a kernel table whose entries are the CUDA
// backend's own kernel code (framework/backend/cuda/*.cu) run by the
// emulator on host memory: GEMM on OpenBLAS, no cuDNN, CUDA graphs recorded
// and replayed by graphs.h.
void install_cuda_on_cpu();

}  // namespace minidl::testing
