// What the fuzz targets share: the readers take a path, so each input is
// written to a scratch file (in $TMPDIR or /tmp, removed after the run) and
// read back.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace minidl::fuzz {

// The input as this process's scratch file, for the life of the object.
class InputFile {
 public:
  InputFile(const uint8_t* data, size_t size) {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp") + "/minidl_fuzz_" + std::to_string(getpid());
    FILE* f = std::fopen(path_.c_str(), "wb");
    if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) std::abort();
  }
  ~InputFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Reads every byte of a loaded tensor, so an allocation smaller than the
// shape claims shows up under AddressSanitizer.
inline uint8_t touch(const void* bytes, size_t n) {
  const volatile uint8_t* p = static_cast<const volatile uint8_t*>(bytes);
  uint8_t acc = 0;
  for (size_t i = 0; i < n; ++i) acc ^= p[i];
  return acc;
}

}  // namespace minidl::fuzz
