// The one place that knows which devices exist: the CPU's table always, and
// CUDA's when minidl is built with it and a GPU is present.
#include <atomic>
#include <mutex>

#include "framework/backend/cpu/cpu.h"
#include "framework/error.h"
#ifdef MINIDL_CUDA
#include "framework/backend/cuda/cuda.h"
#endif

namespace minidl {
namespace {

#ifdef MINIDL_CUDA
constexpr const char* kCudaMissing = "no CUDA GPU found";
#else
constexpr const char* kCudaMissing = "minidl was built without CUDA: configure with -DMINIDL_CUDA=ON";
#endif
std::once_flag cuda_probe;
std::atomic<bool> tf32{false};
const Kernels* cuda_table = nullptr;

const Kernels* cuda_kernels() {
#ifdef MINIDL_CUDA
  std::call_once(cuda_probe, [] {
    if (!cuda_table) cuda_table = cuda::table_if_present();
  });
#endif
  return cuda_table;
}

}  // namespace

void set_kernels(Device d, const Kernels* table) {
  MINIDL_CHECK(d != Device::CPU, "set_kernels: the CPU's table is fixed");
  std::call_once(cuda_probe, [] {});  // an installed table wins over the probe
  cuda_table = table;
}

namespace cuda {
void set_allow_tf32(bool allow) { tf32.store(allow); }
bool allow_tf32() { return tf32.load(); }
}  // namespace cuda

bool device_available(Device d) { return d == Device::CPU || cuda_kernels() != nullptr; }

const Kernels& kernels(Device d) {
  if (d == Device::CPU) return cpu::table();
  const Kernels* k = cuda_kernels();
  MINIDL_CHECK(k, "device cuda: not available (", kCudaMissing, ")");
  return *k;
}

}  // namespace minidl
