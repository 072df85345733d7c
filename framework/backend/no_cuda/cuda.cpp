// The CUDA-only API (framework/cuda.h) in a build without CUDA: answered as on
// a machine without a GPU. The two settings are kept, since they are a
// user's choice (and the CUDA-on-CPU tests read them); a backend a test
// installs under Device::CUDA counts as available but is no GPU.
#include <atomic>

#include "framework/backend/backend.h"
#include "framework/cuda.h"
#include "framework/error.h"

namespace minidl::cuda {
namespace {
std::atomic<bool> tf32{false};
std::atomic<ConvAlgorithm> conv_setting{ConvAlgorithm::Auto};
}  // namespace

const Backend* backend_if_present() { return nullptr; }
const char* absent_reason() {
  return "minidl was built without CUDA: configure with -DMINIDL_CUDA=ON";
}

void set_allow_tf32(bool allow) { tf32.store(allow); }
bool allow_tf32() { return tf32.load(); }
void set_conv_algorithm(ConvAlgorithm algorithm) { conv_setting.store(algorithm); }
ConvAlgorithm conv_algorithm() { return conv_setting.load(); }
std::vector<std::string> conv_choices() { return {}; }

bool is_available() { return device_available(Device::CUDA); }
void synchronize() {
  if (is_available()) allocator(Device::CUDA).synchronize();
}
int device_count() { return 0; }
void set_device(int index) {
  throw Error(cat("cuda::set_device(", index, "): no CUDA GPU here"));
}
void prefer_device(int) {}
int device() { return 0; }

}  // namespace minidl::cuda
