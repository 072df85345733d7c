// safetensors I/O (framework/safetensors.h) and TensorDict. It lives in the nn
// suite because checkpoints are how cells are saved; tests/framework is the
// framework agent's.
#include <doctest/doctest.h>
#include <minidl/minidl.h>
#include <unistd.h>

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
    INFO(name);
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
  CHECK(!std::filesystem::exists(temp_path("x")));
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
