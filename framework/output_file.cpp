#include "framework/output_file.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
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

std::vector<std::string> remove_stale_temporaries(const std::string& target) {
  const fs::path t = target;
  const std::string prefix = t.filename().string() + ".tmp.";
  const fs::path dir = t.parent_path().empty() ? fs::path(".") : t.parent_path();
  std::vector<fs::path> stale;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix) || name.size() == prefix.size()) continue;
    const char *first = name.data() + prefix.size(), *last = name.data() + name.size();
    pid_t pid = 0;
    const auto [stop, err] = std::from_chars(first, last, pid);
    if (err != std::errc() || stop != last || pid <= 0 || pid == ::getpid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (EPERM: someone else's)
    std::error_code type_ec;
    if (it->symlink_status(type_ec).type() == fs::file_type::regular) stale.push_back(it->path());
  }
  std::vector<std::string> removed;
  for (const fs::path& p : stale)
    if (fs::remove(p, ec)) removed.push_back(p.string());
  return removed;
}

}  // namespace minidl
