// Output files (checkpoints, histories, timelines): where a write lands, and
// whether it can, checked before hours of work go into it.
#pragma once
#include <string>

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

}  // namespace minidl
