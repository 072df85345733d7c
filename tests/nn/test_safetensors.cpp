// safetensors I/O (framework/safetensors.h) and TensorDict. It lives in the nn
// suite because checkpoints are how cells are saved; tests/framework is the
// framework agent's.
#include <doctest/doctest.h>
#include <minidl/minidl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

using namespace minidl;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("minidl_test_st_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A file as the Python package lays it out: u64 LE length, JSON padded with
// spaces to a multiple of 8, then the data section.
std::string make_file(std::string json, const std::string& data) {
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return out + json + data;
}

std::string float_bytes(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

std::string load_error(const std::string& path) {
  try {
    load_safetensors(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("safetensors round trip keeps order, dtypes, shapes, values and metadata") {
  const std::string path = temp_path("roundtrip.safetensors");
  TensorDict in;
  in.insert("z.weight", Tensor::of({1.5f, -2.f, 3.25f, 0.f, 1e-3f, -7.f}, {2, 3}));
  in.insert("a.half", Tensor::of({0.5f, -1.f, 65504.f}).to(kFloat16));
  in.insert("m.i32", Tensor::of_ints({1, -2, 2147483647}, {3}, kInt32));
  in.insert("b.i64", Tensor::of_ints({-9000000000LL, 4}, {2, 1}));
  in.insert("scalar", Tensor::full({}, 3.0));
  in.insert("empty", Tensor::zeros({0, 4}));
  save_safetensors(path, in, {{"format", "pt"}, {"epoch", "3"}});
  CHECK(!std::filesystem::exists(path + ".tmp." + std::to_string(::getpid())));

  std::map<std::string, std::string> meta;
  TensorDict out = load_safetensors(path, &meta);
  CHECK(out.keys() == in.keys());  // saved order is data-offset order
  CHECK(meta == std::map<std::string, std::string>{{"format", "pt"}, {"epoch", "3"}});
  for (const auto& [name, t] : in) {
    const std::string label = name;  // clang 14 cannot capture a binding
    INFO(label);
    CHECK(out[name].dtype() == t.dtype());
    CHECK(out[name].shape() == t.shape());
    CHECK(read_bytes(path).size() > 8);
    CHECK(std::memcmp(out[name].raw_data(), t.raw_data(), t.nbytes()) == 0);
  }
  CHECK(out["b.i64"].at({0, 0}) == -9000000000.0);
  // Overwriting an existing file replaces it whole.
  save_safetensors(path, TensorDict{{"only", Tensor::ones({1})}});
  CHECK(load_safetensors(path, &meta).keys() == std::vector<std::string>{"only"});
  CHECK(meta.empty());
  std::filesystem::remove(path);
}

TEST_CASE("safetensors header: 8-byte little-endian length, then the JSON") {
  const std::string path = temp_path("header.safetensors");
  save_safetensors(path, TensorDict{{"w", Tensor::of({1, 2, 3, 4, 5, 6}, {2, 3})},
                                    {"b", Tensor::of_ints({7, 8})}});
  const std::string bytes = read_bytes(path);
  REQUIRE(bytes.size() >= 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  CHECK(n % 8 == 0);                             // the data section starts 8-byte aligned
  CHECK(bytes.size() == 8 + n + 6 * 4 + 2 * 8);  // header + 24 bytes of F32 + 16 of I64
  const std::string json = bytes.substr(8, n);
  // The JSON, then only space padding.
  const std::string want =
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
      "\"b\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[24,40]}}";
  CHECK(json.substr(0, want.size()) == want);
  CHECK(json.substr(want.size()) == std::string(n - want.size(), ' '));
  // The data section is the raw little-endian values.
  CHECK(bytes.substr(8 + n, 24) == float_bytes({1, 2, 3, 4, 5, 6}));
  int64_t seven;
  std::memcpy(&seven, bytes.data() + 8 + n + 24, 8);
  CHECK(seven == 7);
  std::filesystem::remove(path);
}

TEST_CASE("safetensors reads a file laid out as the Python package writes it") {
  // What safetensors.torch.save_file({"w": torch.tensor([1., 2.]),
  // "step": torch.tensor([5])}, f, metadata={"format": "pt"}) writes: tensors
  // sorted by dtype size then name, so I64 "step" first.
  const std::string path = temp_path("python.safetensors");
  std::string data(8, '\0');
  data[0] = 5;
  data += float_bytes({1, 2});
  write_bytes(
      path,
      make_file("{\"__metadata__\":{\"format\":\"pt\"},\"step\":{\"dtype\":\"I64\",\"shape\":[1],"
                "\"data_offsets\":[0,8]},\"w\":{\"dtype\":\"F32\",\"shape\":[2],"
                "\"data_offsets\":[8,16]}}",
                data));
  std::map<std::string, std::string> meta;
  TensorDict t = load_safetensors(path, &meta);
  CHECK(t.keys() == std::vector<std::string>{"step", "w"});
  CHECK(t["w"].to_float_vector() == std::vector<float>{1, 2});
  CHECK(t["step"].dtype() == kInt64);
  CHECK(t["step"].item() == 5);
  CHECK(meta.at("format") == "pt");
  std::filesystem::remove(path);
}

TEST_CASE("corrupt safetensors files give errors naming the file and the fault") {
  const std::string path = temp_path("bad.safetensors");
  const std::string good_json = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  struct Case {
    const char* what;
    std::string bytes;
    const char* message;
  };
  std::string huge_len = make_file(good_json, float_bytes({1, 2}));
  huge_len[3] = 1;  // header length += 2^24
  std::vector<Case> cases{
      {"short", "abc", "shorter than the 8-byte header length"},
      {"length past EOF", huge_len, "runs past the end of the"},
      {"not JSON", make_file("{\"w\": [1, 2", ""), "is not valid JSON"},
      {"not an object", make_file("[1, 2]", ""), "must be a JSON object, got array"},
      {"unknown dtype",
       make_file("{\"w\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]}}",
                 std::string(4, '\0')),
       "unsupported dtype \"BF16\""},
      {"missing field", make_file("{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", ""),
       "expected an object with dtype, shape and data_offsets"},
      {"bad shape",
       make_file("{\"w\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}",
                 float_bytes({1, 2})),
       "bad shape [-2]"},
      {"size mismatch",
       make_file("{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
                 float_bytes({1, 2})),
       "shape [3] of F32 needs 12 bytes but data_offsets [0, 8] span 8"},
      {"truncated", make_file(good_json, float_bytes({1})),
       "truncated: tensor 'w' needs file bytes"},
      {"trailing", make_file(good_json, float_bytes({1, 2, 3})),
       "4 trailing bytes after the last tensor"},
      {"overlap",
       make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                 float_bytes({1, 2})),
       "overlapping or gapped data_offsets"},
      {"bad metadata", make_file("{\"__metadata__\":{\"epoch\":3}}", ""),
       "__metadata__ value for 'epoch'"},
      // Shape products that overflow: elements, bytes, or the nonzero sizes.
      {"2^60+1 x 16 elements",
       make_file("{\"w\":{\"dtype\":\"F32\",\"shape\":[1152921504606846977,16],"
                 "\"data_offsets\":[0,64]}}",
                 std::string(64, '\0')),
       "shape [1152921504606846977, 16] of F32 overflows"},
      {"2^62 float32 bytes",
       make_file("{\"w\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],"
                 "\"data_offsets\":[0,0]}}",
                 ""),
       "shape [4611686018427387904] of F32 overflows"},
      {"zero beside 2^62 x 2^62",
       make_file("{\"w\":{\"dtype\":\"I64\",\"shape\":[0,4611686018427387904,"
                 "4611686018427387904],\"data_offsets\":[0,0]}}",
                 ""),
       "shape [0, 4611686018427387904, 4611686018427387904] of I64 overflows"},
      {"size 2^63",
       make_file("{\"w\":{\"dtype\":\"F32\",\"shape\":[9223372036854775808],"
                 "\"data_offsets\":[0,0]}}",
                 ""),
       "bad shape [9223372036854775808] (sizes are integers from 0 to 2^63 - 1)"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    write_bytes(path, c.bytes);
    const std::string msg = load_error(path);
    CHECK(msg.find("load_safetensors('" + path + "')") != std::string::npos);
    CHECK(msg.find(c.message) != std::string::npos);
    if (msg.find(c.message) == std::string::npos) MESSAGE(msg);
  }
  std::filesystem::remove(path);
  const std::string missing = load_error(temp_path("does_not_exist.safetensors"));
  CHECK(missing.find("does_not_exist.safetensors'): cannot open file: No such file") !=
        std::string::npos);
}

TEST_CASE("save_safetensors errors name the file") {
  const std::string dir_missing = temp_path("no_such_dir") + "/x.safetensors";
  CHECK_THROWS_WITH_AS(
      save_safetensors(dir_missing, TensorDict{{"w", Tensor::ones({1})}}),
      doctest::Contains(("save_safetensors('" + dir_missing + "'): cannot open").c_str()), Error);
  CHECK_THROWS_WITH_AS(
      save_safetensors(temp_path("x"), TensorDict{{"__metadata__", Tensor::ones({1})}}),
      doctest::Contains("invalid tensor name '__metadata__'"), Error);
  CHECK_THROWS_WITH_AS(save_safetensors(temp_path("x"), TensorDict{{"u", Tensor()}}),
                       doctest::Contains("tensor 'u' is undefined"), Error);
  // JSON holds UTF-8 only (the checkpoint fuzzer found this one escaping as nlohmann's type_error)
  CHECK_THROWS_WITH_AS(save_safetensors(temp_path("x"), TensorDict{{"\xff", Tensor::ones({1})}}),
                       doctest::Contains("is not valid UTF-8"), Error);
  CHECK_THROWS_WITH_AS(save_safetensors(temp_path("x"), TensorDict{{"w", Tensor::ones({1})}},
                                        {{"step", "\xfe"}}),
                       doctest::Contains("is not valid UTF-8"), Error);
  CHECK(!std::filesystem::exists(temp_path("x")));
}

// Where save_safetensors writes: through symlinks, never over a device or a
// directory, keeping the mode, leaving no temporary file behind on failure,
// and syncing the directory after the rename.
namespace {

// Every file descriptor fsync was called on, as "dir:PATH" or "file:PATH".
// This executable's fsync stands in for libc's (which it then calls), so
// the test sees what minidl syncs.
std::vector<std::string>& fsynced() {
  static std::vector<std::string> calls;
  return calls;
}

std::vector<std::string> temp_files_in(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos)
      found.push_back(e.path().string());
  return found;
}

struct ScratchDir {
  std::string path = temp_path("save_dir");
  ScratchDir() { std::filesystem::create_directories(path); }
  ~ScratchDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return path + "/" + name; }
};

}  // namespace

extern "C" int fsync(int fd) {
  struct stat st;
  char link[64], target[4096] = "?";
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = ::readlink(link, target, sizeof target - 1);
  if (n > 0) target[n] = '\0';
  const bool dir = ::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
  fsynced().push_back(std::string(dir ? "dir:" : "file:") + target);
  return static_cast<int>(::syscall(SYS_fsync, fd));  // what libc's fsync does
}

TEST_CASE("save_safetensors writes through a symlink to its target, even a dangling one") {
  ScratchDir dir;
  const TensorDict weights{{"w", Tensor::from_vector(std::vector<float>{1, 2, 3}, {3})}};
  save_safetensors(dir.file("old.safetensors"), TensorDict{{"w", Tensor::zeros({3})}});
  std::filesystem::create_symlink("old.safetensors", dir.file("latest"));
  save_safetensors(dir.file("latest"), weights);
  CHECK(std::filesystem::is_symlink(dir.file("latest")));
  CHECK(load_safetensors(dir.file("old.safetensors"))["w"].to_float_vector() ==
        std::vector<float>{1, 2, 3});

  std::filesystem::create_symlink(dir.file("new.safetensors"), dir.file("dangling"));
  save_safetensors(dir.file("dangling"), weights);
  CHECK(std::filesystem::is_symlink(dir.file("dangling")));
  CHECK(load_safetensors(dir.file("new.safetensors"))["w"].to_float_vector() ==
        std::vector<float>{1, 2, 3});
  CHECK(temp_files_in(dir.path).empty());
}

TEST_CASE("save_safetensors refuses a device or a directory, and keeps a file's mode") {
  ScratchDir dir;
  const TensorDict weights{{"w", Tensor::ones({2})}};
  CHECK_THROWS_WITH_AS(save_safetensors("/dev/full", weights),
                       "save_safetensors('/dev/full'): '/dev/full' is a character device, not a "
                       "regular file; refusing to replace it with one",
                       Error);
  struct stat st;
  REQUIRE(::stat("/dev/full", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  std::filesystem::create_symlink("/dev/full", dir.file("to_full"));
  CHECK_THROWS_WITH_AS(save_safetensors(dir.file("to_full"), weights),
                       doctest::Contains("'/dev/full' is a character device"), Error);
  std::filesystem::create_directory(dir.file("sub"));
  CHECK_THROWS_WITH_AS(save_safetensors(dir.file("sub"), weights),
                       doctest::Contains("sub' is a directory, not a regular file"), Error);

  save_safetensors(dir.file("w.safetensors"), weights);
  ::chmod(dir.file("w.safetensors").c_str(), 0640);
  save_safetensors(dir.file("w.safetensors"), weights);
  REQUIRE(::stat(dir.file("w.safetensors").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0640);
  CHECK(temp_files_in(dir.path).empty());
}

TEST_CASE("a failed save_safetensors removes its temporary file and keeps the old file") {
  ScratchDir dir;
  const std::string path = dir.file("w.safetensors");
  save_safetensors(path, TensorDict{{"w", Tensor::ones({4})}});
  const std::string before = read_bytes(path);
  // Files over 64 KiB cannot be written now: the 400 KB save fails part way.
  struct rlimit old_limit, small{64 << 10, 64 << 10};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  small.rlim_max = old_limit.rlim_max;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  std::string err;
  try {
    save_safetensors(path, TensorDict{{"w", Tensor::zeros({100000})}});
  } catch (const Error& e) {
    err = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  CHECK(err.find("save_safetensors('" + path + "'): writing '" + path + ".tmp.") == 0);
  CHECK(err.find("failed: File too large") != std::string::npos);
  CHECK(temp_files_in(dir.path).empty());
  CHECK(read_bytes(path) == before);
}

TEST_CASE("save_safetensors syncs the file, then the directory after the rename") {
  ScratchDir dir;
  fsynced().clear();
  save_safetensors(dir.file("w.safetensors"), TensorDict{{"w", Tensor::ones({2})}});
  const std::string real_dir = std::filesystem::canonical(dir.path).string();
  REQUIRE(fsynced().size() == 2);
  CHECK(fsynced()[0].find("file:" + real_dir + "/w.safetensors.tmp.") == 0);
  CHECK(fsynced()[1] == "dir:" + real_dir);
}

TEST_CASE("TensorDict keeps insertion order and rejects duplicates") {
  TensorDict d{{"b", Tensor::ones({1})}, {"a", Tensor::zeros({2})}};
  CHECK(d.keys() == std::vector<std::string>{"b", "a"});
  CHECK(d.contains("a"));
  CHECK(!d.contains("c"));
  CHECK(d.at("a").shape() == Shape{2});
  CHECK_THROWS_WITH_AS(d.insert("a", Tensor::ones({1})), doctest::Contains("duplicate name 'a'"),
                       Error);
  CHECK_THROWS_WITH_AS(d.at("c"), doctest::Contains("no tensor named 'c' (2 names: b, a)"), Error);
  TensorDict from_map(
      std::map<std::string, Tensor>{{"y", Tensor::ones({1})}, {"x", Tensor::ones({1})}});
  CHECK(from_map.keys() == std::vector<std::string>{"x", "y"});
}

namespace {

// A pid that no process has now: a child that has exited and been reaped.
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("save_safetensors removes the temporaries that killed saves to its target left") {
  ScratchDir dir;
  const std::string dead = std::to_string(dead_pid()), alive = std::to_string(::getppid());
  const std::string self = std::to_string(::getpid()), dead_dir = std::to_string(dead_pid());
  for (const std::string& name :
       {"w.safetensors.tmp." + dead,        // a save killed before its rename: removed
        "w.safetensors.tmp." + alive,       // a save still running: kept
        "w.safetensors.tmp.x" + dead,       // not a pid: kept
        std::string("w.safetensors.tmp."),  // no pid: kept
        "other.safetensors.tmp." + dead})   // another target's: kept
    std::ofstream(dir.file(name)) << "partial";
  std::filesystem::create_directory(dir.file("w.safetensors.tmp." + dead_dir));  // not a file: kept
  save_safetensors(dir.file("w.safetensors"), {{"x", Tensor::ones({2})}});
  std::vector<std::string> expected = {"other.safetensors.tmp." + dead,
                                       "w.safetensors",
                                       "w.safetensors.tmp.",
                                       "w.safetensors.tmp." + alive,
                                       "w.safetensors.tmp." + dead_dir,
                                       "w.safetensors.tmp.x" + dead};
  std::sort(expected.begin(), expected.end());
  CHECK(names_in(dir.path) == expected);
  CHECK(load_safetensors(dir.file("w.safetensors")).at("x").to_float_vector() ==
        std::vector<float>{1, 1});

  // the function alone: what it removed, by path
  std::ofstream(dir.file("w.safetensors.tmp." + dead)) << "partial";
  std::ofstream(dir.file("w.safetensors.tmp." + self)) << "mine";  // the caller's own: kept
  CHECK(remove_stale_temporaries(dir.file("w.safetensors")) ==
        std::vector<std::string>{dir.file("w.safetensors.tmp." + dead)});
  CHECK(std::filesystem::exists(dir.file("w.safetensors.tmp." + self)));
}
