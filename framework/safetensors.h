// safetensors checkpoints, byte-compatible with the Python `safetensors`
// package (so PyTorch reads what minidl writes, and the reverse), and
// TensorDict, the ordered name -> Tensor map that state dicts and checkpoint
// contents use.
//
// File layout (all integers little-endian):
//   [0, 8)        N, the header length in bytes (uint64)
//   [8, 8 + N)    UTF-8 JSON object, space-padded to a multiple of 8 bytes:
//                 {"conv1.weight": {"dtype": "F32", "shape": [6, 1, 5, 5],
//                                   "data_offsets": [BEGIN, END]}, ...,
//                  "__metadata__": {"key": "value"}}      (optional)
//   [8 + N, EOF)  the data section: each tensor's bytes, row-major, at
//                 [BEGIN, END) relative to the start of the section.
// dtypes: F32, F16, I32, I64 (minidl's four); other dtypes are an error.
#pragma once
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "framework/tensor.h"

namespace minidl {

// Named tensors in insertion order, with lookup by name. Names are unique.
// Values are Tensor handles: a TensorDict from state_dict() shares storage
// with the parameters.
class TensorDict {
 public:
  using Item = std::pair<std::string, Tensor>;
  TensorDict() = default;
  TensorDict(std::initializer_list<Item> items);
  explicit TensorDict(const std::map<std::string, Tensor>& items);  // name order
  explicit TensorDict(const std::vector<Item>& items);

  // Appends; throws minidl::Error when the name is already present.
  void insert(const std::string& name, const Tensor& value);
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  // Throws minidl::Error naming the missing key (and listing a few present ones).
  const Tensor& at(const std::string& name) const;
  Tensor& at(const std::string& name);
  const Tensor& operator[](const std::string& name) const { return at(name); }

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  std::vector<std::string> keys() const;
  std::vector<Item>::const_iterator begin() const { return items_.begin(); }
  std::vector<Item>::const_iterator end() const { return items_.end(); }
  const std::vector<Item>& items() const { return items_; }

 private:
  std::vector<Item> items_;
  std::map<std::string, size_t> index_;
};

// What a training checkpoint holds of one object (an optimizer, a schedule):
// named tensors, and named values as text written exactly (integers in
// decimal, doubles with 17 significant digits), which a safetensors file
// keeps in its "__metadata__".
struct StateDict {
  TensorDict tensors;
  std::map<std::string, std::string> values;

  void set_int(const std::string& key, int64_t v);
  void set_double(const std::string& key, double v);  // reads back bit for bit
  // The value of `key`; throws minidl::Error naming `what` (the reader, e.g.
  // "Adam::load_state_dict"), the key and the text when absent or not a number.
  const std::string& get(const std::string& key, const char* what) const;
  int64_t get_int(const std::string& key, const char* what) const;
  double get_double(const std::string& key, const char* what) const;
  // Adds `part`'s entries, every name prefixed with "<prefix>." (a checkpoint
  // of several objects: put("model", ...), put("optimizer", ...)).
  void put(const std::string& prefix, const StateDict& part);
  // The entries named "<prefix>.<name>", as <name>.
  StateDict take(const std::string& prefix) const;
};

// Writes `tensors` (in their order) and optional string metadata to `path`.
// The file is written to "<target>.tmp.<pid>", fsynced, renamed over the
// target and the directory fsynced, so a crash never leaves a torn
// checkpoint; temporaries of earlier saves to the same target whose process
// is gone (killed before their rename) are removed first
// (remove_stale_temporaries, framework/output_file.h). The target is the file
// `path` names after symbolic links (the link stays a link); an existing
// target keeps its mode, and one that is not a regular file (a directory,
// /dev/full) is refused. Tensors must be defined CPU tensors; names must be
// non-empty and not "__metadata__".
// Throws minidl::Error naming the file and the cause (cannot open, write
// failed, not a regular file, bad name); a failed save removes its temporary
// file and leaves an existing target as it was.
void save_safetensors(const std::string& path, const TensorDict& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads a safetensors file; tensors come back in data-offset order (the order
// they were saved in, for files minidl wrote). When `metadata` is given it
// receives the "__metadata__" entries (empty when absent).
// Throws minidl::Error naming the file and what is wrong: missing or
// unreadable file, file shorter than its header, header that is not JSON or
// not an object, unknown dtype, shape/offset mismatch, overlapping or
// out-of-range data offsets (byte offsets are given), trailing bytes.
TensorDict load_safetensors(const std::string& path,
                            std::map<std::string, std::string>* metadata = nullptr);

}  // namespace minidl
