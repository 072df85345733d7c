// The build-dependent part of the CUDA-only API (framework/cuda.h; the
// settings and is_available are framework/cuda.cpp's) in a build with CUDA:
// which GPU the process uses, and the convolution choices made.
#include <algorithm>
#include <mutex>

#include "framework/backend/cuda/cuda.h"
#include "framework/cuda.h"
#include "framework/error.h"

namespace minidl::cuda {
namespace {

std::mutex device_mutex;  // guards the three below
int requested = 0;    // set_device's index, or prefer_device's (taken modulo the GPUs)
bool chosen = false;  // by set_device
int in_use = -1;      // fixed by claim_device

// The GPU `requested` names on a host of `count` (device_mutex held).
int pick(int count) { return chosen ? requested : requested % std::max(count, 1); }

}  // namespace

std::vector<std::string> conv_choices() { return conv_choice_lines(); }

// A backend a test installed (tests/emulated_device.h) is not a GPU.
int device_count() { return is_available() ? gpu_count() : 0; }

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

}  // namespace minidl::cuda
