// SRv6 uSID container operations (see usid.h).
#include "wire/usid.h"

#include <cstring>

namespace softmrc::wire {

bool usid_locator(const uint8_t addr[16]) {
  if (usid_at(addr, 0) == 0) return false;
  for (size_t i = kUsidBlockBytes + kUsidBytes; i < 16; ++i)
    if (addr[i] != 0) return false;
  return true;
}

bool usid_append(uint8_t container[16], uint16_t usid) {
  for (size_t i = 0; i < kUsidsPerContainer; ++i) {
    if (usid_at(container, i) != 0) continue;
    uint8_t* p = container + kUsidBlockBytes + i * kUsidBytes;
    p[0] = static_cast<uint8_t>(usid >> 8);
    p[1] = static_cast<uint8_t>(usid);
    return true;
  }
  return false;
}

uint16_t usid_shift(uint8_t container[16]) {
  const uint16_t active = usid_at(container, 0);
  if (active == 0) return 0;
  uint8_t* list = container + kUsidBlockBytes;
  const size_t kept = 16 - kUsidBlockBytes - kUsidBytes;
  std::memmove(list, list + kUsidBytes, kept);
  std::memset(list + kept, 0, kUsidBytes);
  return active;
}

}  // namespace softmrc::wire
