// The build-dependent part of the CUDA-only API (framework/cuda.h; the
// settings and is_available are framework/cuda.cpp's) in a build without
// CUDA: answered as on a machine without a GPU. A backend a test installs
// under Device::CUDA counts as available but is no GPU.
#include "framework/backend/backend.h"
#include "framework/cuda.h"
#include "framework/error.h"

namespace minidl::cuda {
const Backend* backend_if_present() { return nullptr; }
const char* absent_reason() {
  return "minidl was built without CUDA: configure with -DMINIDL_CUDA=ON";
}

std::vector<std::string> conv_choices() { return {}; }
int device_count() { return 0; }
void set_device(int index) {
  throw Error(cat("cuda::set_device(", index, "): no CUDA GPU here"));
}
void prefer_device(int) {}
int device() { return 0; }

}  // namespace minidl::cuda
