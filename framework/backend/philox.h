// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC 2011; the generator of Random123, cuRAND and PyTorch's CUDA dropout): a
// counter-based generator, so the random bits of element i are a pure function
// of (key, counter) and every device computes the same ones in any order.
// Usable from host code and CUDA device code alike.
#pragma once
#include <cstdint>

#include "framework/backend/host_device.h"

namespace minidl::philox {

struct Words {
  uint32_t w[4];
};

// counter c [4] and key (k0, k1) -> four 32-bit words: ten rounds of
// (hi, lo) = M * c, with the key bumped by the Weyl constants between rounds.
MINIDL_HOST_DEVICE inline Words philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                              uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    const uint32_t next0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t next2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = next0;
    c2 = next2;
  }
  return {{c0, c1, c2, c3}};
}

// The four words of block `block` of the stream keyed by `seed`: counter
// (low, high 32 bits of block, 0, 0), key (low, high 32 bits of seed).
MINIDL_HOST_DEVICE inline Words block_words(uint64_t seed, uint64_t block) {
  return philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u,
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// A word's top 24 bits as a float in [0, 1), a multiple of 2^-24: exact, so
// host and device compare it with a threshold identically.
MINIDL_HOST_DEVICE inline float uniform(uint32_t word) {
  return static_cast<float>(word >> 8) * 0x1p-24f;
}

// Dropout's multiplier for one element: `scale` when kept (uniform < keep),
// else 0. Element i of a call (seed, offset) takes word i % 4 of block
// offset + i / 4, so one call over n elements draws ceil(n / 4) blocks.
MINIDL_HOST_DEVICE inline float keep_scale(uint32_t word, float keep, float scale) {
  return uniform(word) < keep ? scale : 0.f;
}

}  // namespace minidl::philox
