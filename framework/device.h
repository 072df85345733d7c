// Devices a tensor's storage can live on.
#pragma once

namespace minidl {

enum class Device { CPU, CUDA };

inline const char* device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

inline constexpr int kDeviceCount = 2;  // Device values: the registry's slots

// True when `d` can hold tensors in this process: always for the CPU; for
// CUDA when minidl was built with it and a GPU is present (or a test has
// installed a backend for it, see backend/backend.h).
bool device_available(Device d);

}  // namespace minidl
