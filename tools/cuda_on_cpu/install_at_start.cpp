// Linked into test builds of the examples (lenet_mnist_cuda_on_cpu): installs
// the emulated CUDA backend before main, so that `--device cuda` runs the
// backend's kernel code on the CPU.
#include "cuda_on_cpu/runtime.h"

namespace {
const bool installed = (minidl::testing::install_cuda_on_cpu(), true);
}  // namespace
