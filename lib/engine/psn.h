// 24-bit packet sequence number arithmetic. PSNs wrap at 2^24; two PSNs
// compare by their signed distance, which is meaningful while they are less
// than 2^23 apart (every window the engine keeps is far smaller).
#pragma once

#include <cstdint>

#include "wire/headers.h"

namespace softmrc::engine {

inline constexpr uint32_t kPsnModulus = uint32_t{1} << 24;

constexpr uint32_t psn_add(uint32_t psn, uint32_t n) {
  return (psn + n) & wire::kPsnMask;
}

// a - b, in [-2^23, 2^23).
constexpr int32_t psn_diff(uint32_t a, uint32_t b) {
  const auto d = static_cast<int32_t>((a - b) & wire::kPsnMask);
  return d >= int32_t{1} << 23 ? d - static_cast<int32_t>(kPsnModulus) : d;
}

constexpr bool psn_before(uint32_t a, uint32_t b) {
  return psn_diff(a, b) < 0;
}

}  // namespace softmrc::engine
