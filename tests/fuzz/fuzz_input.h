// What the fuzz targets share: the readers take a path, so each input is
// written to one scratch file per process (in $TMPDIR or /tmp) and read back.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace minidl::fuzz {

// Writes `data` to this process's scratch file and returns its path.
inline const std::string& as_file(const uint8_t* data, size_t size) {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/minidl_fuzz_" + std::to_string(getpid());
  }();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) std::abort();
  return path;
}

// Reads every byte of a loaded tensor, so an allocation smaller than the
// shape claims shows up under AddressSanitizer.
inline uint8_t touch(const void* bytes, size_t n) {
  const volatile uint8_t* p = static_cast<const volatile uint8_t*>(bytes);
  uint8_t acc = 0;
  for (size_t i = 0; i < n; ++i) acc ^= p[i];
  return acc;
}

}  // namespace minidl::fuzz
