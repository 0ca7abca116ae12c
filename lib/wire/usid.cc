// SRv6 uSID container operations (see usid.h).
#include "wire/usid.h"

#include <cstddef>
#include <cstring>

#include "wire/headers.h"

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

Srv6Route usid_route(uint8_t path[32], const uint8_t dest[16]) {
  const uint16_t node = usid_at(dest, 0);
  uint8_t* segment = path + 16;
  if (usid_at(segment, 0) != 0)
    return usid_append(segment, node) ? Srv6Route::kWithSrh : Srv6Route::kTooLong;
  if (usid_append(path, node)) return Srv6Route::kAddress;
  std::memcpy(segment, dest, kUsidBlockBytes);
  std::memset(segment + kUsidBlockBytes, 0, 16 - kUsidBlockBytes);
  usid_append(segment, node);
  return Srv6Route::kWithSrh;
}

void usid_deliver(uint8_t address[16], uint8_t* srh) {
  if (srh != nullptr && srh[offsetof(SrhOneSegment, segments_left)] > 0) {
    std::memcpy(address, srh + offsetof(SrhOneSegment, segment), 16);
    srh[offsetof(SrhOneSegment, segments_left)] = 0;
  }
  while (usid_at(address, 1) != 0) usid_shift(address);
}

}  // namespace softmrc::wire
