// Big-endian field types for on-wire structs.
//
// Each type is a byte array with get()/set(), so a header struct made of
// them has alignment 1 and may be overlaid on any buffer offset without
// packing attributes or unaligned-access undefined behaviour. get() and
// set() compile to one load or store and a byte swap: they are on every
// packet's path.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace softmrc::wire {

template <typename T>
constexpr T to_from_be(T v) {
  static_assert(std::is_unsigned_v<T>);
  if constexpr (std::endian::native == std::endian::big || sizeof(T) == 1) {
    return v;
  } else if constexpr (sizeof(T) == 2) {
    return __builtin_bswap16(v);
  } else if constexpr (sizeof(T) == 4) {
    return __builtin_bswap32(v);
  } else {
    static_assert(sizeof(T) == 8);
    return __builtin_bswap64(v);
  }
}

template <size_t N, typename T>
struct BeUint {
  static_assert(N == sizeof(T) || (N == 3 && sizeof(T) == 4));
  uint8_t bytes[N];

  constexpr T get() const {
    if constexpr (N == sizeof(T)) {
      return to_from_be(std::bit_cast<T>(bytes));
    } else {
      return static_cast<T>(T{bytes[0]} << 16 | T{bytes[1]} << 8 | bytes[2]);
    }
  }
  constexpr void set(T v) {
    if constexpr (N == sizeof(T)) {
      const auto b = std::bit_cast<std::array<uint8_t, N>>(to_from_be(v));
      std::copy(b.begin(), b.end(), bytes);
    } else {
      bytes[0] = static_cast<uint8_t>(v >> 16);
      bytes[1] = static_cast<uint8_t>(v >> 8);
      bytes[2] = static_cast<uint8_t>(v);
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

// Single fields read and written in place, at any offset of a buffer
// (p + offsetof(Header, field)). Reading a whole header into a local struct
// and then its fields makes compilers copy it through the stack in pieces
// that the CPU cannot forward to the field loads; these are one access each.
inline uint16_t get_be16(const uint8_t* p) {
  return load<Be16>(p).get();
}
inline uint32_t get_be24(const uint8_t* p) {
  return load<Be24>(p).get();
}
inline uint32_t get_be32(const uint8_t* p) {
  return load<Be32>(p).get();
}
inline uint64_t get_be64(const uint8_t* p) {
  return load<Be64>(p).get();
}
// Little-endian: CRC-32 words, as the Ethernet FCS holds its CRC.
inline uint32_t get_le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

template <typename F, typename T>
void put_be(uint8_t* p, T v) {
  F f;
  f.set(v);
  store(p, f);
}
inline void put_be16(uint8_t* p, uint16_t v) {
  put_be<Be16>(p, v);
}
inline void put_be24(uint8_t* p, uint32_t v) {
  put_be<Be24>(p, v);
}
inline void put_be32(uint8_t* p, uint32_t v) {
  put_be<Be32>(p, v);
}
inline void put_be64(uint8_t* p, uint64_t v) {
  put_be<Be64>(p, v);
}
inline void put_le32(uint8_t* p, uint32_t v) {
  const uint8_t b[4] = {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)};
  std::memcpy(p, b, 4);
}

}  // namespace softmrc::wire
