// Randomness and hashing for the fabric model, identical on every platform
// and build type: a seeded xoshiro256** generator (never rand(), never
// std::uniform_*_distribution, whose output differs between standard
// libraries) and the splitmix64 finaliser as a hash. A run of the simulator
// replays exactly from its seed because every random draw goes through one
// of these objects, passed in by the caller.
#pragma once

#include <cstdint>

namespace softmrc::fabric {

// splitmix64's finaliser: a cheap, well-mixed 64-bit hash.
constexpr uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed = 1) { reseed(seed); }

  void reseed(uint64_t seed) {
    for (uint64_t& s : s_) {
      seed = mix64(seed);
      s = seed;
    }
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Uniform in [0, n); n > 0. The bias of the multiply-shift is below 2^-32.
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(((next() >> 32) * n) >> 32); }

 private:
  static constexpr uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace softmrc::fabric
