// libFuzzer target for the safetensors reader (framework/safetensors.h): any
// input either loads as tensors (and metadata) whose every byte can be read,
// or throws minidl::Error. A crash, a sanitizer report, another exception or
// an allocation beyond -rss_limit_mb is a finding.
#include <cstdint>
#include <map>
#include <string>

#include "framework/safetensors.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const minidl::fuzz::InputFile file(data, size);
  const std::string& path = file.path();
  try {
    std::map<std::string, std::string> metadata;
    minidl::TensorDict tensors = minidl::load_safetensors(path, &metadata);
    for (const auto& [name, t] : tensors) {
      minidl::fuzz::touch(t.raw_data(), t.nbytes());
    }
  } catch (const minidl::Error&) {
  }
  return 0;
}
