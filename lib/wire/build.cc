// Building MRC packets: headers into a caller's buffer, the ICRC over
// headers and a payload that may live elsewhere (zero-copy transmit).
#include <cstring>

#include "wire/icrc.h"
#include "wire/packet.h"

namespace softmrc::wire {
namespace {

IcrcLayout layout_of(const FrameSpec& frame) {
  return {l3_offset(frame), frame.ip_version, has_srh(frame), frame.ev_mode};
}

// Every field is written in place, reserved ones as zero (see get_be16()).
void write_type_header(const Transport& t, uint8_t* p) {
  if (is_data(t.opcode)) {
    put_be64(p + offsetof(DataHdr, va), t.data.va);
    put_be32(p + offsetof(DataHdr, rkey), t.data.rkey);
    put_be32(p + offsetof(DataHdr, msg_len), t.data.msg_len);
    put_be32(p + offsetof(DataHdr, msn), t.data.msn);
    put_be32(p + offsetof(DataHdr, offset), t.data.offset);
    if (has_imm(t.opcode)) put_be32(p + sizeof(DataHdr) + offsetof(ImmHdr, imm), t.data.imm);
  } else if (is_feedback(t.opcode)) {
    const Feedback& f = t.fb;
    put_be32(p + offsetof(FeedbackHdr, cum_psn), f.cum_psn & kPsnMask);
    put_be32(p + offsetof(FeedbackHdr, ref_psn), f.ref_psn & kPsnMask);
    put_be32(p + offsetof(FeedbackHdr, sack_base), f.sack_base & kPsnMask);
    put_be64(p + offsetof(FeedbackHdr, sack_bitmap), f.sack_bitmap[0]);
    put_be64(p + offsetof(FeedbackHdr, sack_bitmap) + 8, f.sack_bitmap[1]);
    put_be32(p + offsetof(FeedbackHdr, echo_tag), f.echo_tag);
    put_be32(p + offsetof(FeedbackHdr, service_time_ns), f.service_time_ns);
    put_be16(p + offsetof(FeedbackHdr, window_mpr), f.window_mpr);
    put_be16(p + offsetof(FeedbackHdr, ce_count), f.ce_count);
    p[offsetof(FeedbackHdr, code)] = static_cast<uint8_t>(f.code);
    p[offsetof(FeedbackHdr, flags)] = f.flags;
    put_be16(p + offsetof(FeedbackHdr, reserved), 0);
  } else if (t.opcode == Opcode::kPortStatus) {
    put_be32(p + offsetof(PortStatusHdr, port_mask), t.port_status.port_mask);
    put_be32(p + offsetof(PortStatusHdr, seq), t.port_status.seq);
    p[offsetof(PortStatusHdr, num_planes)] = t.port_status.num_planes;
    put_be24(p + offsetof(PortStatusHdr, reserved), 0);
  } else {
    const Probe& pr = t.probe;
    put_be16(p + offsetof(ProbeHdr, req_id), pr.req_id);
    p[offsetof(ProbeHdr, port)] = pr.port;
    p[offsetof(ProbeHdr, flags)] = pr.flags;
    put_be32(p + offsetof(ProbeHdr, echo_tag), pr.echo_tag);
    put_be64(p + offsetof(ProbeHdr, t_send_ns), pr.t_send_ns);
    put_be32(p + offsetof(ProbeHdr, service_time_ns), pr.service_time_ns);
    put_be32(p + offsetof(ProbeHdr, reserved), 0);
  }
}

}  // namespace

uint16_t ipv4_header_sum(const uint8_t* hdr) {
  uint64_t sum = 0;
  for (size_t i = 0; i < sizeof(Ipv4Hdr); i += 4) sum += get_be32(hdr + i);
  sum = (sum & 0xffffffff) + (sum >> 32);
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>((sum & 0xffff) + (sum >> 16));
}

static_assert(sizeof(EthHdr) + sizeof(VlanTag) + sizeof(Ipv6Hdr) + sizeof(SrhOneSegment) +
                  sizeof(UdpHdr) <=
              sizeof(HeaderTemplate::bytes));

HeaderTemplate header_template(const FrameSpec& frame) {
  HeaderTemplate h;
  if (frame.ip_version == IpVersion::kV4 && frame.ev_mode != EvMode::kUdp) return h;
  h.layout = layout_of(frame);
  const bool srh = h.layout.has_srh;
  uint8_t* p = h.bytes;
  std::memcpy(p + offsetof(EthHdr, dst), frame.dst_mac.bytes, 6);
  std::memcpy(p + offsetof(EthHdr, src), frame.src_mac.bytes, 6);
  const uint16_t l3_type = frame.ip_version == IpVersion::kV4 ? kEtherTypeIpv4 : kEtherTypeIpv6;
  if (frame.has_vlan) {
    put_be16(p + offsetof(EthHdr, ether_type), kEtherTypeVlan);
    put_be16(p + sizeof(EthHdr) + offsetof(VlanTag, tci), frame.vlan_tci);
    put_be16(p + sizeof(EthHdr) + offsetof(VlanTag, ether_type), l3_type);
  } else {
    put_be16(p + offsetof(EthHdr, ether_type), l3_type);
  }
  p += h.layout.l3_offset;
  if (frame.ip_version == IpVersion::kV4) {
    // The version, TOS, length and checksum words are the packet's.
    put_be16(p + offsetof(Ipv4Hdr, fragment), 0x4000);  // don't fragment
    p[offsetof(Ipv4Hdr, ttl)] = frame.ttl;
    p[offsetof(Ipv4Hdr, protocol)] = kIpProtoUdp;
    std::memcpy(p + offsetof(Ipv4Hdr, src), frame.src_ip, 4);
    std::memcpy(p + offsetof(Ipv4Hdr, dst), frame.dst_ip, 4);
    h.ipv4_sum = ipv4_header_sum(p);
    p += sizeof(Ipv4Hdr);
  } else {
    p[offsetof(Ipv6Hdr, next_header)] = srh ? kIpProtoRouting : kIpProtoUdp;
    p[offsetof(Ipv6Hdr, hop_limit)] = frame.ttl;
    std::memcpy(p + offsetof(Ipv6Hdr, src), frame.src_ip, 16);
    // SRv6: the EV is the destination, the packet's.
    if (frame.ev_mode != EvMode::kSrv6) std::memcpy(p + offsetof(Ipv6Hdr, dst), frame.dst_ip, 16);
    p += sizeof(Ipv6Hdr);
    if (srh) {
      p[offsetof(SrhOneSegment, next_header)] = kIpProtoUdp;
      p[offsetof(SrhOneSegment, hdr_ext_len)] = 2;
      p[offsetof(SrhOneSegment, routing_type)] = kSrhRoutingType;
      p[offsetof(SrhOneSegment, segments_left)] = 1;
      p += sizeof(SrhOneSegment);  // last entry, flags, tag 0; the segment is the EV's
    }
  }
  put_be16(p + offsetof(UdpHdr, dst_port), kRoceUdpPort);  // checksum 0
  p += sizeof(UdpHdr);
  h.len = static_cast<uint8_t>(p - h.bytes);
  return h;
}

size_t build_headers(const FrameSpec& frame, const WireEv& ev, TxMarking marking,
                     const Transport& t, uint32_t payload_len, std::span<uint8_t> out) {
  return build_headers(header_template(frame), ev, marking, t, payload_len, out);
}

size_t build_headers(const HeaderTemplate& tmpl, const WireEv& ev, TxMarking marking,
                     const Transport& t, uint32_t payload_len, std::span<uint8_t> out) {
  if (tmpl.len == 0) return 0;
  if (!is_known_opcode(static_cast<uint8_t>(t.opcode))) return 0;
  if (t.psn > kPsnMask || t.dest_qpn > kQpnMask) return 0;
  if (payload_len > kMaxPayload || (payload_len > 0 && !is_data(t.opcode))) return 0;
  if (marking.dscp > 63 || marking.ecn > 3) return 0;
  const size_t transport_len = transport_header_len(t.opcode);
  const size_t hlen = tmpl.len + transport_len;
  if (out.size() < hlen) return 0;

  // A copy of fixed size (a few vector moves, not a call) where there is
  // room: the transport headers below overwrite what it wrote past the
  // template.
  uint8_t* p = out.data();
  if (out.size() >= sizeof(tmpl.bytes))
    std::memcpy(p, tmpl.bytes, sizeof(tmpl.bytes));
  else
    std::memcpy(p, tmpl.bytes, tmpl.len);
  const IcrcLayout& at = tmpl.layout;
  uint8_t* ip = p + at.l3_offset;
  const size_t udp_len = sizeof(UdpHdr) + transport_len + payload_len + kIcrcLen;
  const uint8_t tos = static_cast<uint8_t>(marking.dscp << 2 | marking.ecn);
  uint16_t src_port = static_cast<uint16_t>(ev.bytes[0] << 8 | ev.bytes[1]);
  if (at.ip_version == IpVersion::kV4) {
    const auto total = static_cast<uint16_t>(sizeof(Ipv4Hdr) + udp_len);
    ip[offsetof(Ipv4Hdr, version_ihl)] = 0x45;
    ip[offsetof(Ipv4Hdr, tos)] = tos;
    put_be16(ip + offsetof(Ipv4Hdr, total_length), total);
    uint32_t sum = tmpl.ipv4_sum + (uint32_t{0x45} << 8 | tos) + total;
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    put_be16(ip + offsetof(Ipv4Hdr, checksum), static_cast<uint16_t>(~sum));
  } else {
    uint32_t flow_label = 0;
    if (at.ev_mode == EvMode::kStev) {
      flow_label = static_cast<uint32_t>(ev.bytes[2] << 8 | ev.bytes[3]);
    } else if (at.ev_mode == EvMode::kSrv6) {
      // The path is in the address; the source port keeps a little
      // entropy for any ECMP hop outside the SRv6 domain.
      src_port = static_cast<uint16_t>(0xc000 | (t.path_tag & 0x3fff));
      std::memcpy(ip + offsetof(Ipv6Hdr, dst), ev.bytes, 16);
      if (at.has_srh)
        std::memcpy(ip + sizeof(Ipv6Hdr) + offsetof(SrhOneSegment, segment), ev.bytes + 16, 16);
    }
    put_be32(ip + offsetof(Ipv6Hdr, version_tc_flow), 6u << 28 | uint32_t{tos} << 20 | flow_label);
    put_be16(ip + offsetof(Ipv6Hdr, payload_length),
             static_cast<uint16_t>((at.has_srh ? sizeof(SrhOneSegment) : 0) + udp_len));
  }
  p += tmpl.len - sizeof(UdpHdr);
  put_be16(p + offsetof(UdpHdr, src_port), src_port);
  put_be16(p + offsetof(UdpHdr, length), static_cast<uint16_t>(udp_len));
  p += sizeof(UdpHdr);

  p[offsetof(Bth, opcode)] = static_cast<uint8_t>(t.opcode);
  p[offsetof(Bth, se_m_pad_tver)] = t.solicited ? 0x80 : 0;
  put_be16(p + offsetof(Bth, pkey), t.pkey);
  p[offsetof(Bth, resv8a)] = 0;
  put_be24(p + offsetof(Bth, dest_qpn), t.dest_qpn);
  p[offsetof(Bth, ack_req)] = t.ack_req ? 0x80 : 0;
  put_be24(p + offsetof(Bth, psn), t.psn);
  p += sizeof(Bth);

  p[offsetof(Mth, version)] = kProtocolVersion;
  p[offsetof(Mth, flags)] = t.mth_flags;
  put_be16(p + offsetof(Mth, reserved), 0);
  put_be32(p + offsetof(Mth, path_tag), t.path_tag);
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
  put_be32(out, icrc);
}

namespace {

size_t finish(const IcrcLayout& layout, size_t hlen, std::span<const uint8_t> payload,
              std::span<uint8_t> out) {
  if (out.size() < hlen + payload.size() + kIcrcLen) return 0;
  const uint32_t icrc = icrc_copy(layout, out.data(), hlen, payload);
  store_icrc(icrc, out.data() + hlen + payload.size());
  return hlen + payload.size() + kIcrcLen;
}

}  // namespace

size_t finish_packet(const FrameSpec& frame, size_t hlen, std::span<const uint8_t> payload,
                     std::span<uint8_t> out) {
  return finish(layout_of(frame), hlen, payload, out);
}

size_t finish_packet(const HeaderTemplate& tmpl, size_t hlen, std::span<const uint8_t> payload,
                     std::span<uint8_t> out) {
  return finish(tmpl.layout, hlen, payload, out);
}

size_t build_packet(const FrameSpec& frame, const WireEv& ev, TxMarking marking, const Transport& t,
                    std::span<const uint8_t> payload, std::span<uint8_t> out) {
  if (payload.size() > kMaxPayload) return 0;
  const HeaderTemplate tmpl = header_template(frame);
  const size_t hlen =
      build_headers(tmpl, ev, marking, t, static_cast<uint32_t>(payload.size()), out);
  return hlen == 0 ? 0 : finish_packet(tmpl, hlen, payload, out);
}

}  // namespace softmrc::wire
