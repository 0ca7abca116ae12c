// Building MRC packets: headers into a caller's buffer, the ICRC over
// headers and a payload that may live elsewhere (zero-copy transmit).
#include <cstring>

#include "wire/icrc.h"
#include "wire/packet.h"

namespace softmrc::wire {
namespace {

size_t type_header_len(Opcode op) {
  if (is_data(op)) return sizeof(DataHdr) + (has_imm(op) ? sizeof(ImmHdr) : 0);
  if (is_feedback(op)) return sizeof(FeedbackHdr);
  if (op == Opcode::kPortStatus) return sizeof(PortStatusHdr);
  return sizeof(ProbeHdr);
}

size_t l3_offset(const FrameSpec& frame) {
  return sizeof(EthHdr) + (frame.has_vlan ? sizeof(VlanTag) : 0);
}

bool has_srh(const FrameSpec& frame) {
  return frame.ip_version == IpVersion::kV6 && frame.ev_mode == EvMode::kSrv6 && frame.srv6_srh;
}

size_t l3_header_len(const FrameSpec& frame) {
  if (frame.ip_version == IpVersion::kV4) return sizeof(Ipv4Hdr);
  return sizeof(Ipv6Hdr) + (has_srh(frame) ? sizeof(SrhOneSegment) : 0);
}

void write_type_header(const Transport& t, uint8_t* p) {
  if (is_data(t.opcode)) {
    DataHdr d{};
    d.va.set(t.data.va);
    d.rkey.set(t.data.rkey);
    d.msg_len.set(t.data.msg_len);
    d.msn.set(t.data.msn);
    d.offset.set(t.data.offset);
    store(p, d);
    if (has_imm(t.opcode)) {
      ImmHdr imm{};
      imm.imm.set(t.data.imm);
      store(p + sizeof(DataHdr), imm);
    }
  } else if (is_feedback(t.opcode)) {
    FeedbackHdr f{};
    f.cum_psn.set(t.fb.cum_psn & kPsnMask);
    f.ref_psn.set(t.fb.ref_psn & kPsnMask);
    f.sack_base.set(t.fb.sack_base & kPsnMask);
    f.sack_bitmap[0].set(t.fb.sack_bitmap[0]);
    f.sack_bitmap[1].set(t.fb.sack_bitmap[1]);
    f.echo_tag.set(t.fb.echo_tag);
    f.service_time_ns.set(t.fb.service_time_ns);
    f.window_mpr.set(t.fb.window_mpr);
    f.ce_count.set(t.fb.ce_count);
    f.code = static_cast<uint8_t>(t.fb.code);
    f.flags = t.fb.flags;
    store(p, f);
  } else if (t.opcode == Opcode::kPortStatus) {
    PortStatusHdr s{};
    s.port_mask.set(t.port_status.port_mask);
    s.seq.set(t.port_status.seq);
    s.num_planes = t.port_status.num_planes;
    store(p, s);
  } else {
    ProbeHdr pr{};
    pr.req_id.set(t.probe.req_id);
    pr.port = t.probe.port;
    pr.flags = t.probe.flags;
    pr.echo_tag.set(t.probe.echo_tag);
    pr.t_send_ns.set(t.probe.t_send_ns);
    pr.service_time_ns.set(t.probe.service_time_ns);
    store(p, pr);
  }
}

}  // namespace

uint16_t ipv4_header_sum(const uint8_t* hdr) {
  uint32_t sum = 0;
  for (size_t i = 0; i < sizeof(Ipv4Hdr); i += 2) sum += (hdr[i] << 8) | hdr[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

size_t transport_header_len(Opcode op) {
  return sizeof(Bth) + sizeof(Mth) + type_header_len(op);
}

size_t header_len(const FrameSpec& frame, Opcode op) {
  return l3_offset(frame) + l3_header_len(frame) + sizeof(UdpHdr) + transport_header_len(op);
}

size_t build_headers(const FrameSpec& frame, const WireEv& ev, TxMarking marking,
                     const Transport& t, uint32_t payload_len, std::span<uint8_t> out) {
  if (!is_known_opcode(static_cast<uint8_t>(t.opcode))) return 0;
  if (t.psn > kPsnMask || t.dest_qpn > kQpnMask) return 0;
  if (payload_len > kMaxPayload || (payload_len > 0 && !is_data(t.opcode))) return 0;
  if (frame.ip_version == IpVersion::kV4 && frame.ev_mode != EvMode::kUdp) return 0;
  if (marking.dscp > 63 || marking.ecn > 3) return 0;
  const size_t hlen = header_len(frame, t.opcode);
  if (out.size() < hlen) return 0;

  uint8_t* p = out.data();
  EthHdr eth{};
  std::memcpy(eth.dst, frame.dst_mac.bytes, 6);
  std::memcpy(eth.src, frame.src_mac.bytes, 6);
  const uint16_t l3_type = frame.ip_version == IpVersion::kV4 ? kEtherTypeIpv4 : kEtherTypeIpv6;
  if (frame.has_vlan) {
    eth.ether_type.set(kEtherTypeVlan);
    store(p, eth);
    VlanTag vlan{};
    vlan.tci.set(frame.vlan_tci);
    vlan.ether_type.set(l3_type);
    store(p + sizeof(EthHdr), vlan);
  } else {
    eth.ether_type.set(l3_type);
    store(p, eth);
  }
  p += l3_offset(frame);

  const size_t transport_len = transport_header_len(t.opcode);
  const size_t udp_len = sizeof(UdpHdr) + transport_len + payload_len + kIcrcLen;
  const uint8_t tos = static_cast<uint8_t>(marking.dscp << 2 | marking.ecn);
  uint16_t src_port = 0;
  if (frame.ip_version == IpVersion::kV4) {
    Ipv4Hdr ip{};
    ip.version_ihl = 0x45;
    ip.tos = tos;
    ip.total_length.set(static_cast<uint16_t>(sizeof(Ipv4Hdr) + udp_len));
    ip.fragment.set(0x4000);  // don't fragment
    ip.ttl = frame.ttl;
    ip.protocol = kIpProtoUdp;
    std::memcpy(ip.src, frame.src_ip, 4);
    std::memcpy(ip.dst, frame.dst_ip, 4);
    store(p, ip);
    const auto csum = static_cast<uint16_t>(~ipv4_header_sum(p));
    p[offsetof(Ipv4Hdr, checksum)] = static_cast<uint8_t>(csum >> 8);
    p[offsetof(Ipv4Hdr, checksum) + 1] = static_cast<uint8_t>(csum);
    p += sizeof(Ipv4Hdr);
    src_port = static_cast<uint16_t>(ev.bytes[0] << 8 | ev.bytes[1]);
  } else {
    const bool srh = has_srh(frame);
    uint32_t flow_label = 0;
    Ipv6Hdr ip{};
    switch (frame.ev_mode) {
      case EvMode::kUdp:
        src_port = static_cast<uint16_t>(ev.bytes[0] << 8 | ev.bytes[1]);
        std::memcpy(ip.dst, frame.dst_ip, 16);
        break;
      case EvMode::kStev:
        src_port = static_cast<uint16_t>(ev.bytes[0] << 8 | ev.bytes[1]);
        flow_label = static_cast<uint32_t>(ev.bytes[2] << 8 | ev.bytes[3]);
        std::memcpy(ip.dst, frame.dst_ip, 16);
        break;
      case EvMode::kSrv6:
        // The path is in the address; the source port keeps a little
        // entropy for any ECMP hop outside the SRv6 domain.
        src_port = static_cast<uint16_t>(0xc000 | (t.path_tag & 0x3fff));
        std::memcpy(ip.dst, ev.bytes, 16);
        break;
    }
    ip.version_tc_flow.set(6u << 28 | uint32_t{tos} << 20 | flow_label);
    ip.payload_length.set(static_cast<uint16_t>((srh ? sizeof(SrhOneSegment) : 0) + udp_len));
    ip.next_header = srh ? kIpProtoRouting : kIpProtoUdp;
    ip.hop_limit = frame.ttl;
    std::memcpy(ip.src, frame.src_ip, 16);
    store(p, ip);
    p += sizeof(Ipv6Hdr);
    if (srh) {
      SrhOneSegment s{};
      s.next_header = kIpProtoUdp;
      s.hdr_ext_len = 2;
      s.routing_type = kSrhRoutingType;
      s.segments_left = 1;
      std::memcpy(s.segment, ev.bytes + 16, 16);
      store(p, s);
      p += sizeof(SrhOneSegment);
    }
  }

  UdpHdr udp{};
  udp.src_port.set(src_port);
  udp.dst_port.set(kRoceUdpPort);
  udp.length.set(static_cast<uint16_t>(udp_len));
  store(p, udp);
  p += sizeof(UdpHdr);

  Bth bth{};
  bth.opcode = static_cast<uint8_t>(t.opcode);
  bth.se_m_pad_tver = t.solicited ? 0x80 : 0;
  bth.pkey.set(t.pkey);
  bth.dest_qpn.set(t.dest_qpn);
  bth.ack_req = t.ack_req ? 0x80 : 0;
  bth.psn.set(t.psn);
  store(p, bth);
  p += sizeof(Bth);

  Mth mth{};
  mth.version = kProtocolVersion;
  mth.flags = t.mth_flags;
  mth.path_tag.set(t.path_tag);
  store(p, mth);
  p += sizeof(Mth);

  write_type_header(t, p);
  return hlen;
}

uint32_t packet_icrc(std::span<const uint8_t> headers, std::span<const uint8_t> payload,
                     EvMode ev_mode) {
  IcrcLayout layout;
  layout.ev_mode = ev_mode;
  layout.l3_offset = sizeof(EthHdr);
  uint16_t type = static_cast<uint16_t>(headers[12] << 8 | headers[13]);
  if (type == kEtherTypeVlan) {
    layout.l3_offset += sizeof(VlanTag);
    type = static_cast<uint16_t>(headers[16] << 8 | headers[17]);
  }
  layout.ip_version = type == kEtherTypeIpv4 ? IpVersion::kV4 : IpVersion::kV6;
  layout.has_srh = layout.ip_version == IpVersion::kV6 &&
                   headers[layout.l3_offset + offsetof(Ipv6Hdr, next_header)] == kIpProtoRouting;
  return icrc_of(layout, headers, payload);
}

void store_icrc(uint32_t icrc, uint8_t out[kIcrcLen]) {
  Be32 v;
  v.set(icrc);
  std::memcpy(out, v.bytes, kIcrcLen);
}

size_t build_packet(const FrameSpec& frame, const WireEv& ev, TxMarking marking, const Transport& t,
                    std::span<const uint8_t> payload, std::span<uint8_t> out) {
  if (payload.size() > kMaxPayload) return 0;
  const auto payload_len = static_cast<uint32_t>(payload.size());
  const size_t hlen = build_headers(frame, ev, marking, t, payload_len, out);
  if (hlen == 0 || out.size() < hlen + payload_len + kIcrcLen) return 0;
  if (payload_len) std::memcpy(out.data() + hlen, payload.data(), payload_len);
  const uint32_t icrc = packet_icrc(out.first(hlen), payload, frame.ev_mode);
  store_icrc(icrc, out.data() + hlen + payload_len);
  return hlen + payload_len + kIcrcLen;
}

}  // namespace softmrc::wire
