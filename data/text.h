// A character-level corpus for language models (examples/char_lstm.cpp,
// examples/tiny_gpt.cpp): a text file's bytes as int64 ids over the sorted
// set of distinct bytes it holds, and batches of random windows of it.
//
//   data::CharCorpus text(data::default_text_path());      // scripts/get_text.sh
//   Tensor train = text.ids().slice(0, text.size() * 9 / 10);
//   data::Batch b = data::random_windows(train, /*batch=*/32, /*steps=*/64, /*seed=*/0, step);
//   // b.data [32, 64] ids, b.labels [32, 64] the next character of each
#pragma once
#include <cstdint>
#include <string>

#include "data/dataset.h"
#include "framework/tensor.h"

namespace minidl::data {

class CharCorpus {
 public:
  // Reads the whole file; throws minidl::Error when it cannot be read or is empty.
  explicit CharCorpus(const std::string& path);
  int64_t size() const { return ids_.numel(); }  // bytes in the file
  int64_t vocab_size() const { return static_cast<int64_t>(vocab_.size()); }
  const std::string& vocab() const { return vocab_; }  // id i is the byte vocab()[i]
  const Tensor& ids() const { return ids_; }           // [size()] int64
  // text -> ids [text.size()] int64; a byte outside the vocabulary throws, naming it.
  Tensor encode(const std::string& text) const;
  // ids (int32 or int64, any shape, read in order) -> the text; an id outside
  // [0, vocab_size()) throws.
  std::string decode(const Tensor& ids) const;

 private:
  std::string vocab_;
  int64_t index_[256];  // byte -> id, -1 when absent
  Tensor ids_;
};

// Batch `index` of a stream of random windows of ids [N] int64: data [B, T] =
// ids[o_b .. o_b + T), labels [B, T] = ids[o_b + 1 .. o_b + T + 1), where
// o_b = splitmix64(seed + 0x9E3779B97F4A7C15 * (index * B + b + 1)) mod (N - T)
// (SplitMix64's finaliser; the same offsets in any language, and a resumed run
// needs only the index). Throws unless 0 < T < N and B > 0.
Batch random_windows(const Tensor& ids, int64_t batch, int64_t steps, uint64_t seed, int64_t index);

// Where scripts/get_text.sh puts the text: $MINIDL_DATA/text/kjv.txt when
// MINIDL_DATA is set, else $HOME/.cache/minidl/text/kjv.txt.
std::string default_text_path();

}  // namespace minidl::data
