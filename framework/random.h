// A seeded random generator whose streams are the same on every machine:
// mt19937_64 bits mapped to uniforms and normals (Box-Muller) by our own code,
// not by the implementation-defined std distributions.
// Named RandomGenerator (PyTorch's torch::Generator) so that a user's own
// `struct Generator : nn::Cell` (a GAN's) compiles after `using namespace minidl;`.
#pragma once
#include <cstdint>
#include <random>
#include <string>

namespace minidl {

class RandomGenerator {
 public:
  explicit RandomGenerator(uint64_t seed = 0) : engine_(seed) {}
  void seed(uint64_t s) { engine_.seed(s); has_spare_ = false; }
  uint64_t next_u64() { return engine_(); }
  double uniform();                           // [0, 1)
  double normal();                            // mean 0, std 1
  int64_t randint(int64_t low, int64_t high);  // [low, high)

  // The whole state as text (the engine's standard text form, then whether a
  // Box-Muller normal is held and its value in hexadecimal), so a checkpoint
  // can hold it; set_state(state()) continues the stream bit for bit. Throws
  // minidl::Error when the text is not one state() wrote.
  std::string state() const;
  void set_state(const std::string& state);

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0;
};

RandomGenerator& default_generator();

// Vigna's splitmix64 finalizer: a well-mixed 64-bit hash of x. Chained, it
// seeds per-epoch streams (Dataset::shuffle) and draws per-sample values
// (data::RandomShift) from a few integers, with no state to carry.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
void manual_seed(uint64_t seed);  // reseeds the default generator

}  // namespace minidl
