// A new device in one folder: the CPU's kernels behind a table that counts
// every call, over an allocator of its own that counts bytes and copies. It
// is added to minidl by this folder, its CMake target and one registry line
//
//   register_backend(Device::CUDA, &counting::backend());
//
// and touches no op front end: tests/counting_device/test_counting_device.cpp
// trains on it and checks that it gives the CPU's bits. (Device has two
// values, so the new device takes the CUDA slot; a real one would add its
// enum value and name in framework/device.h.)
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "framework/backend/backend.h"

namespace minidl::counting {

const Backend& backend();  // table.cpp

// Calls of each kernel entry by name ("gemm", "update", ...) since the start.
std::map<std::string, int64_t> kernel_calls();  // table.cpp

struct MemoryCounts {
  int64_t live_bytes, allocations, to_device, to_host, within;  // copies by direction
};
MemoryCounts memory_counts();  // allocator.cpp
const Allocator& allocator();   // allocator.cpp

}  // namespace minidl::counting
