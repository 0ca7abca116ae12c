// Parsing MRC packets from untrusted bytes.
//
// Every header is bounds-checked before it is copied out, lengths are
// checked against each other (Ethernet padding may follow the IP packet),
// and a trimmed packet's payload and ICRC are never read.
#include <cstring>

#include "wire/icrc.h"
#include "wire/packet.h"

namespace softmrc::wire {
namespace {

size_t type_header_len(Opcode op) {
  return transport_header_len(op) - sizeof(Bth) - sizeof(Mth);
}

void read_type_header(const uint8_t* p, Transport* t) {
  if (is_data(t->opcode)) {
    const auto d = load<DataHdr>(p);
    t->data.va = d.va.get();
    t->data.rkey = d.rkey.get();
    t->data.msg_len = d.msg_len.get();
    t->data.msn = d.msn.get();
    t->data.offset = d.offset.get();
    t->data.imm = has_imm(t->opcode) ? load<ImmHdr>(p + sizeof(DataHdr)).imm.get() : 0;
  } else if (is_feedback(t->opcode)) {
    const auto f = load<FeedbackHdr>(p);
    t->fb.cum_psn = f.cum_psn.get() & kPsnMask;
    t->fb.ref_psn = f.ref_psn.get() & kPsnMask;
    t->fb.sack_base = f.sack_base.get() & kPsnMask;
    t->fb.sack_bitmap[0] = f.sack_bitmap[0].get();
    t->fb.sack_bitmap[1] = f.sack_bitmap[1].get();
    t->fb.echo_tag = f.echo_tag.get();
    t->fb.service_time_ns = f.service_time_ns.get();
    t->fb.window_mpr = f.window_mpr.get();
    t->fb.ce_count = f.ce_count.get();
    t->fb.code = static_cast<NackCode>(f.code);
    t->fb.flags = f.flags;
  } else if (t->opcode == Opcode::kPortStatus) {
    const auto s = load<PortStatusHdr>(p);
    t->port_status.port_mask = s.port_mask.get();
    t->port_status.seq = s.seq.get();
    t->port_status.num_planes = s.num_planes;
  } else {
    const auto pr = load<ProbeHdr>(p);
    t->probe.req_id = pr.req_id.get();
    t->probe.port = pr.port;
    t->probe.flags = pr.flags;
    t->probe.echo_tag = pr.echo_tag.get();
    t->probe.t_send_ns = pr.t_send_ns.get();
    t->probe.service_time_ns = pr.service_time_ns.get();
  }
}

// Semantic checks a well-formed header must pass, beyond its length.
ParseStatus check_fields(const Transport& t, uint32_t payload_len, bool trimmed) {
  if (is_data(t.opcode)) {
    const DataFields& d = t.data;
    const uint64_t end = uint64_t{d.offset} + payload_len;
    if (is_first(t.opcode) && d.offset != 0) return ParseStatus::kBadField;
    if (uint64_t{d.offset} > d.msg_len) return ParseStatus::kBadField;
    if (!trimmed) {
      if (end > d.msg_len) return ParseStatus::kBadField;
      // A last packet ends the message; others leave bytes for a later one.
      if (is_last(t.opcode) != (end == d.msg_len)) return ParseStatus::kBadField;
      if (!is_last(t.opcode) && payload_len == 0) return ParseStatus::kBadField;
    }
    // The target address must not wrap around the address space.
    if (d.va > UINT64_MAX - d.msg_len) return ParseStatus::kBadField;
  } else if (is_feedback(t.opcode)) {
    const bool nack = t.opcode == Opcode::kNack;
    const auto code = static_cast<uint8_t>(t.fb.code);
    if (nack != (code != 0) || code > static_cast<uint8_t>(NackCode::kInvalidRequest))
      return ParseStatus::kBadField;
  } else if (t.opcode == Opcode::kPortStatus) {
    if (t.port_status.num_planes > 32) return ParseStatus::kBadField;
    if (t.port_status.num_planes < 32 && (t.port_status.port_mask >> t.port_status.num_planes))
      return ParseStatus::kBadField;
  }
  return ParseStatus::kOk;
}

}  // namespace

ParseStatus parse(std::span<const uint8_t> frame, const ParseConfig& cfg, PacketView* out) {
  *out = PacketView{};
  const uint8_t* const base = frame.data();
  const size_t size = frame.size();
  size_t off = 0;

  if (size < sizeof(EthHdr)) return ParseStatus::kTruncated;
  const auto eth = load<EthHdr>(base);
  std::memcpy(out->dst_mac.bytes, eth.dst, 6);
  std::memcpy(out->src_mac.bytes, eth.src, 6);
  uint16_t ether_type = eth.ether_type.get();
  off = sizeof(EthHdr);
  if (ether_type == kEtherTypeVlan) {
    if (size < off + sizeof(VlanTag)) return ParseStatus::kTruncated;
    const auto vlan = load<VlanTag>(base + off);
    out->has_vlan = true;
    out->vlan_tci = vlan.tci.get();
    ether_type = vlan.ether_type.get();
    off += sizeof(VlanTag);
  }

  IcrcLayout layout;
  layout.l3_offset = off;
  layout.ev_mode = cfg.ev_mode;
  size_t ip_end = 0;  // end of the IP packet; bytes after it are link padding
  uint8_t l4_proto = 0;
  if (ether_type == kEtherTypeIpv4) {
    if (size < off + sizeof(Ipv4Hdr)) return ParseStatus::kTruncated;
    const auto ip = load<Ipv4Hdr>(base + off);
    if (ip.version_ihl != 0x45) return ParseStatus::kBadIpHeader;
    if (ipv4_header_sum(base + off) != 0xffff) return ParseStatus::kBadIpHeader;
    if (ip.fragment.get() & 0x3fff) return ParseStatus::kFragment;  // MF or an offset
    const size_t total = ip.total_length.get();
    if (total < sizeof(Ipv4Hdr)) return ParseStatus::kBadIpHeader;
    if (size < off + total) return ParseStatus::kTruncated;
    ip_end = off + total;
    out->ip_version = IpVersion::kV4;
    out->dscp = ip.tos >> 2;
    out->ecn = ip.tos & 3;
    out->ttl = ip.ttl;
    std::memcpy(out->src_ip, ip.src, 4);
    std::memcpy(out->dst_ip, ip.dst, 4);
    l4_proto = ip.protocol;
    layout.ip_version = IpVersion::kV4;
    off += sizeof(Ipv4Hdr);
  } else if (ether_type == kEtherTypeIpv6) {
    if (size < off + sizeof(Ipv6Hdr)) return ParseStatus::kTruncated;
    const auto ip = load<Ipv6Hdr>(base + off);
    const uint32_t vtf = ip.version_tc_flow.get();
    if (vtf >> 28 != 6) return ParseStatus::kBadIpHeader;
    const size_t payload = ip.payload_length.get();
    if (size < off + sizeof(Ipv6Hdr) + payload) return ParseStatus::kTruncated;
    ip_end = off + sizeof(Ipv6Hdr) + payload;
    out->ip_version = IpVersion::kV6;
    out->dscp = (vtf >> 22) & 0x3f;
    out->ecn = (vtf >> 20) & 3;
    out->flow_label = vtf & 0xfffff;
    out->ttl = ip.hop_limit;
    std::memcpy(out->src_ip, ip.src, 16);
    std::memcpy(out->dst_ip, ip.dst, 16);
    l4_proto = ip.next_header;
    layout.ip_version = IpVersion::kV6;
    off += sizeof(Ipv6Hdr);
    if (l4_proto == kIpProtoRouting) {
      if (ip_end < off + sizeof(SrhOneSegment)) return ParseStatus::kTruncated;
      const auto srh = load<SrhOneSegment>(base + off);
      // MRC's SRv6 mode uses exactly one 128-bit segment.
      if (srh.routing_type != kSrhRoutingType || srh.hdr_ext_len != 2 || srh.last_entry != 0)
        return ParseStatus::kNotUdp;
      out->has_srh = true;
      std::memcpy(out->srh_segment, srh.segment, 16);
      l4_proto = srh.next_header;
      layout.has_srh = true;
      off += sizeof(SrhOneSegment);
    }
  } else {
    return ParseStatus::kNotIp;
  }
  if (l4_proto != kIpProtoUdp) return ParseStatus::kNotUdp;

  if (ip_end < off + sizeof(UdpHdr)) return ParseStatus::kTruncated;
  const auto udp = load<UdpHdr>(base + off);
  if (udp.dst_port.get() != kRoceUdpPort) return ParseStatus::kNotMrcPort;
  if (udp.length.get() != ip_end - off) return ParseStatus::kBadUdpLength;
  out->udp_src_port = udp.src_port.get();
  off += sizeof(UdpHdr);

  if (ip_end < off + sizeof(Bth) + sizeof(Mth)) return ParseStatus::kTruncated;
  const auto bth = load<Bth>(base + off);
  if (!is_known_opcode(bth.opcode)) return ParseStatus::kBadOpcode;
  if (bth.se_m_pad_tver & 0x0f) return ParseStatus::kBadVersion;  // BTH TVer must be 0
  const auto mth = load<Mth>(base + off + sizeof(Bth));
  if (mth.version != kProtocolVersion) return ParseStatus::kBadVersion;
  Transport& t = out->t;
  t.opcode = static_cast<Opcode>(bth.opcode);
  t.solicited = bth.se_m_pad_tver & 0x80;
  t.pkey = bth.pkey.get();
  t.dest_qpn = bth.dest_qpn.get();
  t.ack_req = bth.ack_req & 0x80;
  t.psn = bth.psn.get();
  t.mth_flags = mth.flags;
  t.path_tag = mth.path_tag.get();
  off += sizeof(Bth) + sizeof(Mth);

  const size_t type_len = type_header_len(t.opcode);
  if (ip_end < off + type_len) return ParseStatus::kTruncated;
  read_type_header(base + off, &t);
  off += type_len;
  out->header_len = static_cast<uint16_t>(off);

  out->trimmed = out->dscp == cfg.dscp.trimmed;
  if (out->trimmed) {
    // Only data is trimmable; what follows the headers is not payload.
    if (!is_data(t.opcode)) return ParseStatus::kBadField;
    return check_fields(t, 0, true);
  }

  if (ip_end < off + kIcrcLen) return ParseStatus::kTruncated;
  const size_t payload_len = ip_end - off - kIcrcLen;
  if (payload_len > kMaxPayload || (payload_len > 0 && !is_data(t.opcode)))
    return ParseStatus::kBadLength;
  if (const ParseStatus s = check_fields(t, static_cast<uint32_t>(payload_len), false);
      s != ParseStatus::kOk)
    return s;

  if (cfg.verify_icrc) {
    const uint8_t* icrc_at = base + ip_end - kIcrcLen;
    const uint32_t want = load<Be32>(icrc_at).get();
    const uint32_t got = icrc_of(layout, frame.first(ip_end - kIcrcLen), {});
    if (want != got) return ParseStatus::kBadIcrc;
  }
  out->payload = payload_len ? base + off : nullptr;
  out->payload_len = static_cast<uint32_t>(payload_len);
  return ParseStatus::kOk;
}

WireEv wire_ev_of(const PacketView& pkt, EvMode mode) {
  WireEv ev;
  switch (mode) {
    case EvMode::kUdp:
    case EvMode::kStev:
      ev.bytes[0] = static_cast<uint8_t>(pkt.udp_src_port >> 8);
      ev.bytes[1] = static_cast<uint8_t>(pkt.udp_src_port);
      if (mode == EvMode::kStev) {
        ev.bytes[2] = static_cast<uint8_t>(pkt.flow_label >> 8);
        ev.bytes[3] = static_cast<uint8_t>(pkt.flow_label);
      }
      break;
    case EvMode::kSrv6:
      std::memcpy(ev.bytes, pkt.dst_ip, 16);
      if (pkt.has_srh) std::memcpy(ev.bytes + 16, pkt.srh_segment, 16);
      break;
  }
  return ev;
}

}  // namespace softmrc::wire
