// The one place that knows which devices exist: a slot per Device, the CPU's
// backend always, CUDA's when backend/cuda (or backend/no_cuda, which finds
// none) reports one at the first look.
#include <array>
#include <mutex>

#include "framework/backend/cpu/cpu.h"
#include "framework/error.h"

namespace minidl {
namespace {

std::once_flag probed;
std::array<const Backend*, kDeviceCount> slots{};

// Fills the slots once; a backend registered before the first look wins.
const std::array<const Backend*, kDeviceCount>& registry() {
  std::call_once(probed, [] {
    slots[static_cast<int>(Device::CPU)] = &cpu::backend();
    slots[static_cast<int>(Device::CUDA)] = cuda::backend_if_present();
  });
  return slots;
}

}  // namespace

void register_backend(Device d, const Backend* b) {
  MINIDL_CHECK(d != Device::CPU, "register_backend: the CPU's backend is fixed");
  (void)registry();
  slots[static_cast<int>(d)] = b;
}

bool device_available(Device d) { return registry()[static_cast<int>(d)] != nullptr; }

const Backend& backend(Device d) {
  const Backend* b = registry()[static_cast<int>(d)];
  MINIDL_CHECK(b, "device ", device_name(d), ": not available (",
               d == Device::CUDA ? cuda::absent_reason() : "no backend", ")");
  return *b;
}

const GraphOps* graph_ops(Device d) {
  const Backend* b = registry()[static_cast<int>(d)];
  return b ? b->graphs : nullptr;
}

bool capturing(Device d) {
  const GraphOps* g = graph_ops(d);
  return g && g->capturing();
}

std::vector<Device> present_devices() {
  std::vector<Device> present;
  for (int i = 0; i < kDeviceCount; ++i)
    if (registry()[i]) present.push_back(static_cast<Device>(i));
  return present;
}

}  // namespace minidl
