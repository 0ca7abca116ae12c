// Big-endian field types for on-wire structs.
//
// Each type is a byte array with get()/set(), so a header struct made of
// them has alignment 1 and may be overlaid on any buffer offset without
// packing attributes or unaligned-access undefined behaviour.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace softmrc::wire {

template <size_t N, typename T>
struct BeUint {
  static_assert(N <= sizeof(T));
  uint8_t bytes[N];

  constexpr T get() const {
    T v = 0;
    for (size_t i = 0; i < N; ++i) v = static_cast<T>((v << 8) | bytes[i]);
    return v;
  }
  constexpr void set(T v) {
    for (size_t i = N; i-- > 0;) {
      bytes[i] = static_cast<uint8_t>(v & 0xff);
      v = static_cast<T>(v >> 8);
    }
  }
};

using Be16 = BeUint<2, uint16_t>;
using Be24 = BeUint<3, uint32_t>;  // PSNs and QPNs
using Be32 = BeUint<4, uint32_t>;
using Be64 = BeUint<8, uint64_t>;

static_assert(sizeof(Be16) == 2 && alignof(Be16) == 1);
static_assert(sizeof(Be24) == 3 && alignof(Be24) == 1);
static_assert(sizeof(Be64) == 8 && alignof(Be64) == 1);

// Header structs are read and written by copy, never through a cast
// pointer: well defined for any buffer, and free once inlined.
template <typename H>
H load(const uint8_t* p) {
  static_assert(std::is_trivially_copyable_v<H> && alignof(H) == 1);
  H h;
  std::memcpy(&h, p, sizeof(H));
  return h;
}

template <typename H>
void store(uint8_t* p, const H& h) {
  static_assert(std::is_trivially_copyable_v<H> && alignof(H) == 1);
  std::memcpy(p, &h, sizeof(H));
}

}  // namespace softmrc::wire
