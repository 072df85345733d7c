#include "framework/output_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "framework/error.h"

namespace minidl {
namespace fs = std::filesystem;

namespace {
const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}
}  // namespace

std::string resolve_links(const std::string& path) {
  fs::path p = path;
  for (int links = 0;; ++links) {
    std::error_code ec;
    if (!fs::is_symlink(p, ec)) return p.string();
    MINIDL_CHECK(links < 40, "'", path, "': more than 40 symbolic links (a loop?)");
    const fs::path target = fs::read_symlink(p, ec);
    MINIDL_CHECK(!ec, "'", path, "': cannot read the symbolic link '", p.string(), "': ",
                 ec.message());
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
}

void check_replaceable(const std::string& path, const std::string& what) {
  const std::string target = resolve_links(path);
  struct stat st;
  if (::stat(target.c_str(), &st) != 0) return;  // absent: it will be created
  MINIDL_CHECK(S_ISREG(st.st_mode), what, ": '", target, "' is ", kind_of(st.st_mode),
               ", not a regular file; refusing to replace it with one");
}

void check_writable(const std::string& path, const std::string& what) {
  check_replaceable(path, what);
  fs::path dir = fs::path(resolve_links(path)).parent_path();
  if (dir.empty()) dir = ".";
  std::string probe = (dir / ".minidl-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  MINIDL_CHECK(fd >= 0, what, ": cannot write '", path, "': creating a file in '", dir.string(),
               "' failed: ", std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace minidl
