#include "parallel/launch.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "framework/error.h"
#include "parallel/init.h"

extern char** environ;

namespace minidl::parallel {

namespace {

std::string self_exe(const char* fallback) {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) return std::string(buf, static_cast<size_t>(n));
  MINIDL_CHECK(fallback, "spawn: cannot find this program's path (/proc/self/exe)");
  return fallback;
}

// argv[1..] of this process, read back from /proc/self/cmdline.
std::vector<std::string> own_args() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t start = 0; start < all.size();) {
    size_t end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    args.push_back(all.substr(start, end - start));
    start = end + 1;
  }
  if (!args.empty()) args.erase(args.begin());
  return args;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Open MPI refuses to run as root without these.
void allow_root() {
  if (geteuid() != 0) return;
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", /*overwrite=*/0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", /*overwrite=*/0);
}

int nprocs_value(const std::string& text) {
  int n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < 1 || n > kMaxNprocs)
    throw std::invalid_argument(
        cat("--nprocs: expected an integer from 1 to ", kMaxNprocs, ", got '", text, "'"));
  return n;
}

}  // namespace

std::string find_mpirun() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/mpirun";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  if (access("/usr/bin/mpirun", X_OK) == 0) return "/usr/bin/mpirun";
  throw Error("spawn: mpirun was not found on PATH nor at /usr/bin/mpirun "
              "(install Open MPI: apt-get install openmpi-bin)");
}

std::vector<std::string> mpirun_command(int nprocs, const std::vector<std::string>& program) {
  std::vector<std::string> cmd = {find_mpirun(), "-np", std::to_string(nprocs), "--oversubscribe"};
  cmd.insert(cmd.end(), program.begin(), program.end());
  return cmd;
}

int spawn(const std::function<void()>& fn, int nprocs) {
  if (nprocs < 1)
    throw std::invalid_argument(cat("spawn: nprocs must be >= 1, got ", nprocs));
  if (launched_by_mpirun()) {  // a child (or a rank of a job the user started)
    init();
    fn();
    finalize();
    std::fflush(nullptr);
    std::exit(0);
  }
  if (nprocs == 1) {
    init();
    fn();
    return 0;
  }
  std::vector<std::string> program = own_args();
  program.insert(program.begin(), self_exe(nullptr));
  std::vector<std::string> cmd = mpirun_command(nprocs, program);
  std::vector<char*> argv = c_strings(cmd);
  allow_root();
  std::fflush(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, cmd[0].c_str(), nullptr, nullptr, argv.data(), environ);
  MINIDL_CHECK(rc == 0, "spawn: could not start ", cmd[0], ": ", std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    MINIDL_CHECK(errno == EINTR, "spawn: waitpid on mpirun failed: ", std::strerror(errno));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

int launch_if_requested(int& argc, char** argv) {
  int nprocs = 1;
  int out = 1;  // argv[0] stays
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--nprocs") {
      if (i + 1 >= argc)
        throw std::invalid_argument(
            cat("--nprocs: expected an integer from 1 to ", kMaxNprocs, " after it"));
      nprocs = nprocs_value(argv[++i]);
    } else if (arg.rfind("--nprocs=", 0) == 0) {
      nprocs = nprocs_value(arg.substr(9));
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
  argv[argc] = nullptr;
  if (nprocs <= 1 || launched_by_mpirun()) return nprocs;

  std::vector<std::string> program = {self_exe(argv[0])};
  for (int i = 1; i < argc; ++i) program.push_back(argv[i]);
  std::vector<std::string> cmd = mpirun_command(nprocs, program);
  std::vector<char*> args = c_strings(cmd);
  allow_root();
  std::fflush(nullptr);
  execv(cmd[0].c_str(), args.data());
  throw Error(cat("launch_if_requested: could not run ", cmd[0], ": ", std::strerror(errno)));
}

}  // namespace minidl::parallel
