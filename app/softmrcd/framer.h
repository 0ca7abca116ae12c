// The framer: everything about addresses. It holds one wire::FrameSpec per
// (peer, plane), built from the configuration (a plane's VLAN tag
// included) and kept as the headers it makes (wire::HeaderTemplate), and
// turns the engine's TxPackets into mbufs (in SRv6 mode
// appending the destination's node uSID to the EV's path, with an SRH when
// the path is longer than an address holds); on receive it
// checks that a packet is addressed to the plane's VLAN and IP and names
// the peer that sent a connectionless probe.
//
// Payload: copied into the frame's mbuf (tx_payload: copy), or sent in
// place from registered memory (tx_payload: extbuf) as a chain of the
// headers, an external-buffer mbuf over the payload and the ICRC. A
// payload outside every extbuf region is copied. Each region has its own
// rte_mbuf_ext_shared_info whose refcount is 1 (the daemon's) plus the
// mbufs in flight over it; a retired region takes no new attachments and
// its shinfo lives on until that count is back to 1, so memory that may be
// unmapped (an application's) is released only once no mbuf points at it.
//
// Frame mbufs come from the pool a burst at a time (a stash refilled by
// rte_pktmbuf_alloc_bulk), not one call per packet.
//
// Owned by the endpoint's lcore (the extbuf regions too: at setup, then
// inside EndpointTask::call()), except close() (after the lcore stopped).
#pragma once

#include <rte_mbuf.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/endpoint.h"
#include "softmrcd/config.h"
#include "softmrcd/stats.h"
#include "wire/packet.h"

namespace softmrc::softmrcd {

// What a port that checks IPv4 header checksums found, from a frame's
// ol_flags. NONE is a header the port verified whose checksum field is not
// right in the data (DPDK's definition): good. UNKNOWN leaves the check to
// parse().
inline wire::PortVerdict ipv4_checksum_verdict(uint64_t ol_flags) {
  switch (ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) {
    case RTE_MBUF_F_RX_IP_CKSUM_GOOD:
    case RTE_MBUF_F_RX_IP_CKSUM_NONE:
      return wire::PortVerdict::kGood;
    case RTE_MBUF_F_RX_IP_CKSUM_BAD:
      return wire::PortVerdict::kBad;
    default:
      return wire::PortVerdict::kUnchecked;
  }
}

class Framer {
 public:
  // Frames from endpoint `self` of `cfg` to every other endpoint. `macs`
  // gives the MAC of each of self's planes (its config, or its port's).
  bool init(const Config& cfg, uint32_t self, const std::vector<wire::MacAddr>& macs,
            rte_mempool* pool, rte_mempool* attach_pool, std::string* err);
  // Memory whose payload may be sent in place (extbuf mode only). `iova`
  // is base's IOVA if the region is IOVA-contiguous, else RTE_BAD_IOVA:
  // then, unless in IOVA-VA mode, its payloads are copied.
  bool add_extbuf_region(const uint8_t* base, size_t len, rte_iova_t iova, std::string* err);
  // No new packet is sent in place from the region at `base` (if any).
  void retire_extbuf_region(const uint8_t* base);
  // Whether no mbuf points into retired memory at `base` any more (true
  // if there is none); once true, the region is forgotten.
  bool release_retired(const uint8_t* base);
  // Returns the stashed mbufs to their pool.
  void close();

  // The frames of tx[0, n) in out[0, n): nullptr where a packet is
  // dropped (counted in `drops`); extbuf[i] says whether out[i] sends its
  // payload in place. All headers are written before any ICRC reads them
  // back (see wire::finish_packet()).
  void frame(const engine::TxPacket* tx, size_t n, rte_mbuf** out, bool* extbuf,
             DropCounters* drops);

  const wire::ParseConfig& parse_config() const { return parse_cfg_; }
  // Whether a parsed packet is addressed to this endpoint on `plane`: the
  // plane's VLAN (none, or a priority tag, on an untagged plane) and IP
  // (addresses compare as 16 bytes: IPv4 ones are zero-padded on both sides).
  enum class Addressed : uint8_t { kUs, kOtherVlan, kOtherIp };
  Addressed for_us(const wire::PacketView& v, uint8_t plane) const;
  // The peer whose IP on `plane` sent `v`; engine::kUnknownPeer if none.
  uint32_t peer_of(const wire::PacketView& v, uint8_t plane) const;

 private:
  struct ExtRegion {
    const uint8_t* base;
    const uint8_t* end;
    rte_iova_t iova;
    std::unique_ptr<rte_mbuf_ext_shared_info> shinfo;
  };

  static constexpr uint16_t kBurst = 32;  // frames a pass, mbufs a bulk allocation

  const ExtRegion* find_region(const uint8_t* p, uint32_t len) const;
  rte_mbuf* alloc();
  const wire::HeaderTemplate* frame_of(const engine::TxPacket& p) const;
  rte_mbuf* frame_headers(const wire::HeaderTemplate& f, const wire::WireEv& ev,
                          wire::TxMarking mark, const engine::TxPacket& p, size_t* hlen,
                          DropCounters* drops);
  rte_mbuf* frame_extbuf(const wire::HeaderTemplate& f, const wire::WireEv& ev,
                         wire::TxMarking mark, const engine::TxPacket& p, const ExtRegion& r,
                         DropCounters* drops);

  uint32_t num_planes_ = 0;
  uint32_t num_peers_ = 0;
  uint32_t self_ = 0;
  // The headers of every frame to a peer on a plane, made once
  // (wire::HeaderTemplate): [peer * num_planes_ + plane].
  std::vector<wire::HeaderTemplate> frames_;
  std::vector<wire::HeaderTemplate> srh_frames_;  // the same with an SRH (SRv6 mode only)
  std::vector<uint8_t> has_frame_;
  std::vector<wire::WireEv> default_ev_;          // per plane: the path of connectionless replies
  std::vector<std::array<uint8_t, 16>> own_ip_;   // per plane
  std::vector<uint16_t> own_vlan_;                // per plane, 0: untagged
  std::vector<std::array<uint8_t, 16>> peer_ip_;  // [peer * num_planes_ + plane]
  wire::ParseConfig parse_cfg_;
  wire::EvMode ev_mode_ = wire::EvMode::kUdp;
  rte_mempool* pool_ = nullptr;
  rte_mbuf* stash_[kBurst];  // allocated, not yet framed: stash_[0, stashed_)
  uint16_t stashed_ = 0;
  rte_mempool* attach_pool_ = nullptr;
  bool extbuf_ = false;
  std::vector<ExtRegion> regions_;  // sorted by base
  std::vector<ExtRegion> retired_;  // mbufs may still point into them
};

}  // namespace softmrc::softmrcd
