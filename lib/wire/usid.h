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
// A path longer than the address holds goes on in the one segment of an
// SRH, a second container (EV bytes 16-31): the switch whose address runs
// out of uSIDs takes the segment as the new address (RFC 9800's
// End-of-Carrier with segments left). The destination's uSID then ends the
// segment's list.
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
// Widest SRv6 EV a sender can still append a destination to: two
// containers, the address and the SRH's segment, less one uSID.
inline constexpr uint32_t kSrv6PathMaxBits = 2 * 128 - kUsidBytes * 8;

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

// How usid_route() ended a path.
enum class Srv6Route : uint8_t {
  kAddress,  // the whole path is in the address: no SRH
  kWithSrh,  // the path goes on in the SRH's segment (bytes 16-31)
  kTooLong,  // no slot left for the destination: nothing was changed
};

// Ends the SRv6 path `path` (an EV: bytes 0-15 the address's container,
// 16-31 the segment's) at the destination whose address is the locator
// `dest`: its node uSID goes into the segment's first free slot when the
// segment names hops, else into the address's, else (a full address) into
// an empty segment under dest's block.
Srv6Route usid_route(uint8_t path[32], const uint8_t dest[16]);

// What the switches of a plane do to a packet on its way, all at once:
// consume every uSID of the path but the destination's. `srh` (null if the
// packet has none) points at a one-segment SRH (headers.h); with its
// segment left, the address's uSIDs are all hops and the segment becomes
// the address (segments left 0).
void usid_deliver(uint8_t address[16], uint8_t* srh);

// One uN hop: drops the active uSID and shifts the rest left, keeping the
// block. Returns the uSID consumed (0 if the list was empty: nothing moves).
uint16_t usid_shift(uint8_t container[16]);

}  // namespace softmrc::wire
