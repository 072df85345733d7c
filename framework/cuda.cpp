// The part of the CUDA-only API (framework/cuda.h) that is the same in every
// build: the two settings the kernels read, and whether a CUDA backend is
// present (a GPU's, or one a test installed). The rest is answered by
// backend/cuda/settings.cpp, or by backend/no_cuda/cuda.cpp without CUDA.
#include "framework/cuda.h"

#include <atomic>

#include "framework/backend/backend.h"

namespace minidl::cuda {
namespace {
std::atomic<bool> tf32{false};
std::atomic<ConvAlgorithm> conv_setting{ConvAlgorithm::Auto};
}  // namespace

void set_allow_tf32(bool allow) { tf32.store(allow); }
bool allow_tf32() { return tf32.load(); }
void set_conv_algorithm(ConvAlgorithm algorithm) { conv_setting.store(algorithm); }
ConvAlgorithm conv_algorithm() { return conv_setting.load(); }

bool is_available() { return device_available(Device::CUDA); }
void synchronize() {
  if (is_available()) allocator(Device::CUDA).synchronize();
}

}  // namespace minidl::cuda
