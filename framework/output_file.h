// Output files (checkpoints, histories, timelines): where a write lands, and
// whether it can, checked before hours of work go into it.
#pragma once
#include <string>
#include <vector>

namespace minidl {

// `path` with symbolic links followed to the file they name, which need not
// exist yet: where a write to `path` lands. Throws minidl::Error naming `path`
// after 40 links (a loop).
std::string resolve_links(const std::string& path);

// Throws minidl::Error naming `what` (e.g. "--save") and the file unless
// `path`, after links, is absent or a regular file: a directory, a device
// (/dev/full), a FIFO or a socket is never replaced by a regular file.
void check_replaceable(const std::string& path, const std::string& what);

// Throws minidl::Error naming `what` and `path` unless a file can be written
// there: check_replaceable passes and the directory the file lands in exists
// and accepts a new file (checked by creating and removing one, so a
// read-only file system or a missing directory is caught too).
void check_writable(const std::string& path, const std::string& what);

// Removes the temporary files that saves to `target` (a path after links)
// left when killed (kill -9, SIGTERM) between writing and renaming:
// "<target>.tmp.<pid>" beside it, regular files whose process is gone
// (kill(pid, 0) fails with ESRCH). A live process's file, the caller's own,
// and any other name are left alone; a file that cannot be removed is left
// too. Pids name processes of this machine's pid namespace only: a directory
// shared with another machine or container that saves to the same target at
// the same time is not supported. Returns the paths removed.
std::vector<std::string> remove_stale_temporaries(const std::string& target);

}  // namespace minidl
