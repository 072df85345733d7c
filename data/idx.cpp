#include "data/idx.h"

#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

namespace minidl::data {
namespace {

// The element types an IDX file can hold, by type code.
struct IdxType {
  uint8_t code;
  const char* name;
  size_t size;
  bool floating;
};
constexpr IdxType kIdxTypes[] = {{0x08, "ubyte", 1, false},  {0x09, "byte", 1, false},
                                 {0x0B, "int16", 2, false},  {0x0C, "int32", 4, false},
                                 {0x0D, "float32", 4, true}, {0x0E, "float64", 8, true}};

// A sanity limit on what a header may declare (2^40 values: 1 TB of ubyte).
constexpr uint64_t kMaxValues = uint64_t{1} << 40;

const IdxType* find_type(uint8_t code) {
  for (const auto& t : kIdxTypes)
    if (t.code == code) return &t;
  return nullptr;
}

std::string hex(uint64_t v, int digits) {
  static const char* kDigits = "0123456789ABCDEF";
  std::string s = "0x";
  for (int i = digits - 1; i >= 0; --i) s += kDigits[(v >> (4 * i)) & 15];
  return s;
}

// A file read through zlib (which passes plain files through unchanged),
// counting decompressed bytes so errors can name the offset.
class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    MINIDL_CHECK(fs::exists(path, ec), "read_idx: '", path, "': no such file");
    MINIDL_CHECK(!fs::is_directory(path, ec), "read_idx: '", path, "' is a directory, not a file");
    file_ = gzopen(path.c_str(), "rb");
    MINIDL_CHECK(file_, "read_idx: cannot open '", path, "': ", std::strerror(errno));
    gzbuffer(file_, 1 << 17);
  }
  ~GzReader() { gzclose(file_); }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Reads up to n bytes and returns how many it got: fewer only at the end of
  // the data. A corrupt or cut-off gzip stream throws.
  size_t read(void* dst, size_t n) {
    size_t got = 0;
    while (got < n) {
      unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - got, 1u << 30));
      int r = gzread(file_, static_cast<char*>(dst) + got, chunk);
      if (r <= 0) {
        check_stream();
        break;
      }
      got += static_cast<size_t>(r);
    }
    offset_ += got;
    return got;
  }

  uint64_t offset() const { return offset_; }
  bool plain() const { return gzdirect(file_) == 1; }
  // " (in the decompressed data)" for gzip files, so offsets are not misread.
  std::string where() const {
    return cat("byte offset ", offset_, plain() ? "" : " of the decompressed data");
  }

 private:
  void check_stream() {
    int errnum = Z_OK;
    const char* msg = gzerror(file_, &errnum);
    if (errnum == Z_OK) return;
    if (errnum == Z_BUF_ERROR)
      throw Error(cat("read_idx: '", path_, "': the gzip stream is cut short at ", where(), " (",
                      msg, "); the file is truncated"));
    if (errnum == Z_ERRNO)
      throw Error(
          cat("read_idx: '", path_, "': read error at ", where(), ": ", std::strerror(errno)));
    throw Error(cat("read_idx: '", path_, "': corrupt gzip data at ", where(), ": ", msg));
  }

  std::string path_;
  gzFile file_ = nullptr;
  uint64_t offset_ = 0;
};

uint64_t load_be(const unsigned char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

// One big-endian element of IDX type `code` as a double (exact for every type).
template <uint8_t code>
double decode(const unsigned char* p) {
  if constexpr (code == 0x08) return p[0];
  if constexpr (code == 0x09) return static_cast<int8_t>(p[0]);
  if constexpr (code == 0x0B) return static_cast<int16_t>(load_be(p, 2));
  if constexpr (code == 0x0C) return static_cast<int32_t>(load_be(p, 4));
  if constexpr (code == 0x0D) {
    uint32_t bits = static_cast<uint32_t>(load_be(p, 4));
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  if constexpr (code == 0x0E) {
    uint64_t bits = load_be(p, 8);
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
}

template <class T>
T store_as(double v) {
  if constexpr (std::is_same_v<T, Half>)
    return float_to_half(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

// Converts n elements of IDX type `code` at src into T at dst.
template <uint8_t code, class T>
void convert(const unsigned char* src, T* dst, size_t n, size_t elem) {
  for (size_t i = 0; i < n; ++i) dst[i] = store_as<T>(decode<code>(src + i * elem));
}

template <class T>
void convert_any(uint8_t code, const unsigned char* src, T* dst, size_t n, size_t elem) {
  switch (code) {
    case 0x08:
      return convert<0x08>(src, dst, n, elem);
    case 0x09:
      return convert<0x09>(src, dst, n, elem);
    case 0x0B:
      return convert<0x0B>(src, dst, n, elem);
    case 0x0C:
      return convert<0x0C>(src, dst, n, elem);
    case 0x0D:
      return convert<0x0D>(src, dst, n, elem);
    case 0x0E:
      return convert<0x0E>(src, dst, n, elem);
  }
}

void convert_to(DType dtype, uint8_t code, const unsigned char* src, void* dst, size_t n,
                size_t elem) {
  switch (dtype) {
    case kFloat32:
      return convert_any(code, src, static_cast<float*>(dst), n, elem);
    case kFloat16:
      return convert_any(code, src, static_cast<Half*>(dst), n, elem);
    case kInt32:
      return convert_any(code, src, static_cast<int32_t*>(dst), n, elem);
    case kInt64:
      return convert_any(code, src, static_cast<int64_t*>(dst), n, elem);
  }
}

}  // namespace

Tensor read_idx(const std::string& path, DType dtype) {
  GzReader in(path);

  // Magic: 0x00 0x00 <type code> <dimension count>.
  unsigned char magic[4];
  size_t got = in.read(magic, 4);
  MINIDL_CHECK(got == 4, "read_idx: '", path, "': truncated header: the file ends at ", in.where(),
               ", inside the 4-byte magic number");
  const IdxType* type = find_type(magic[2]);
  MINIDL_CHECK(magic[0] == 0 && magic[1] == 0 && type, "read_idx: '", path,
               "': wrong magic number ", hex(load_be(magic, 4), 8),
               " at byte offset 0: an IDX file starts with two zero bytes, a type code (0x08 "
               "ubyte, 0x09 byte, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64) and a "
               "dimension count; is this an IDX file?");
  MINIDL_CHECK(!type->floating || is_floating(dtype), "read_idx: '", path, "' holds ", type->name,
               " values, which cannot be read as ", dtype_name(dtype),
               "; read them as float32 or float16");

  // Dimensions: one big-endian uint32 each.
  const int ndims = magic[3];
  const uint64_t header_bytes = 4 + 4 * static_cast<uint64_t>(ndims);
  std::vector<unsigned char> dims_raw(4 * static_cast<size_t>(ndims));
  got = in.read(dims_raw.data(), dims_raw.size());
  MINIDL_CHECK(got == dims_raw.size(), "read_idx: '", path,
               "': truncated header: the file ends at ", in.where(), ", inside the ", header_bytes,
               "-byte header (", ndims, " dimension sizes after the magic number)");
  // Every product of sizes is checked: the count, and the product of the
  // nonzero sizes (what strides multiply), stays within kMaxValues.
  Shape shape(ndims);
  for (int d = 0; d < ndims; ++d) shape[d] = static_cast<int64_t>(load_be(&dims_raw[4 * d], 4));
  uint64_t count = 1, nonzero = 1;
  for (int64_t size : shape) {
    const bool overflow =
        __builtin_mul_overflow(nonzero, static_cast<uint64_t>(std::max<int64_t>(size, 1)), &nonzero);
    MINIDL_CHECK(!overflow && nonzero <= kMaxValues, "read_idx: '", path, "': the header's sizes ",
                 shape, " describe more than 2^40 values; the header is corrupt");
    count *= static_cast<uint64_t>(size);
  }
  const uint64_t data_bytes = count * type->size;
  auto truncated = [&](uint64_t end) {
    return Error(cat("read_idx: '", path, "': truncated data: the header says ", shape, " ",
                     type->name, " = ", data_bytes, " bytes after the ", header_bytes,
                     "-byte header, but the file ends at ",
                     end == in.offset() ? in.where() : cat("byte offset ", end), " (",
                     end - header_bytes, " data bytes)"));
  };
  // A plain file's size is known: a corrupt header fails here, before reading.
  if (in.plain()) {
    std::error_code ec;
    const uint64_t file_bytes = std::filesystem::file_size(path, ec);
    if (!ec && file_bytes < header_bytes + data_bytes) throw truncated(file_bytes);
  }

  // The data bytes, in chunks into a buffer that grows with what was read: a
  // gzip file's decompressed size is unknown up front, so a header claiming
  // 34 GB from a 40-byte file fails at the file's end, having allocated what it
  // held, and the tensor is allocated only once every byte is there.
  std::vector<unsigned char> bytes;
  constexpr uint64_t kChunk = uint64_t{1} << 20;
  while (bytes.size() < data_bytes) {
    const size_t done = bytes.size(), n = std::min(kChunk, data_bytes - done);
    bytes.resize(done + n);
    if (in.read(bytes.data() + done, n) != n) throw truncated(in.offset());
  }
  unsigned char extra;
  const uint64_t end = in.offset();
  MINIDL_CHECK(in.read(&extra, 1) == 0, "read_idx: '", path,
               "': unexpected bytes after the data at ", "byte offset ", end, ": the header says ",
               shape, " ", type->name, ", which ends there");

  Tensor out;
  try {
    out = Tensor::empty(shape, dtype);
  } catch (const std::bad_alloc&) {
    throw Error(cat("read_idx: '", path, "': cannot allocate ", shape, " ", dtype_name(dtype),
                    " for the data the header describes"));
  }
  convert_to(dtype, type->code, bytes.data(), out.raw_data(), count, type->size);
  return out;
}

void write_idx(const std::string& path, const Tensor& values) {
  const int64_t ndims = values.dim();
  MINIDL_CHECK(ndims >= 1 && ndims <= 255, "write_idx: '", path,
               "': an IDX file holds 1 to 255 dimensions, got shape ", values.shape());
  std::vector<unsigned char> bytes = {0, 0, 0x08, static_cast<unsigned char>(ndims)};
  for (int64_t d : values.shape()) {
    MINIDL_CHECK(d <= 0xFFFFFFFFll, "write_idx: '", path, "': dimension ", d,
                 " does not fit the header's uint32 in shape ", values.shape());
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(static_cast<unsigned char>(d >> s));
  }
  const std::vector<float> v = values.to_float_vector();
  for (size_t i = 0; i < v.size(); ++i) {
    MINIDL_CHECK(v[i] >= 0 && v[i] <= 255 && v[i] == std::floor(v[i]), "write_idx: '", path,
                 "': element ", i, " is ", v[i], "; a ubyte IDX file holds whole numbers 0..255");
    bytes.push_back(static_cast<unsigned char>(v[i]));
  }

  const bool gz = path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  gzFile f = gzopen(path.c_str(), gz ? "wb6" : "wbT");  // T: write plain bytes
  MINIDL_CHECK(f, "write_idx: cannot create '", path, "': ", std::strerror(errno));
  const bool wrote = gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) ==
                     static_cast<int>(bytes.size());
  const bool closed = gzclose(f) == Z_OK;
  MINIDL_CHECK(wrote && closed, "write_idx: failed writing ", bytes.size(), " bytes to '", path,
               "'");
}

}  // namespace minidl::data
