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

// Fills the member of `t` its opcode selects and clears the others.
void read_type_header(const uint8_t* p, Transport* t) {
  if (is_data(t->opcode)) {
    t->data.va = get_be64(p + offsetof(DataHdr, va));
    t->data.rkey = get_be32(p + offsetof(DataHdr, rkey));
    t->data.msg_len = get_be32(p + offsetof(DataHdr, msg_len));
    t->data.msn = get_be32(p + offsetof(DataHdr, msn));
    t->data.offset = get_be32(p + offsetof(DataHdr, offset));
    t->data.imm = has_imm(t->opcode) ? get_be32(p + sizeof(DataHdr)) : 0;
    t->fb = {};
    t->probe = {};
    t->port_status = {};
  } else if (is_feedback(t->opcode)) {
    Feedback& f = t->fb;
    f.cum_psn = get_be32(p + offsetof(FeedbackHdr, cum_psn)) & kPsnMask;
    f.ref_psn = get_be32(p + offsetof(FeedbackHdr, ref_psn)) & kPsnMask;
    f.sack_base = get_be32(p + offsetof(FeedbackHdr, sack_base)) & kPsnMask;
    f.sack_bitmap[0] = get_be64(p + offsetof(FeedbackHdr, sack_bitmap));
    f.sack_bitmap[1] = get_be64(p + offsetof(FeedbackHdr, sack_bitmap) + 8);
    f.echo_tag = get_be32(p + offsetof(FeedbackHdr, echo_tag));
    f.service_time_ns = get_be32(p + offsetof(FeedbackHdr, service_time_ns));
    f.window_mpr = get_be16(p + offsetof(FeedbackHdr, window_mpr));
    f.ce_count = get_be16(p + offsetof(FeedbackHdr, ce_count));
    f.code = static_cast<NackCode>(p[offsetof(FeedbackHdr, code)]);
    f.flags = p[offsetof(FeedbackHdr, flags)];
    t->data = {};
    t->probe = {};
    t->port_status = {};
  } else if (t->opcode == Opcode::kPortStatus) {
    t->port_status.port_mask = get_be32(p + offsetof(PortStatusHdr, port_mask));
    t->port_status.seq = get_be32(p + offsetof(PortStatusHdr, seq));
    t->port_status.num_planes = p[offsetof(PortStatusHdr, num_planes)];
    t->data = {};
    t->fb = {};
    t->probe = {};
  } else {
    Probe& pr = t->probe;
    pr.req_id = get_be16(p + offsetof(ProbeHdr, req_id));
    pr.port = p[offsetof(ProbeHdr, port)];
    pr.flags = p[offsetof(ProbeHdr, flags)];
    pr.echo_tag = get_be32(p + offsetof(ProbeHdr, echo_tag));
    pr.t_send_ns = get_be64(p + offsetof(ProbeHdr, t_send_ns));
    pr.service_time_ns = get_be32(p + offsetof(ProbeHdr, service_time_ns));
    t->data = {};
    t->fb = {};
    t->port_status = {};
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
    if (nack != (code != 0) || code > static_cast<uint8_t>(NackCode::kQpGone))
      return ParseStatus::kBadField;
  } else if (t.opcode == Opcode::kPortStatus) {
    if (t.port_status.num_planes > 32) return ParseStatus::kBadField;
    if (t.port_status.num_planes < 32 && (t.port_status.port_mask >> t.port_status.num_planes))
      return ParseStatus::kBadField;
  }
  return ParseStatus::kOk;
}

// A failed parse leaves a default view behind. Resetting all of it costs
// more than a whole parse, so only failures pay for it: a success writes
// every field instead.
[[gnu::cold, gnu::noinline]] ParseStatus reject(PacketView* out, ParseStatus status) {
  *out = PacketView{};
  return status;
}

// parse(), folding what it can of `side` into the ICRC check.
ParseStatus parse_frame(std::span<const uint8_t> frame, const ParseConfig& cfg, PacketView* out,
                        PortChecks checked, DeferredCopy* side) {
  const uint8_t* const base = frame.data();
  const size_t size = frame.size();
  PacketView& v = *out;

  // Fields are read in place, one access each (see get_be16()).
  if (size < sizeof(EthHdr)) return reject(out, ParseStatus::kTruncated);
  std::memcpy(v.dst_mac.bytes, base + offsetof(EthHdr, dst), 6);
  std::memcpy(v.src_mac.bytes, base + offsetof(EthHdr, src), 6);
  uint16_t ether_type = get_be16(base + offsetof(EthHdr, ether_type));
  size_t off = sizeof(EthHdr);
  v.has_vlan = false;
  v.vlan_tci = 0;
  if (ether_type == kEtherTypeVlan) {
    if (size < off + sizeof(VlanTag)) return reject(out, ParseStatus::kTruncated);
    v.has_vlan = true;
    v.vlan_tci = get_be16(base + off + offsetof(VlanTag, tci));
    ether_type = get_be16(base + off + offsetof(VlanTag, ether_type));
    off += sizeof(VlanTag);
  }

  IcrcLayout layout;
  layout.l3_offset = off;
  layout.ev_mode = cfg.ev_mode;
  size_t ip_end = 0;  // end of the IP packet; bytes after it are link padding
  uint8_t l4_proto = 0;
  v.has_srh = false;
  std::memset(v.srh_segment, 0, sizeof(v.srh_segment));
  if (ether_type == kEtherTypeIpv6) {
    if (size < off + sizeof(Ipv6Hdr)) return reject(out, ParseStatus::kTruncated);
    const uint8_t* ip = base + off;
    const uint32_t vtf = get_be32(ip + offsetof(Ipv6Hdr, version_tc_flow));
    if (vtf >> 28 != 6) return reject(out, ParseStatus::kBadIpHeader);
    const size_t payload = get_be16(ip + offsetof(Ipv6Hdr, payload_length));
    if (size < off + sizeof(Ipv6Hdr) + payload) return reject(out, ParseStatus::kTruncated);
    ip_end = off + sizeof(Ipv6Hdr) + payload;
    v.ip_version = IpVersion::kV6;
    v.dscp = (vtf >> 22) & 0x3f;
    v.ecn = (vtf >> 20) & 3;
    v.flow_label = vtf & 0xfffff;
    v.ttl = ip[offsetof(Ipv6Hdr, hop_limit)];
    std::memcpy(v.src_ip, ip + offsetof(Ipv6Hdr, src), 16);
    std::memcpy(v.dst_ip, ip + offsetof(Ipv6Hdr, dst), 16);
    l4_proto = ip[offsetof(Ipv6Hdr, next_header)];
    layout.ip_version = IpVersion::kV6;
    off += sizeof(Ipv6Hdr);
    if (l4_proto == kIpProtoRouting) {
      if (ip_end < off + sizeof(SrhOneSegment)) return reject(out, ParseStatus::kTruncated);
      const uint8_t* srh = base + off;
      if (!is_one_segment_srh(srh)) return reject(out, ParseStatus::kNotUdp);
      v.has_srh = true;
      std::memcpy(v.srh_segment, srh + offsetof(SrhOneSegment, segment), 16);
      l4_proto = srh[offsetof(SrhOneSegment, next_header)];
      layout.has_srh = true;
      off += sizeof(SrhOneSegment);
    }
  } else if (ether_type == kEtherTypeIpv4) {
    if (size < off + sizeof(Ipv4Hdr)) return reject(out, ParseStatus::kTruncated);
    const uint8_t* ip = base + off;
    if (ip[offsetof(Ipv4Hdr, version_ihl)] != 0x45) return reject(out, ParseStatus::kBadIpHeader);
    const bool checksum_ok = checked.ipv4_checksum == PortVerdict::kUnchecked
                                 ? ipv4_header_sum(ip) == 0xffff
                                 : checked.ipv4_checksum == PortVerdict::kGood;
    if (!checksum_ok) return reject(out, ParseStatus::kBadIpHeader);
    // MF or a fragment offset.
    if (get_be16(ip + offsetof(Ipv4Hdr, fragment)) & 0x3fff)
      return reject(out, ParseStatus::kFragment);
    const size_t total = get_be16(ip + offsetof(Ipv4Hdr, total_length));
    if (total < sizeof(Ipv4Hdr)) return reject(out, ParseStatus::kBadIpHeader);
    if (size < off + total) return reject(out, ParseStatus::kTruncated);
    ip_end = off + total;
    const uint8_t tos = ip[offsetof(Ipv4Hdr, tos)];
    v.ip_version = IpVersion::kV4;
    v.dscp = tos >> 2;
    v.ecn = tos & 3;
    v.flow_label = 0;
    v.ttl = ip[offsetof(Ipv4Hdr, ttl)];
    std::memset(v.src_ip, 0, sizeof(v.src_ip));
    std::memset(v.dst_ip, 0, sizeof(v.dst_ip));
    std::memcpy(v.src_ip, ip + offsetof(Ipv4Hdr, src), 4);
    std::memcpy(v.dst_ip, ip + offsetof(Ipv4Hdr, dst), 4);
    l4_proto = ip[offsetof(Ipv4Hdr, protocol)];
    layout.ip_version = IpVersion::kV4;
    off += sizeof(Ipv4Hdr);
  } else {
    return reject(out, ParseStatus::kNotIp);
  }
  if (l4_proto != kIpProtoUdp) return reject(out, ParseStatus::kNotUdp);

  if (ip_end < off + sizeof(UdpHdr)) return reject(out, ParseStatus::kTruncated);
  const uint8_t* udp = base + off;
  if (get_be16(udp + offsetof(UdpHdr, dst_port)) != kRoceUdpPort)
    return reject(out, ParseStatus::kNotMrcPort);
  if (get_be16(udp + offsetof(UdpHdr, length)) != ip_end - off)
    return reject(out, ParseStatus::kBadUdpLength);
  v.udp_src_port = get_be16(udp + offsetof(UdpHdr, src_port));
  off += sizeof(UdpHdr);

  if (ip_end < off + sizeof(Bth) + sizeof(Mth)) return reject(out, ParseStatus::kTruncated);
  const uint8_t* bth = base + off;
  const uint8_t* mth = bth + sizeof(Bth);
  const uint8_t opcode = bth[offsetof(Bth, opcode)];
  const uint8_t se_tver = bth[offsetof(Bth, se_m_pad_tver)];
  if (!is_known_opcode(opcode)) return reject(out, ParseStatus::kBadOpcode);
  if (se_tver & 0x0f) return reject(out, ParseStatus::kBadVersion);  // BTH TVer must be 0
  if (mth[offsetof(Mth, version)] != kProtocolVersion) return reject(out, ParseStatus::kBadVersion);
  // The ICRC is computed here and compared last: its latency then overlaps
  // with reading the rest of the headers instead of adding to it.
  // A kept FCS vouches for the body, from the MTH's end on, when it is
  // long enough to be worth it; a disagreement falls back to the fold.
  IcrcCheck icrc_check = IcrcCheck::kNone;
  uint32_t icrc = 0;
  if (cfg.verify_icrc && v.dscp != cfg.dscp.trimmed) {
    const size_t body = off + sizeof(Bth) + sizeof(Mth);
    const bool fcs_usable = checked.fcs_kept && ip_end - body >= kIcrcFromFcsMinBody + kIcrcLen;
    if (fcs_usable && icrc_matches_fcs(layout, frame, body, ip_end - kIcrcLen, checked.fcs)) {
      icrc_check = IcrcCheck::kFromFcs;
    } else {
      icrc = icrc_of(layout, frame.first(ip_end - kIcrcLen), {}, side);
      icrc_check = fcs_usable ? IcrcCheck::kFcsWrong : IcrcCheck::kFolded;
    }
  }
  v.icrc_check = icrc_check;
  Transport& t = v.t;
  t.opcode = static_cast<Opcode>(opcode);
  t.pkey = get_be16(bth + offsetof(Bth, pkey));
  t.dest_qpn = get_be24(bth + offsetof(Bth, dest_qpn));
  t.psn = get_be24(bth + offsetof(Bth, psn));
  t.ack_req = bth[offsetof(Bth, ack_req)] & 0x80;
  t.solicited = se_tver & 0x80;
  t.mth_flags = mth[offsetof(Mth, flags)];
  t.path_tag = get_be32(mth + offsetof(Mth, path_tag));
  off += sizeof(Bth) + sizeof(Mth);

  const size_t type_len = type_header_len(t.opcode);
  if (ip_end < off + type_len) return reject(out, ParseStatus::kTruncated);
  read_type_header(base + off, &t);
  off += type_len;
  v.header_len = static_cast<uint16_t>(off);
  v.payload = nullptr;
  v.payload_len = 0;

  v.trimmed = v.dscp == cfg.dscp.trimmed;
  if (v.trimmed) {
    // Only data is trimmable; what follows the headers is not payload.
    if (!is_data(t.opcode)) return reject(out, ParseStatus::kBadField);
    const ParseStatus s = check_fields(t, 0, true);
    return s == ParseStatus::kOk ? s : reject(out, s);
  }

  if (ip_end < off + kIcrcLen) return reject(out, ParseStatus::kTruncated);
  const size_t payload_len = ip_end - off - kIcrcLen;
  if (payload_len > kMaxPayload || (payload_len > 0 && !is_data(t.opcode)))
    return reject(out, ParseStatus::kBadLength);
  if (const ParseStatus s = check_fields(t, static_cast<uint32_t>(payload_len), false);
      s != ParseStatus::kOk)
    return reject(out, s);

  if (icrc_check != IcrcCheck::kNone && icrc_check != IcrcCheck::kFromFcs &&
      icrc != get_be32(base + ip_end - kIcrcLen))
    return reject(out, ParseStatus::kBadIcrc);
  v.payload = payload_len ? base + off : nullptr;
  v.payload_len = static_cast<uint32_t>(payload_len);
  return ParseStatus::kOk;
}

}  // namespace

ParseStatus parse(std::span<const uint8_t> frame, const ParseConfig& cfg, PacketView* out,
                  PortChecks checked) {
  return parse_frame(frame, cfg, out, checked, nullptr);
}

ParseStatus parse(std::span<const uint8_t> frame, const ParseConfig& cfg, PacketView* out,
                  PortChecks checked, const DeferredCopy& side) {
  DeferredCopy rest = side;
  const ParseStatus st = parse_frame(frame, cfg, out, checked, &rest);
  rest.make();
  return st;
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
