// CharCorpus and random_windows (data/text.h): the vocabulary, encode/decode,
// the windows' offsets (the documented SplitMix64 rule, computed in Python:
// seed 7, index 3, B 2 over N 1000, T 10 gives offsets 628 and 372), errors.
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "data/text.h"

using namespace minidl;

namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace

TEST_CASE("CharCorpus: sorted distinct bytes, ids, and a round trip") {
  data::CharCorpus c(write_temp("minidl_text_a.txt", "abca\nb"));
  CHECK(c.vocab() == "\nabc");
  CHECK(c.vocab_size() == 4);
  CHECK(c.size() == 6);
  CHECK(c.ids().to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 1, 0, 2});
  CHECK(c.decode(c.ids()) == "abca\nb");
  CHECK(c.decode(c.encode("cab").to(kInt32)) == "cab");
  CHECK_THROWS_WITH_AS(c.encode("abz"), doctest::Contains("byte 122 at position 2"), Error);
  CHECK_THROWS_WITH_AS(c.decode(Tensor::of_ints({0, 4})), doctest::Contains("id 4 at position 1"),
                       Error);
  CHECK_THROWS_WITH_AS(data::CharCorpus("/nonexistent/minidl.txt"),
                       doctest::Contains("scripts/get_text.sh"), Error);
  CHECK_THROWS_WITH_AS(data::CharCorpus(write_temp("minidl_text_empty.txt", "")),
                       doctest::Contains("is empty"), Error);
}

TEST_CASE("random_windows: SplitMix64 offsets, labels shifted by one, same index same batch") {
  Tensor ids = Tensor::arange(1000, kInt64);
  data::Batch b = data::random_windows(ids, /*batch=*/2, /*steps=*/10, /*seed=*/7, /*index=*/3);
  CHECK(b.data.shape() == Shape{2, 10});
  CHECK(b.labels.shape() == Shape{2, 10});
  CHECK(b.data.at({0, 0}) == 628);  // ids are their positions: the offsets themselves
  CHECK(b.data.at({1, 0}) == 372);
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t t = 0; t < 10; ++t) {
      CHECK(b.data.at({r, t}) == b.data.at({r, 0}) + t);
      CHECK(b.labels.at({r, t}) == b.data.at({r, t}) + 1);
    }
  CHECK(data::random_windows(ids, 2, 10, 7, 3).data.to_vector<int64_t>() ==
        b.data.to_vector<int64_t>());
  CHECK(data::random_windows(ids, 2, 10, 7, 4).data.to_vector<int64_t>() !=
        b.data.to_vector<int64_t>());
  CHECK_THROWS_WITH_AS(data::random_windows(ids, 2, 1000, 7, 0),
                       doctest::Contains("0 < steps < 1000"), Error);
  CHECK_THROWS_WITH_AS(data::random_windows(ids.to(kFloat32), 2, 10, 7, 0),
                       doctest::Contains("int64"), Error);
}
