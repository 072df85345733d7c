#include "framework/random.h"

#include <cmath>

namespace minidl {

double Generator::uniform() { return (engine_() >> 11) * 0x1.0p-53; }

double Generator::normal() {
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

int64_t Generator::randint(int64_t low, int64_t high) {
  uint64_t span = static_cast<uint64_t>(high - low);
  // Rejection sampling removes modulo bias.
  uint64_t limit = UINT64_MAX - UINT64_MAX % span, v;
  do v = engine_();
  while (v >= limit);
  return low + static_cast<int64_t>(v % span);
}

Generator& default_generator() {
  static Generator g(0);
  return g;
}

void manual_seed(uint64_t seed) { default_generator().seed(seed); }

}  // namespace minidl
