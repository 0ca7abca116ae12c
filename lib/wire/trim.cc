// What a switch does to an MRC packet: trimming on congestion and ECN
// marking. The fabric emulator and simulator use these on built frames.
#include <cstring>

#include "wire/packet.h"

namespace softmrc::wire {
namespace {

struct L3 {
  size_t offset = 0;
  IpVersion version = IpVersion::kV6;
};

bool find_l3(std::span<const uint8_t> frame, L3* l3) {
  if (frame.size() < sizeof(EthHdr)) return false;
  uint16_t type = load<EthHdr>(frame.data()).ether_type.get();
  size_t off = sizeof(EthHdr);
  if (type == kEtherTypeVlan) {
    if (frame.size() < off + sizeof(VlanTag)) return false;
    type = load<VlanTag>(frame.data() + off).ether_type.get();
    off += sizeof(VlanTag);
  }
  if (type == kEtherTypeIpv4 && frame.size() >= off + sizeof(Ipv4Hdr)) {
    *l3 = {off, IpVersion::kV4};
    return true;
  }
  if (type == kEtherTypeIpv6 && frame.size() >= off + sizeof(Ipv6Hdr)) {
    *l3 = {off, IpVersion::kV6};
    return true;
  }
  return false;
}

// Sets the 16-bit word at `offset` of an IPv4 header and updates the
// checksum for that change alone (RFC 1624, eqn. 3), so a header with
// options stays covered whole, as a switch would leave it.
void set_ipv4_word(uint8_t* ip, size_t offset, uint16_t value) {
  uint8_t* checksum = ip + offsetof(Ipv4Hdr, checksum);
  uint32_t sum = uint32_t{static_cast<uint16_t>(~get_be16(checksum))} +
                 static_cast<uint16_t>(~get_be16(ip + offset)) + value;
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  put_be16(ip + offset, value);
  put_be16(checksum, static_cast<uint16_t>(~sum));
}

// Rewrites DSCP/ECN (and an IPv4 checksum with them).
void set_tos(uint8_t* ip, IpVersion version, uint8_t dscp, uint8_t ecn) {
  const uint8_t tos = static_cast<uint8_t>(dscp << 2 | ecn);
  if (version == IpVersion::kV4) {
    set_ipv4_word(ip, 0, static_cast<uint16_t>(ip[offsetof(Ipv4Hdr, version_ihl)] << 8 | tos));
  } else {
    auto h = load<Ipv6Hdr>(ip);
    h.version_tc_flow.set((h.version_tc_flow.get() & 0xf00fffff) | uint32_t{tos} << 20);
    store(ip, h);
  }
}

}  // namespace

size_t trim(std::span<uint8_t> frame, const DscpConfig& dscp) {
  ParseConfig cfg;
  cfg.dscp = dscp;
  cfg.verify_icrc = false;  // a switch does not check end-to-end CRCs
  PacketView pkt;
  if (parse(frame, cfg, &pkt) != ParseStatus::kOk) return 0;
  if (!is_data(pkt.t.opcode) || pkt.dscp != dscp.trimmable) return 0;
  L3 l3;
  find_l3(frame, &l3);  // parse() succeeded, so the IP header is there
  uint8_t* ip = frame.data() + l3.offset;
  const size_t new_len = pkt.header_len;
  const size_t l3_len = new_len - l3.offset;
  size_t udp_offset;
  if (l3.version == IpVersion::kV4) {
    set_ipv4_word(ip, offsetof(Ipv4Hdr, total_length), static_cast<uint16_t>(l3_len));
    udp_offset = l3.offset + sizeof(Ipv4Hdr);
  } else {
    auto h = load<Ipv6Hdr>(ip);
    h.payload_length.set(static_cast<uint16_t>(l3_len - sizeof(Ipv6Hdr)));
    store(ip, h);
    udp_offset = l3.offset + sizeof(Ipv6Hdr) + (pkt.has_srh ? sizeof(SrhOneSegment) : 0);
  }
  auto udp = load<UdpHdr>(frame.data() + udp_offset);
  udp.length.set(static_cast<uint16_t>(new_len - udp_offset));
  store(frame.data() + udp_offset, udp);
  set_tos(ip, l3.version, dscp.trimmed, pkt.ecn);
  return new_len;
}

bool mark_ce(std::span<uint8_t> frame) {
  L3 l3;
  if (!find_l3(frame, &l3)) return false;
  uint8_t* ip = frame.data() + l3.offset;
  uint8_t tos;
  if (l3.version == IpVersion::kV4) {
    tos = load<Ipv4Hdr>(ip).tos;
  } else {
    tos = static_cast<uint8_t>(load<Ipv6Hdr>(ip).version_tc_flow.get() >> 20);
  }
  if ((tos & 3) == kEcnNotEct) return false;
  set_tos(ip, l3.version, tos >> 2, kEcnCe);
  return true;
}

}  // namespace softmrc::wire
