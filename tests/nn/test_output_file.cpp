// check_writable / check_replaceable / resolve_links (framework/output_file.h):
// the checks the examples run on --save, --history and --timeline before
// training. Beside the checkpoint tests, as checkpoints are what they guard.
#include <doctest/doctest.h>
#include <minidl/minidl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

using namespace minidl;
namespace fs = std::filesystem;

namespace {
struct Scratch {
  fs::path path = fs::temp_directory_path() / ("minidl_test_out_" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(path); }
  ~Scratch() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
  size_t entries() const { return static_cast<size_t>(std::distance(fs::directory_iterator(path), {})); }
};

std::string error_of(const std::string& path) {
  try {
    check_writable(path, "--save");
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}
}  // namespace

TEST_CASE("check_writable passes a new or regular file and leaves nothing behind") {
  Scratch dir;
  CHECK(error_of(dir.file("new.safetensors")) == "<no error>");
  std::ofstream(dir.file("old.csv")) << "x";
  CHECK(error_of(dir.file("old.csv")) == "<no error>");
  CHECK(dir.entries() == 1);  // the probe file is gone; old.csv is untouched
  CHECK(fs::file_size(dir.file("old.csv")) == 1);
}

TEST_CASE("check_writable names the flag, the path and the reason") {
  Scratch dir;
  CHECK(error_of(dir.file("missing/w.safetensors")) ==
        "--save: cannot write '" + dir.file("missing/w.safetensors") + "': creating a file in '" +
            dir.file("missing") + "' failed: No such file or directory");
  std::ofstream(dir.file("plain")) << "x";
  CHECK(error_of(dir.file("plain/w")) == "--save: cannot write '" + dir.file("plain/w") +
                                             "': creating a file in '" + dir.file("plain") +
                                             "' failed: Not a directory");
  CHECK(error_of(dir.path.string()) == "--save: '" + dir.path.string() +
                                           "' is a directory, not a regular file; refusing to "
                                           "replace it with one");
  CHECK(error_of("/dev/full") ==
        "--save: '/dev/full' is a character device, not a regular file; refusing to replace it "
        "with one");
}

TEST_CASE("resolve_links follows links, dangling or relative, and stops at a loop") {
  Scratch dir;
  fs::create_directory(dir.file("sub"));
  fs::create_symlink("sub/target", dir.file("rel"));       // relative, dangling
  fs::create_symlink(dir.file("rel"), dir.file("chain"));  // absolute, to a link
  CHECK(resolve_links(dir.file("chain")) == dir.file("sub/target"));
  CHECK(resolve_links(dir.file("plain")) == dir.file("plain"));
  CHECK(error_of(dir.file("chain")) == "<no error>");
  fs::create_symlink("loop_b", dir.file("loop_a"));
  fs::create_symlink("loop_a", dir.file("loop_b"));
  const std::string loop = cat("'", dir.file("loop_a"), "': more than 40 symbolic links (a loop?)");
  CHECK_THROWS_WITH_AS(resolve_links(dir.file("loop_a")), loop.c_str(), Error);
}
