// Error helpers: user errors throw minidl::Error (a std::runtime_error) whose
// message names the op and what was expected and got; internal invariants use
// assert. Shapes print as [2, 3].
#pragma once
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace minidl {

using Shape = std::vector<int64_t>;

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string to_string(const Shape& shape);

namespace detail {
template <class T>
void put(std::ostream& os, const T& v) { os << v; }
inline void put(std::ostream& os, const Shape& s) { os << to_string(s); }
}  // namespace detail

// Concatenates streamable values (and shapes, as [2, 3]) into one string.
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (detail::put(os, args), ...);
  return os.str();
}

}  // namespace minidl

// MINIDL_CHECK(cond, parts...): throw minidl::Error(cat(parts...)) when cond fails.
#define MINIDL_CHECK(cond, ...)                                      \
  do {                                                               \
    if (!(cond)) throw ::minidl::Error(::minidl::cat(__VA_ARGS__)); \
  } while (0)
