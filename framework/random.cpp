#include "framework/random.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "framework/error.h"

namespace minidl {

double RandomGenerator::uniform() { return (engine_() >> 11) * 0x1.0p-53; }

double RandomGenerator::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1 = 0;
  while (u1 == 0) u1 = uniform();
  double u2 = uniform(), r = std::sqrt(-2.0 * std::log(u1)), th = 2.0 * M_PI * u2;
  spare_ = r * std::sin(th);
  has_spare_ = true;
  return r * std::cos(th);
}

int64_t RandomGenerator::randint(int64_t low, int64_t high) {
  uint64_t span = static_cast<uint64_t>(high - low);
  // Rejection sampling removes modulo bias.
  uint64_t limit = UINT64_MAX - UINT64_MAX % span, v;
  do v = engine_();
  while (v >= limit);
  return low + static_cast<int64_t>(v % span);
}

std::string RandomGenerator::state() const {
  std::ostringstream out;
  char spare[40];
  std::snprintf(spare, sizeof spare, "%a", spare_);
  out << engine_ << ' ' << has_spare_ << ' ' << spare;
  return out.str();
}

void RandomGenerator::set_state(const std::string& state) {
  std::istringstream in(state);
  std::mt19937_64 engine;
  int has_spare = -1;
  std::string spare;
  in >> engine >> has_spare >> spare;
  char* end = nullptr;
  const double value = in ? std::strtod(spare.c_str(), &end) : 0;
  MINIDL_CHECK(in && (has_spare == 0 || has_spare == 1) && end && *end == 0 && (in >> std::ws).eof(),
               "RandomGenerator::set_state: expected the text RandomGenerator::state() writes (",
               std::mt19937_64::state_size, " engine words, 0 or 1, a hexadecimal double), got ",
               state.size(), " characters that do not parse as one");
  engine_ = engine;
  has_spare_ = has_spare;
  spare_ = value;
}

RandomGenerator& default_generator() {
  static RandomGenerator g(0);
  return g;
}

void manual_seed(uint64_t seed) { default_generator().seed(seed); }

}  // namespace minidl
