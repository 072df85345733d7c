// CharCorpus and random_windows (data/text.h).
#include "data/text.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "framework/error.h"

namespace minidl::data {
namespace fs = std::filesystem;

CharCorpus::CharCorpus(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MINIDL_CHECK(in.good(), "CharCorpus: cannot read '", path,
               "' (scripts/get_text.sh writes the default text)");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  MINIDL_CHECK(!text.empty(), "CharCorpus: '", path, "' is empty");
  bool seen[256] = {};
  for (unsigned char c : text) seen[c] = true;
  std::fill(std::begin(index_), std::end(index_), -1);
  for (int c = 0; c < 256; ++c)
    if (seen[c]) {
      index_[c] = static_cast<int64_t>(vocab_.size());
      vocab_.push_back(static_cast<char>(c));
    }
  ids_ = encode(text);
}

Tensor CharCorpus::encode(const std::string& text) const {
  Tensor ids = Tensor::empty({static_cast<int64_t>(text.size())}, kInt64);
  int64_t* out = ids.data<int64_t>();
  for (size_t i = 0; i < text.size(); ++i) {
    const int64_t id = index_[static_cast<unsigned char>(text[i])];
    MINIDL_CHECK(id >= 0, "CharCorpus::encode: byte ", static_cast<int>(static_cast<unsigned char>(text[i])),
                 " at position ", i, " is not in the corpus's vocabulary of ", vocab_size(),
                 " characters");
    out[i] = id;
  }
  return ids;
}

std::string CharCorpus::decode(const Tensor& ids) const {
  MINIDL_CHECK(ids.dtype() == kInt64 || ids.dtype() == kInt32,
               "CharCorpus::decode: expected int32 or int64 ids, got ", dtype_name(ids.dtype()));
  const Tensor host = ids.contiguous().to(kInt64).cpu();
  std::string text;
  for (int64_t i = 0; i < host.numel(); ++i) {
    const int64_t id = host.data<int64_t>()[i];
    MINIDL_CHECK(id >= 0 && id < vocab_size(), "CharCorpus::decode: id ", id, " at position ", i,
                 " out of range [0, ", vocab_size(), ")");
    text.push_back(vocab_[id]);
  }
  return text;
}

Batch random_windows(const Tensor& ids, int64_t batch, int64_t steps, uint64_t seed, int64_t index) {
  MINIDL_CHECK(ids.dtype() == kInt64 && ids.dim() == 1 && ids.device() == Device::CPU,
               "random_windows: expected CPU ids [N] int64, got ", dtype_name(ids.dtype()), " ",
               ids.shape());
  const int64_t n = ids.numel();
  MINIDL_CHECK(batch > 0 && steps > 0 && steps < n, "random_windows: batch ", batch, " and steps ",
               steps, ": expected batch > 0 and 0 < steps < ", n, " (the ids' length)");
  Tensor data = Tensor::empty({batch, steps}, kInt64), labels = Tensor::empty({batch, steps}, kInt64);
  const Tensor ic = ids.contiguous();
  const int64_t* src = ic.data<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(index * batch + b + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const int64_t o = static_cast<int64_t>(z % static_cast<uint64_t>(n - steps));
    std::copy_n(src + o, steps, data.data<int64_t>() + b * steps);
    std::copy_n(src + o + 1, steps, labels.data<int64_t>() + b * steps);
  }
  return {data, labels};
}

std::string default_text_path() {
  if (const char* root = std::getenv("MINIDL_DATA"); root && *root)
    return (fs::path(root) / "text" / "kjv.txt").string();
  const char* home = std::getenv("HOME");
  return (fs::path(home && *home ? home : ".") / ".cache" / "minidl" / "text" / "kjv.txt").string();
}

}  // namespace minidl::data
