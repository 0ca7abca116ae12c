// SRv6 uSID addressing as softmrc uses it in SRv6 EV mode
// (docs/wire-format.md, "SRv6 paths").
//
// A 128-bit uSID container is a 32-bit locator block followed by six 16-bit
// uSIDs, the active one first; a uSID of 0 ends the list (F3216). An
// endpoint's plane address is a container holding one uSID, its own node
// uSID: block:node::. An SRv6 EV names a path, block:hop:hop:..., and the
// sender appends the destination's node uSID to it; each switch on the way
// consumes the active uSID by shifting the rest left (uN), so the packet
// arrives addressed to block:node::, the destination's own address.
//
// Pure functions over bytes: used by the framer per packet and by the
// fabric emulator per hop.
#pragma once

#include <cstddef>
#include <cstdint>

namespace softmrc::wire {

inline constexpr size_t kUsidBlockBytes = 4;
inline constexpr size_t kUsidBytes = 2;
inline constexpr size_t kUsidsPerContainer = (16 - kUsidBlockBytes) / kUsidBytes;  // 6
// Widest SRv6 EV a sender can still append a destination to.
inline constexpr uint32_t kSrv6PathMaxBits = 128 - kUsidBytes * 8;

// The uSID at `index` (0: the active one) of a 16-byte container.
inline uint16_t usid_at(const uint8_t* container, size_t index) {
  const uint8_t* p = container + kUsidBlockBytes + index * kUsidBytes;
  return static_cast<uint16_t>(p[0] << 8 | p[1]);
}

// Whether `addr` is a uSID locator: a node uSID other than 0 after the
// block and nothing after it (usid_at(addr, 0) is the node uSID).
bool usid_locator(const uint8_t addr[16]);

// Writes `usid` in the first free (zero) slot of `container`; false if all
// six are taken.
bool usid_append(uint8_t container[16], uint16_t usid);

// One uN hop: drops the active uSID and shifts the rest left, keeping the
// block. Returns the uSID consumed (0 if the list was empty: nothing moves).
uint16_t usid_shift(uint8_t container[16]);

}  // namespace softmrc::wire
