#include "framework/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "framework/output_file.h"

namespace minidl {

static_assert(std::endian::native == std::endian::little,
              "safetensors I/O copies tensor bytes as-is: little-endian hosts only");

// ---- TensorDict ----
TensorDict::TensorDict(std::initializer_list<Item> items) {
  for (const auto& [name, t] : items) insert(name, t);
}
TensorDict::TensorDict(const std::map<std::string, Tensor>& items) {
  for (const auto& [name, t] : items) insert(name, t);
}
TensorDict::TensorDict(const std::vector<Item>& items) {
  for (const auto& [name, t] : items) insert(name, t);
}

void TensorDict::insert(const std::string& name, const Tensor& value) {
  MINIDL_CHECK(!contains(name), "TensorDict: duplicate name '", name, "'");
  index_[name] = items_.size();
  items_.emplace_back(name, value);
}

Tensor& TensorDict::at(const std::string& name) {
  auto it = index_.find(name);
  if (it == index_.end()) {
    std::string some;
    for (size_t i = 0; i < items_.size() && i < 8; ++i) some += (i ? ", " : "") + items_[i].first;
    if (items_.size() > 8) some += ", ...";
    throw Error(cat("TensorDict: no tensor named '", name, "' (", items_.size(),
                    " names: ", some.empty() ? "none" : some, ")"));
  }
  return items_[it->second].second;
}
const Tensor& TensorDict::at(const std::string& name) const {
  return const_cast<TensorDict*>(this)->at(name);
}

std::vector<std::string> TensorDict::keys() const {
  std::vector<std::string> k;
  for (const auto& item : items_) k.push_back(item.first);
  return k;
}

// ---- StateDict ----
void StateDict::set_int(const std::string& key, int64_t v) { values[key] = std::to_string(v); }

void StateDict::set_double(const std::string& key, double v) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", v);
  values[key] = text;
}

const std::string& StateDict::get(const std::string& key, const char* what) const {
  auto it = values.find(key);
  MINIDL_CHECK(it != values.end(), what, ": the state has no value '", key, "'");
  return it->second;
}

int64_t StateDict::get_int(const std::string& key, const char* what) const {
  const std::string& text = get(key, what);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  MINIDL_CHECK(ec == std::errc() && end == text.data() + text.size(), what, ": value '", key,
               "' is '", text, "', expected an integer");
  return v;
}

double StateDict::get_double(const std::string& key, const char* what) const {
  const std::string& text = get(key, what);
  char* end = nullptr;
  const double v = text.empty() ? 0 : std::strtod(text.c_str(), &end);
  MINIDL_CHECK(!text.empty() && *end == 0, what, ": value '", key, "' is '", text,
               "', expected a number");
  return v;
}

void StateDict::put(const std::string& prefix, const StateDict& part) {
  for (const auto& [name, t] : part.tensors) tensors.insert(prefix + "." + name, t);
  for (const auto& [key, v] : part.values) values[prefix + "." + key] = v;
}

StateDict StateDict::take(const std::string& prefix) const {
  const std::string p = prefix + ".";
  StateDict part;
  for (const auto& [name, t] : tensors)
    if (name.starts_with(p)) part.tensors.insert(name.substr(p.size()), t);
  for (const auto& [key, v] : values)
    if (key.starts_with(p)) part.values[key.substr(p.size())] = v;
  return part;
}

// ---- safetensors ----
namespace {

using Json = nlohmann::json;
constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the Python package's limit

const char* st_dtype(DType t) {
  switch (t) {
    case kFloat32:
      return "F32";
    case kFloat16:
      return "F16";
    case kInt32:
      return "I32";
    case kInt64:
      return "I64";
  }
  return "?";
}

bool parse_dtype(const std::string& s, DType* out) {
  static const std::map<std::string, DType> known{
      {"F32", kFloat32}, {"F16", kFloat16}, {"I32", kInt32}, {"I64", kInt64}};
  auto it = known.find(s);
  if (it == known.end()) return false;
  *out = it->second;
  return true;
}

// The bytes `shape` holds in `dtype`, or nullopt when a product overflows:
// the element count, the product of the nonzero sizes (what strides multiply)
// or the bytes passing INT64_MAX.
std::optional<uint64_t> checked_nbytes(const Shape& shape, DType dtype) {
  int64_t nonzero = 1, bytes = static_cast<int64_t>(dtype_size(dtype));
  for (int64_t d : shape)
    if (__builtin_mul_overflow(nonzero, std::max<int64_t>(d, 1), &nonzero) ||
        __builtin_mul_overflow(bytes, d, &bytes))
      return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

}  // namespace

void save_safetensors(const std::string& path, const TensorDict& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string op = "save_safetensors('" + path + "')";
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    MINIDL_CHECK(!name.empty() && name != "__metadata__", op, ": invalid tensor name '", name, "'");
    MINIDL_CHECK(t.defined(), op, ": tensor '", name, "' is undefined");
    MINIDL_CHECK(t.device() == Device::CPU, op, ": tensor '", name, "' is not on the CPU");
    header[name] = {{"dtype", st_dtype(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception&) {  // the only cause: a string that is not UTF-8
    throw Error(cat(op, ": a tensor name or metadata entry is not valid UTF-8 (safetensors "
                    "headers are JSON)"));
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // data section starts 8-byte aligned
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(uint64_t(text.size()) >> (8 * i));

  // Written beside the file a symlink names (so the link stays), keeping an
  // existing file's mode; never over a directory or a device such as /dev/full.
  const std::string target = resolve_links(path);
  check_replaceable(target, op);
  struct stat existing;
  const bool keep_mode = ::stat(target.c_str(), &existing) == 0;
  remove_stale_temporaries(target);  // what saves killed before their rename left
  const std::string tmp = target + ".tmp." + std::to_string(::getpid());
  std::FILE* raw = std::fopen(tmp.c_str(), "wb");
  MINIDL_CHECK(raw, op, ": cannot open '", tmp, "' for writing: ", std::strerror(errno));
  bool ok;
  {
    File f(raw);
    ok = (!keep_mode || ::fchmod(::fileno(raw), existing.st_mode & 07777) == 0) &&
         std::fwrite(len, 1, 8, raw) == 8 &&
         std::fwrite(text.data(), 1, text.size(), raw) == text.size();
    for (const auto& item : tensors) {
      const Tensor t = item.second.detach().contiguous().cpu();  // a view's own elements
      if (ok && t.nbytes()) ok = std::fwrite(t.raw_data(), 1, t.nbytes(), raw) == t.nbytes();
    }
    ok = ok && std::fflush(raw) == 0 && ::fsync(::fileno(raw)) == 0;
  }
  if (!ok) {
    int err = errno;
    std::remove(tmp.c_str());
    throw Error(cat(op, ": writing '", tmp, "' failed: ", std::strerror(err)));
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    throw Error(cat(op, ": cannot rename '", tmp, "' to '", target, "': ", std::strerror(err)));
  }
  // The rename is durable once the directory is synced (EINVAL: it cannot be).
  std::string dir = std::filesystem::path(target).parent_path().string();
  const int dir_fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  const bool synced = dir_fd >= 0 && (::fsync(dir_fd) == 0 || errno == EINVAL);
  const int err = errno;
  if (dir_fd >= 0) ::close(dir_fd);
  MINIDL_CHECK(synced, op, ": wrote '", target, "' but cannot sync its directory: ",
               std::strerror(err));
}

TensorDict load_safetensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  const std::string op = "load_safetensors('" + path + "')";
  File f(std::fopen(path.c_str(), "rb"));
  MINIDL_CHECK(f, op, ": cannot open file: ", std::strerror(errno));
  MINIDL_CHECK(std::fseek(f.get(), 0, SEEK_END) == 0, op, ": cannot seek: ", std::strerror(errno));
  const long size_l = std::ftell(f.get());
  MINIDL_CHECK(size_l >= 0, op, ": cannot tell the file size: ", std::strerror(errno));
  const uint64_t file_size = static_cast<uint64_t>(size_l);
  std::rewind(f.get());

  MINIDL_CHECK(file_size >= 8, op, ": the file is ", file_size,
               " bytes, shorter than the 8-byte header length (not a safetensors file?)");
  unsigned char len[8];
  MINIDL_CHECK(std::fread(len, 1, 8, f.get()) == 8, op, ": cannot read the header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  MINIDL_CHECK(n <= kMaxHeaderBytes, op, ": header length ", n, " (bytes 0-7) exceeds the ",
               kMaxHeaderBytes, "-byte limit (not a safetensors file?)");
  MINIDL_CHECK(n <= file_size - 8, op, ": header length ", n,
               " (bytes 0-7) runs past the end of the ", file_size,
               "-byte file (truncated, or not a safetensors file)");
  std::string text(n, '\0');
  MINIDL_CHECK(std::fread(text.data(), 1, n, f.get()) == n, op, ": cannot read the ", n,
               "-byte header");
  Json header;
  try {
    header = Json::parse(text);
  } catch (const Json::exception& e) {
    throw Error(cat(op, ": the header (bytes 8-", 8 + n, ") is not valid JSON: ", e.what()));
  }
  MINIDL_CHECK(header.is_object(), op, ": the header must be a JSON object, got ",
               header.type_name());

  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  if (metadata) metadata->clear();
  for (const auto& [name, info] : header.items()) {
    const std::string where = op + ": tensor '" + name + "'";
    if (name == "__metadata__") {
      MINIDL_CHECK(info.is_object(), op, ": __metadata__ must be an object of strings");
      for (const auto& [k, v] : info.items()) {
        MINIDL_CHECK(v.is_string(), op, ": __metadata__ value for '", k, "' is not a string");
        if (metadata) (*metadata)[k] = v.get<std::string>();
      }
      continue;
    }
    MINIDL_CHECK(info.is_object() && info.contains("dtype") && info.contains("shape") &&
                     info.contains("data_offsets"),
                 where, ": expected an object with dtype, shape and data_offsets, got ",
                 info.dump());
    Entry e{name, kFloat32, {}, 0, 0};
    const Json& dt = info["dtype"];
    MINIDL_CHECK(dt.is_string() && parse_dtype(dt.get<std::string>(), &e.dtype), where,
                 ": unsupported dtype ", dt.dump(), " (minidl reads F32, F16, I32, I64)");
    const Json& sh = info["shape"];
    MINIDL_CHECK(sh.is_array(), where, ": shape must be an array, got ", sh.dump());
    for (const Json& d : sh) {
      MINIDL_CHECK(d.is_number_unsigned() && d.get<uint64_t>() <= INT64_MAX, where, ": bad shape ",
                   sh.dump(), " (sizes are integers from 0 to 2^63 - 1)");
      e.shape.push_back(d.get<int64_t>());
    }
    const std::optional<uint64_t> want = checked_nbytes(e.shape, e.dtype);
    MINIDL_CHECK(want, where, ": shape ", e.shape, " of ", st_dtype(e.dtype),
                 " overflows: its sizes multiply past 2^63 elements or bytes");
    const Json& off = info["data_offsets"];
    MINIDL_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
                     off[1].is_number_unsigned() &&
                     off[0].get<uint64_t>() <= off[1].get<uint64_t>(),
                 where, ": data_offsets must be [begin, end] with begin <= end, got ", off.dump());
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    MINIDL_CHECK(e.end - e.begin == *want, where, ": shape ", e.shape, " of ", st_dtype(e.dtype),
                 " needs ", *want, " bytes but data_offsets [", e.begin, ", ", e.end, "] span ",
                 e.end - e.begin);
    entries.push_back(std::move(e));
  }

  // Tensors tile the data section exactly, as the Python package requires.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
  });
  const uint64_t data_start = 8 + n, data_size = file_size - data_start;
  uint64_t expect = 0;
  for (const Entry& e : entries) {
    MINIDL_CHECK(e.begin == expect, op, ": tensor '", e.name, "' starts at data byte ", e.begin,
                 " but the previous tensor ends at ", expect,
                 " (overlapping or gapped data_offsets)");
    MINIDL_CHECK(e.end <= data_size, op, ": truncated: tensor '", e.name, "' needs file bytes [",
                 data_start + e.begin, ", ", data_start + e.end, ") but the file has ", file_size,
                 " bytes");
    expect = e.end;
  }
  MINIDL_CHECK(expect == data_size, op, ": ", data_size - expect,
               " trailing bytes after the last tensor (file offset ", data_start + expect, ")");

  TensorDict out;
  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    const size_t nb = t.nbytes();
    if (nb)
      MINIDL_CHECK(std::fseek(f.get(), static_cast<long>(data_start + e.begin), SEEK_SET) == 0 &&
                       std::fread(t.raw_data(), 1, nb, f.get()) == nb,
                   op, ": cannot read tensor '", e.name, "' at file offset ", data_start + e.begin);
    out.insert(e.name, t);
  }
  return out;
}

}  // namespace minidl
