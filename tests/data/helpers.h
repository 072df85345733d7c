// Helpers shared by the data tests: a scratch directory, raw file bytes, IDX
// headers built by hand, a gzip container built by hand (stored blocks, so the
// tests need no zlib), and the message of an expected minidl::Error.
#pragma once
#include <minidl/minidl.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace minidl::testing {

using Bytes = std::vector<uint8_t>;

// A fresh directory under the system temp dir, removed with everything in it.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("minidl_test_data_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

inline void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline Bytes read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// An IDX header: 0, 0, type, ndims, then big-endian uint32 dims; payload appended.
inline Bytes idx_bytes(uint8_t type, const std::vector<uint32_t>& dims, const Bytes& payload) {
  Bytes b = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(d >> s));
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

inline uint32_t crc32(const Bytes& data) {
  uint32_t c = 0xFFFFFFFFu;
  for (uint8_t byte : data) {
    c ^= byte;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

// A valid gzip file of `data` using uncompressed (stored) deflate blocks.
inline Bytes gzip_stored(const Bytes& data) {
  Bytes out = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};  // magic, deflate, no flags, mtime 0
  size_t pos = 0;
  do {
    const size_t n = std::min<size_t>(data.size() - pos, 65535);
    const bool last = pos + n == data.size();
    out.push_back(last ? 1 : 0);  // BFINAL, BTYPE = 00 (stored)
    const uint16_t len = static_cast<uint16_t>(n), nlen = static_cast<uint16_t>(~len);
    for (uint16_t v : {len, nlen}) {
      out.push_back(static_cast<uint8_t>(v));
      out.push_back(static_cast<uint8_t>(v >> 8));
    }
    out.insert(out.end(), data.begin() + pos, data.begin() + pos + n);
    pos += n;
  } while (pos < data.size());
  for (uint32_t v : {crc32(data), static_cast<uint32_t>(data.size())})
    for (int s = 0; s < 32; s += 8) out.push_back(static_cast<uint8_t>(v >> s));
  return out;
}

// The message of the minidl::Error that f throws, or "<no error>".
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const minidl::Error& e) {
    return e.what();
  }
  return "<no error>";
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace minidl::testing
