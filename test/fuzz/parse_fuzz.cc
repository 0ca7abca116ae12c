// libFuzzer target for wire::parse, wire::trim and wire::mark_ce.
//
// Every input is parsed as a raw Ethernet frame under each EV mode, with
// the ICRC checked and unchecked, and must keep the parser's promises:
//   - a payload, when set, lies inside the input; a trimmed packet has none;
//   - an accepted, untrimmed packet rebuilt from its view (build_packet)
//     parses to the same Transport and payload, and rebuilding that gives
//     the same bytes again;
//   - a port's kept FCS, the input's own or a wrong one, does not change
//     what parse() finds; the input's own is never found wrong;
//   - trim() of a copy yields a frame that parses as trimmed, with the same
//     Transport; mark_ce() of an accepted copy keeps it accepted (the ICRC
//     does not cover ECN), now CE-marked.
// Any broken promise aborts, and libFuzzer saves the input.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "wire/icrc.h"
#include "wire/packet.h"

namespace {

using namespace softmrc::wire;

constexpr size_t kFrameCapacity = kMaxHeaderLen + kMaxPayload + kIcrcLen;

[[noreturn]] void fail(const char* what, ParseStatus status) {
  std::fprintf(stderr, "parse_fuzz: broken promise: %s (status %s)\n", what,
               parse_status_name(status));
  std::abort();
}

void require(bool ok, const char* what, ParseStatus status = ParseStatus::kOk) {
  if (!ok) fail(what, status);
}

bool same_transport(const Transport& a, const Transport& b) {
  if (a.opcode != b.opcode || a.pkey != b.pkey || a.dest_qpn != b.dest_qpn || a.psn != b.psn ||
      a.ack_req != b.ack_req || a.solicited != b.solicited || a.mth_flags != b.mth_flags ||
      a.path_tag != b.path_tag) {
    return false;
  }
  if (is_data(a.opcode)) {
    return a.data.va == b.data.va && a.data.rkey == b.data.rkey &&
           a.data.msg_len == b.data.msg_len && a.data.msn == b.data.msn &&
           a.data.offset == b.data.offset && a.data.imm == b.data.imm;
  }
  if (is_feedback(a.opcode)) {
    const Feedback& x = a.fb;
    const Feedback& y = b.fb;
    return x.cum_psn == y.cum_psn && x.ref_psn == y.ref_psn && x.sack_base == y.sack_base &&
           x.sack_bitmap[0] == y.sack_bitmap[0] && x.sack_bitmap[1] == y.sack_bitmap[1] &&
           x.echo_tag == y.echo_tag && x.service_time_ns == y.service_time_ns &&
           x.window_mpr == y.window_mpr && x.ce_count == y.ce_count && x.code == y.code &&
           x.flags == y.flags;
  }
  if (a.opcode == Opcode::kPortStatus) {
    return a.port_status.port_mask == b.port_status.port_mask &&
           a.port_status.seq == b.port_status.seq &&
           a.port_status.num_planes == b.port_status.num_planes;
  }
  return a.probe.req_id == b.probe.req_id && a.probe.port == b.probe.port &&
         a.probe.flags == b.probe.flags && a.probe.echo_tag == b.probe.echo_tag &&
         a.probe.t_send_ns == b.probe.t_send_ns &&
         a.probe.service_time_ns == b.probe.service_time_ns;
}

void check_view(std::span<const uint8_t> in, ParseStatus status, const PacketView& v) {
  require(status < ParseStatus::kCount && parse_status_name(status) != nullptr, "status in range",
          status);
  if (v.payload != nullptr) {
    require(v.payload >= in.data() && v.payload_len <= in.size() &&
                static_cast<size_t>(v.payload - in.data()) <= in.size() - v.payload_len,
            "payload inside the input", status);
  }
  if (status != ParseStatus::kOk) return;
  require(v.header_len <= in.size(), "headers inside the input", status);
  require(v.payload_len <= kMaxPayload, "payload at most kMaxPayload", status);
  require(v.payload_len == 0 || v.payload == in.data() + v.header_len, "payload after headers");
  if (v.trimmed) require(v.payload_len == 0 && v.payload == nullptr, "trimmed => no payload");
}

// The frame an endpoint would build to send what `v` describes.
size_t rebuild(const PacketView& v, EvMode parsed_mode, std::span<uint8_t> out,
               EvMode* built_mode) {
  FrameSpec f;
  f.src_mac = v.src_mac;
  f.dst_mac = v.dst_mac;
  f.has_vlan = v.has_vlan;
  f.vlan_tci = v.vlan_tci;
  f.ip_version = v.ip_version;
  std::memcpy(f.src_ip, v.src_ip, sizeof(f.src_ip));
  std::memcpy(f.dst_ip, v.dst_ip, sizeof(f.dst_ip));
  f.ttl = v.ttl;
  // IPv4 carries only UDP-mode EVs, and only SRv6 mode sends an SRH.
  f.ev_mode = v.ip_version == IpVersion::kV4 ? EvMode::kUdp
              : v.has_srh                    ? EvMode::kSrv6
                                             : parsed_mode;
  f.srv6_srh = v.has_srh;
  *built_mode = f.ev_mode;
  const TxMarking marking{v.dscp, v.ecn};
  return build_packet(f, wire_ev_of(v, f.ev_mode), marking, v.t, {v.payload, v.payload_len}, out);
}

void check_rebuild(const PacketView& v, EvMode parsed_mode) {
  uint8_t first[kFrameCapacity];
  uint8_t second[kFrameCapacity];
  EvMode mode;
  const size_t n = rebuild(v, parsed_mode, first, &mode);
  require(n > 0, "an accepted packet can be rebuilt");

  ParseConfig cfg;
  cfg.ev_mode = mode;
  PacketView again;
  const ParseStatus status = parse({first, n}, cfg, &again);
  require(status == ParseStatus::kOk, "the rebuilt packet parses", status);
  require(!again.trimmed, "the rebuilt packet is not trimmed");
  require(same_transport(v.t, again.t), "the rebuilt packet has the same Transport");
  require(again.payload_len == v.payload_len &&
              (v.payload_len == 0 || std::memcmp(again.payload, v.payload, v.payload_len) == 0),
          "the rebuilt packet has the same payload");

  EvMode mode2;
  const size_t n2 = rebuild(again, mode, second, &mode2);
  require(mode2 == mode && n2 == n && std::memcmp(first, second, n) == 0,
          "rebuilding is a fixed point");
}

// A parse that makes a deferred copy on the way (of the frame itself, here)
// finds what a plain one finds, and makes the whole copy.
void check_deferred_copy(std::span<const uint8_t> in, const ParseConfig& cfg, ParseStatus status) {
  uint8_t copy[kFrameCapacity];
  if (in.size() > sizeof(copy)) return;
  PacketView view;
  const ParseStatus again = parse(in, cfg, &view, {}, DeferredCopy{copy, in.data(), in.size()});
  require(again == status, "a deferred copy does not change what parse() finds", again);
  require(in.empty() || std::memcmp(copy, in.data(), in.size()) == 0,
          "parse() makes the whole deferred copy");
}

void check_kept_fcs(std::span<const uint8_t> in, const ParseConfig& cfg, ParseStatus status,
                    uint32_t fcs) {
  PortChecks checked;
  checked.fcs_kept = true;
  checked.fcs = fcs;
  PacketView view;
  ParseStatus again = parse(in, cfg, &view, checked);
  require(again == status, "the frame's own FCS does not change what parse() finds", again);
  require(view.icrc_check != IcrcCheck::kFcsWrong, "the frame's own FCS is not found wrong");
  checked.fcs = ~fcs;
  again = parse(in, cfg, &view, checked);
  require(again == status, "a wrong FCS does not change what parse() finds", again);
}

void check_trim(std::span<const uint8_t> in) {
  uint8_t copy[kFrameCapacity];
  if (in.size() > sizeof(copy)) return;
  std::memcpy(copy, in.data(), in.size());
  const DscpConfig dscp;
  const size_t n = trim({copy, in.size()}, dscp);
  if (n == 0) return;
  require(n <= in.size(), "trim only shortens");

  ParseConfig cfg;
  cfg.verify_icrc = false;  // what trim() itself accepts
  PacketView before;
  const ParseStatus s0 = parse(in, cfg, &before);
  require(s0 == ParseStatus::kOk && is_data(before.t.opcode) && !before.trimmed,
          "trim() accepts only untrimmed data packets", s0);
  PacketView after;
  const ParseStatus s1 = parse({copy, n}, cfg, &after);
  require(s1 == ParseStatus::kOk, "a trimmed packet parses", s1);
  require(after.trimmed && after.payload_len == 0 && after.header_len == n,
          "a trimmed packet is headers only");
  require(after.ecn == before.ecn, "trim keeps ECN");
  require(same_transport(before.t, after.t), "trim keeps the Transport");
}

void check_mark_ce(std::span<const uint8_t> in) {
  uint8_t copy[kFrameCapacity];
  if (in.size() > sizeof(copy)) return;
  std::memcpy(copy, in.data(), in.size());
  if (!mark_ce({copy, in.size()})) return;

  for (const EvMode mode : {EvMode::kUdp, EvMode::kStev, EvMode::kSrv6}) {
    ParseConfig cfg;
    cfg.ev_mode = mode;
    PacketView before;
    if (parse(in, cfg, &before) != ParseStatus::kOk) continue;
    PacketView after;
    const ParseStatus status = parse({copy, in.size()}, cfg, &after);
    require(status == ParseStatus::kOk, "a CE-marked packet still parses", status);
    require(after.ecn == kEcnCe && after.dscp == before.dscp, "mark_ce sets CE only");
    require(same_transport(before.t, after.t), "mark_ce keeps the Transport");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  const uint32_t fcs = crc32(in);
  for (const EvMode mode : {EvMode::kUdp, EvMode::kStev, EvMode::kSrv6}) {
    for (const bool verify : {true, false}) {
      ParseConfig cfg;
      cfg.ev_mode = mode;
      cfg.verify_icrc = verify;
      PacketView view;
      const ParseStatus status = parse(in, cfg, &view);
      check_view(in, status, view);
      check_deferred_copy(in, cfg, status);
      check_kept_fcs(in, cfg, status, fcs);
      (void)wire_ev_of(view, mode);
      if (status == ParseStatus::kOk && !view.trimmed) check_rebuild(view, mode);
    }
  }
  check_trim(in);
  check_mark_ce(in);
  return 0;
}
