// libFuzzer target for the IDX reader (data/idx.h), plain and gzip: any input
// either loads as a tensor whose every byte can be read, or throws
// minidl::Error. A crash, a sanitizer report, another exception or an
// allocation beyond -rss_limit_mb is a finding.
#include <cstdint>

#include "data/idx.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const minidl::fuzz::InputFile file(data, size);
  const std::string& path = file.path();
  for (minidl::DType dtype : {minidl::kFloat32, minidl::kInt64}) {
    try {
      const minidl::Tensor t = minidl::data::read_idx(path, dtype);
      minidl::fuzz::touch(t.raw_data(), t.nbytes());
    } catch (const minidl::Error&) {
    }
  }
  return 0;
}
