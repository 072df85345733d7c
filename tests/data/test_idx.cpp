// read_idx / write_idx: hand-written good files in each type, round trips plain
// and gzip, and one test per kind of broken file, each checking that the error
// names the file and what was wrong.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/wait.h>

#include "data/helpers.h"

using namespace minidl;
using namespace minidl::testing;

TEST_CASE("read_idx reads a hand-written ubyte file as float32 or int64") {
  TempDir dir;
  const std::string path = dir.file("images-idx3-ubyte");
  write_bytes(path, idx_bytes(0x08, {2, 2, 3}, {0, 1, 2, 3, 4, 5, 250, 251, 252, 253, 254, 255}));
  Tensor x = data::read_idx(path);
  CHECK(x.dtype() == kFloat32);
  CHECK(x.shape() == Shape{2, 2, 3});
  CHECK(x.at({0, 0, 1}) == 1);
  CHECK(x.at({0, 1, 2}) == 5);
  CHECK(x.at({1, 1, 2}) == 255);
  Tensor y = data::read_idx(path, kInt64);
  CHECK(y.dtype() == kInt64);
  CHECK(y.to_vector<int64_t>() ==
        std::vector<int64_t>{0, 1, 2, 3, 4, 5, 250, 251, 252, 253, 254, 255});
}

TEST_CASE("read_idx decodes big-endian int16, int32, signed byte and float32 files") {
  TempDir dir;
  write_bytes(dir.file("i16"), idx_bytes(0x0B, {3}, {0xFF, 0xFE, 0x01, 0x00, 0x00, 0x07}));
  CHECK(data::read_idx(dir.file("i16"), kInt64).to_vector<int64_t>() ==
        std::vector<int64_t>{-2, 256, 7});
  write_bytes(dir.file("i32"),
              idx_bytes(0x0C, {2}, {0x00, 0x01, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF}));
  CHECK(data::read_idx(dir.file("i32"), kInt32).to_vector<int32_t>() ==
        std::vector<int32_t>{65536, -1});
  write_bytes(dir.file("i8"), idx_bytes(0x09, {2}, {0x80, 0x7F}));
  CHECK(data::read_idx(dir.file("i8")).to_float_vector() == std::vector<float>{-128, 127});
  // 1.5f = 0x3FC00000, -0.25f = 0xBE800000
  write_bytes(dir.file("f32"), idx_bytes(0x0D, {1, 2}, {0x3F, 0xC0, 0, 0, 0xBE, 0x80, 0, 0}));
  Tensor f = data::read_idx(dir.file("f32"));
  CHECK(f.shape() == Shape{1, 2});
  CHECK(f.to_float_vector() == std::vector<float>{1.5f, -0.25f});
  std::string err = error_of([&] { data::read_idx(dir.file("f32"), kInt64); });
  CHECK(contains(err, dir.file("f32")));
  CHECK(contains(err, "float32 values, which cannot be read as int64"));
}

TEST_CASE("write_idx then read_idx round-trips, plain and gzip") {
  TempDir dir;
  Tensor labels = Tensor::of_ints({7, 0, 255, 3, 9});
  Tensor images = Tensor::arange(2 * 3 * 4).reshape({2, 3, 4});
  for (const char* name : {"labels-idx1-ubyte", "labels-idx1-ubyte.gz"}) {
    data::write_idx(dir.file(name), labels);
    CHECK(data::read_idx(dir.file(name), kInt64).to_vector<int64_t>() ==
          labels.to_vector<int64_t>());
  }
  data::write_idx(dir.file("images.gz"), images);
  Bytes gz = read_bytes(dir.file("images.gz"));
  REQUIRE(gz.size() >= 2);
  CHECK((gz[0] == 0x1f && gz[1] == 0x8b));  // really gzip
  Tensor back = data::read_idx(dir.file("images.gz"));
  CHECK(back.shape() == Shape{2, 3, 4});
  CHECK(back.to_float_vector() == images.to_float_vector());
  data::write_idx(dir.file("images"), images);
  CHECK(read_bytes(dir.file("images")) == idx_bytes(0x08, {2, 3, 4}, [] {
          Bytes b;
          for (int i = 0; i < 24; ++i) b.push_back(i);
          return b;
        }()));
}

TEST_CASE("write_idx rejects values a ubyte cannot hold and unwritable paths") {
  TempDir dir;
  for (float bad : {256.f, -1.f, 0.5f}) {
    std::string err = error_of([&] { data::write_idx(dir.file("x"), Tensor::of({1, bad})); });
    CHECK(contains(err, "element 1"));
    CHECK(contains(err, "whole numbers 0..255"));
  }
  std::string err = error_of([&] { data::write_idx(dir.file("no/such/dir/x"), Tensor::of({1})); });
  CHECK(contains(err, "cannot create"));
  CHECK(contains(err, "no/such/dir/x"));
}

TEST_CASE("read_idx: a missing file or a directory is a clear error") {
  TempDir dir;
  std::string err = error_of([&] { data::read_idx(dir.file("nope-idx1-ubyte")); });
  CHECK(contains(err, dir.file("nope-idx1-ubyte")));
  CHECK(contains(err, "no such file"));
  err = error_of([&] { data::read_idx(dir.path.string()); });
  CHECK(contains(err, "is a directory"));
}

TEST_CASE("read_idx: wrong magic number or unknown type code") {
  TempDir dir;
  write_bytes(dir.file("bad"), {0x12, 0x34, 0x08, 0x01, 0, 0, 0, 1, 42});
  std::string err = error_of([&] { data::read_idx(dir.file("bad")); });
  CHECK(contains(err, dir.file("bad")));
  CHECK(contains(err, "wrong magic number 0x12340801 at byte offset 0"));
  write_bytes(dir.file("type"), idx_bytes(0x07, {1}, {42}));
  err = error_of([&] { data::read_idx(dir.file("type")); });
  CHECK(contains(err, "wrong magic number 0x00000701"));
}

TEST_CASE("read_idx: a truncated header names the byte offset") {
  TempDir dir;
  write_bytes(dir.file("tiny"), {0, 0});
  std::string err = error_of([&] { data::read_idx(dir.file("tiny")); });
  CHECK(contains(err, dir.file("tiny")));
  CHECK(contains(err, "truncated header"));
  CHECK(contains(err, "byte offset 2"));
  Bytes header = idx_bytes(0x08, {60000, 28, 28}, {});
  header.resize(10);
  write_bytes(dir.file("short-dims"), header);
  err = error_of([&] { data::read_idx(dir.file("short-dims")); });
  CHECK(contains(err, "truncated header"));
  CHECK(contains(err, "byte offset 10, inside the 16-byte header"));
}

TEST_CASE("read_idx: truncated data names the byte offset; trailing bytes are an error") {
  TempDir dir;
  write_bytes(dir.file("short"), idx_bytes(0x08, {2, 3}, {1, 2, 3, 4}));
  std::string err = error_of([&] { data::read_idx(dir.file("short")); });
  CHECK(contains(err, dir.file("short")));
  CHECK(contains(err, "truncated data"));
  CHECK(contains(err, "[2, 3] ubyte = 6 bytes after the 12-byte header"));
  CHECK(contains(err, "ends at byte offset 16 (4 data bytes)"));
  // A corrupt header promising ~1 TB fails on the file size, before allocating.
  write_bytes(dir.file("huge"), idx_bytes(0x08, {1000000, 1000, 1000}, {1, 2}));
  err = error_of([&] { data::read_idx(dir.file("huge")); });
  CHECK(contains(err, "1000000000000 bytes after the 16-byte header"));
  CHECK(contains(err, "ends at byte offset 18 (2 data bytes)"));
  write_bytes(dir.file("absurd"), idx_bytes(0x08, {4000000000u, 4000000000u}, {}));
  CHECK(contains(error_of([&] { data::read_idx(dir.file("absurd")); }), "more than 2^40 values"));
  write_bytes(dir.file("long"), idx_bytes(0x08, {2}, {1, 2, 3}));
  err = error_of([&] { data::read_idx(dir.file("long")); });
  CHECK(contains(err, "unexpected bytes after the data at byte offset 10"));
}

TEST_CASE("read_idx: size products that overflow are errors, not wrapped counts") {
  TempDir dir;
  // [65536, 2^24, 2^24]: 2^64 values, 0 after wrapping.
  write_bytes(dir.file("wraps"), idx_bytes(0x08, {65536, 1u << 24, 1u << 24}, {}));
  std::string err = error_of([&] { data::read_idx(dir.file("wraps")); });
  CHECK(contains(err, dir.file("wraps")));
  CHECK(contains(err, "the header's sizes [65536, 16777216, 16777216] describe "
                      "more than 2^40 values"));
  // The 22-byte file: [2^24, 2^16, 0x0E000000] is 14 * 2^64 values.
  write_bytes(dir.file("22"), {0x00, 0x00, 0x08, 0x03, 0x01, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00,
                               0x00, 0x0e, 0x00, 0x00, 0x00, 0x0e, 0x02, 0x2c, 0x0e, 0x02, 0x00});
  CHECK(contains(error_of([&] { data::read_idx(dir.file("22")); }),
                 "[16777216, 65536, 234881024] describe more than 2^40"));
  // A zero size does not excuse the others: strides multiply them.
  write_bytes(dir.file("zero"), idx_bytes(0x0C, {0, 4000000000u, 4000000000u, 2}, {}));
  CHECK(contains(error_of([&] { data::read_idx(dir.file("zero")); }),
                 "[0, 4000000000, 4000000000, 2] describe more than 2^40"));
  // Empty, with sizes whose product is fine, still reads.
  write_bytes(dir.file("empty"), idx_bytes(0x08, {0, 28, 28}, {}));
  CHECK(data::read_idx(dir.file("empty")).shape() == Shape{0, 28, 28});
}

// A .gz header claiming 34 GB in a 45-byte file fails on the missing data
// without allocating the claim: a child process limited to 1 GiB more address
// space than it has reads it.
TEST_CASE("read_idx: a gzip header's claim is not allocated before the data is there") {
  TempDir dir;
  const std::string path = dir.file("claims-34GB.gz");
  write_bytes(path, gzip_stored(idx_bytes(0x08, {34, 1000, 1000, 1000}, {1, 2})));
  CHECK(read_bytes(path).size() < 60);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::ifstream status("/proc/self/status");
    uint64_t vm_kb = 0;
    for (std::string key; status >> key;)
      if (key == "VmSize:" && (status >> vm_kb)) break;
    const rlim_t cap = (vm_kb << 10) + (rlim_t{1} << 30);
    const struct rlimit limit{cap, cap};
    if (vm_kb == 0 || setrlimit(RLIMIT_AS, &limit) != 0) _exit(3);
    const std::string err = error_of([&] { data::read_idx(path); });
    _exit(contains(err, "truncated data: the header says [34, 1000, 1000, 1000] ubyte = "
                        "34000000000 bytes after the 20-byte header, but the file ends at "
                        "byte offset 22 of the decompressed data (2 data bytes)")
              ? 0
              : contains(err, "cannot allocate") ? 2 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // 2: it tried to allocate 34 GB
}

TEST_CASE("read_idx: gzip files, good and broken") {
  TempDir dir;
  const Bytes good = idx_bytes(0x08, {4}, {3, 1, 4, 1});
  write_bytes(dir.file("good.gz"), gzip_stored(good));
  CHECK(data::read_idx(dir.file("good.gz"), kInt64).to_vector<int64_t>() ==
        std::vector<int64_t>{3, 1, 4, 1});

  write_bytes(dir.file("magic.gz"), gzip_stored({0x1f, 0x8b, 0x08, 0x01, 0, 0, 0, 1, 0}));
  std::string err = error_of([&] { data::read_idx(dir.file("magic.gz")); });
  CHECK(contains(err, dir.file("magic.gz")));
  CHECK(contains(err, "wrong magic number 0x1F8B0801"));

  write_bytes(dir.file("short.gz"), gzip_stored(idx_bytes(0x08, {4}, {3, 1})));
  err = error_of([&] { data::read_idx(dir.file("short.gz")); });
  CHECK(contains(err, "truncated data"));
  CHECK(contains(err, "byte offset 10 of the decompressed data"));

  Bytes cut = gzip_stored(good);
  cut.resize(cut.size() - 10);  // the gzip stream itself ends early
  write_bytes(dir.file("cut.gz"), cut);
  err = error_of([&] { data::read_idx(dir.file("cut.gz")); });
  CHECK(contains(err, dir.file("cut.gz")));
  CHECK(contains(err, "truncated"));

  Bytes corrupt = gzip_stored(good);
  corrupt[13] ^= 0xFF;  // NLEN no longer complements LEN
  write_bytes(dir.file("corrupt.gz"), corrupt);
  err = error_of([&] { data::read_idx(dir.file("corrupt.gz")); });
  CHECK(contains(err, dir.file("corrupt.gz")));
  CHECK(contains(err, "corrupt gzip data"));
}
