// The one place that knows which devices exist: the CPU's table always, and
// CUDA's when minidl is built with it and a GPU is present.
#include <algorithm>
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
std::atomic<cuda::ConvAlgorithm> conv_setting{cuda::ConvAlgorithm::Auto};
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
void set_conv_algorithm(ConvAlgorithm algorithm) { conv_setting.store(algorithm); }
ConvAlgorithm conv_algorithm() { return conv_setting.load(); }

std::vector<std::string> conv_choices() {
#ifdef MINIDL_CUDA
  return conv_choice_lines();
#else
  return {};
#endif
}

namespace {
std::mutex device_mutex;  // guards the three below
int requested = 0;    // set_device's index, or prefer_device's (taken modulo the GPUs)
bool chosen = false;  // by set_device
int in_use = -1;      // fixed by claim_device

// The GPU `requested` names on a host of `count` (device_mutex held).
int pick(int count) { return chosen ? requested : requested % std::max(count, 1); }
}  // namespace

bool is_available() { return device_available(Device::CUDA); }

void synchronize() {
  if (is_available()) kernels(Device::CUDA).synchronize();
}

int device_count() {
#ifdef MINIDL_CUDA
  return cuda_kernels() ? cuda::gpu_count() : 0;
#else
  return 0;
#endif
}

void set_device(int index) {
  const int count = device_count();
  MINIDL_CHECK(count > 0, "cuda::set_device(", index, "): no CUDA GPU here");
  MINIDL_CHECK(index >= 0 && index < count, "cuda::set_device: expected a GPU index from 0 to ",
               count - 1, ", got ", index);
  std::lock_guard lock(device_mutex);
  MINIDL_CHECK(in_use < 0 || in_use == index, "cuda::set_device(", index, "): this process "
               "already uses GPU ", in_use, " (fixed at its first CUDA tensor); set the device "
               "before creating any");
  requested = index;
  chosen = true;
}

void prefer_device(int index) {  // no CUDA call: parallel::init stays off the driver
  std::lock_guard lock(device_mutex);
  if (!chosen && in_use < 0) requested = index;
}

int device() {
  const int count = device_count();
  std::lock_guard lock(device_mutex);
  return in_use >= 0 ? in_use : pick(count);
}

int claim_device(int count) {
  std::lock_guard lock(device_mutex);
  if (in_use < 0) in_use = pick(count);
  return in_use;
}
}  // namespace cuda

bool device_available(Device d) { return d == Device::CPU || cuda_kernels() != nullptr; }

const Kernels& kernels(Device d) {
  if (d == Device::CPU) return cpu::table();
  const Kernels* k = cuda_kernels();
  MINIDL_CHECK(k, "device cuda: not available (", kCudaMissing, ")");
  return *k;
}

}  // namespace minidl
