// Farewell frames: how two softmrc processes on the ends of a net_memif
// link hand it over before one of them closes it.
//
// net_memif frees the memory a link shares from DPDK's interrupt thread as
// soon as the peer disconnects, with no lock against the rest of the
// process: an lcore inside a burst on the port, or the process's own close
// of it, then touches freed memory. So the end that closes asks its peer
// to keep off the link (BYE), and goes first once the peer promised to
// (BYE_ACK); the peer closes after it:
//
// - A port that gets BYE answers BYE_ACK and makes no burst on the link
//   again until the link has gone down and come back up (a new peer); the
//   endpoint sees the plane go down ("peer closing"). Closing later, it
//   waits for the link to go down before it closes.
// - At close (EthdevPort::close_all) a port sends BYE and closes as soon
//   as it is acknowledged. When both ends close at once, the client end
//   answers no BYE, so that only one BYE is acknowledged: the client's.
// - A peer that does not answer (killed, hung, not softmrc) is waited for
//   up to EthdevPort::kPeerCloseWaitUs; a link found down is closed after
//   the interrupt thread had time to finish the disconnect.
// - A peer that is killed says nothing; unmap_guard.h keeps the unmap its
//   disconnect brings from landing under a burst.
//
// The frame (docs/wire-format.md): Ethernet II to the peer's port address
// (broadcast: a memif link has one peer), EtherType 0x88B5 (IEEE 802 local
// experimental), then "SMRC", version 1, the kind, and zeros up to the
// 60-byte minimum frame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace softmrc::port {

enum class Farewell : uint8_t {
  kNone = 0,    // not a farewell frame
  kBye = 1,     // "I am closing this link: keep off it and answer"
  kByeAck = 2,  // "I make no burst on this link until it reconnects"
};

inline constexpr uint16_t kFarewellEtherType = 0x88B5;
inline constexpr size_t kFarewellFrameLen = 60;

// The kind of farewell `frame` is; kNone for any other frame, and for one
// with the EtherType but not the magic, version or a known kind.
Farewell farewell_kind(std::span<const uint8_t> frame);

// Writes a farewell frame of `kind` from `src` into out[0, kFarewellFrameLen).
void write_farewell(Farewell kind, const uint8_t (&src)[6], uint8_t* out);

}  // namespace softmrc::port
