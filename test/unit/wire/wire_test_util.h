// Frames and transports for the wire tests: one of every packet type.
#pragma once

#include <cstring>
#include <vector>

#include "wire/packet.h"

namespace softmrc::wire::testing {

inline FrameSpec make_frame(IpVersion ip, EvMode mode, bool vlan = false, bool srh = false) {
  FrameSpec f;
  const uint8_t src_mac[6] = {0x02, 0, 0, 0, 0, 1};
  const uint8_t dst_mac[6] = {0x02, 0, 0, 0, 0, 2};
  std::memcpy(f.src_mac.bytes, src_mac, 6);
  std::memcpy(f.dst_mac.bytes, dst_mac, 6);
  f.has_vlan = vlan;
  f.vlan_tci = 0x2064;  // PCP 1, VID 100
  f.ip_version = ip;
  for (int i = 0; i < 16; ++i) {
    f.src_ip[i] = static_cast<uint8_t>(0x10 + i);
    f.dst_ip[i] = static_cast<uint8_t>(0x30 + i);
  }
  f.ttl = 61;
  f.ev_mode = mode;
  f.srv6_srh = srh;
  return f;
}

inline WireEv make_ev() {
  WireEv ev;
  for (int i = 0; i < 32; ++i) ev.bytes[i] = static_cast<uint8_t>(0xa0 + i);
  return ev;
}

// A transport for `op` with every field of its type header set to a
// distinct non-zero value; data packets describe a `payload_len` slice of a
// message laid out consistently with the opcode.
inline Transport make_transport(Opcode op, uint32_t payload_len = 0) {
  Transport t;
  t.opcode = op;
  t.pkey = 0x8001;
  t.dest_qpn = 0xabcdef;
  t.psn = 0xfffffe;
  t.ack_req = true;
  t.solicited = has_imm(op);
  t.mth_flags = kMthRetransmit;
  t.path_tag = 0x01020304;
  if (is_data(op)) {
    const uint32_t before = is_first(op) ? 0 : 4096;
    const uint32_t after = is_last(op) ? 0 : 8192;
    t.data.msg_len = before + payload_len + after;
    t.data.offset = before;
    t.data.va = 0x7f0000001000ull + before;
    t.data.rkey = 0x11223344;
    t.data.msn = 77;
    t.data.imm = has_imm(op) ? 0xdeadbeef : 0;
  } else if (is_feedback(op)) {
    t.fb.cum_psn = 0xfffff0;
    t.fb.ref_psn = 0x000003;
    t.fb.sack_base = 0xfffff0;
    t.fb.sack_bitmap[0] = 0x8000000000000005ull;
    t.fb.sack_bitmap[1] = 0x0000000100000001ull;
    t.fb.echo_tag = 0x0a0b0c0d;
    t.fb.service_time_ns = 1234;
    t.fb.window_mpr = 8;
    t.fb.ce_count = 3;
    t.fb.code = op == Opcode::kNack ? NackCode::kTrimmed : NackCode::kNone;
    t.fb.flags = kFbEcnEcho | kFbSvcTimeValid;
  } else if (op == Opcode::kPortStatus) {
    t.port_status.port_mask = 0b1011;
    t.port_status.seq = 42;
    t.port_status.num_planes = 4;
  } else {
    t.probe.req_id = 0x5150;
    t.probe.port = 2;
    t.probe.flags = op == Opcode::kProbeReply ? kProbeSvcTimeValid : 0;
    t.probe.echo_tag = 0x99;
    t.probe.t_send_ns = 0x0102030405060708ull;
    t.probe.service_time_ns = 500;
  }
  return t;
}

inline std::vector<uint8_t> make_payload(uint32_t len) {
  std::vector<uint8_t> p(len);
  for (uint32_t i = 0; i < len; ++i) p[i] = static_cast<uint8_t>(i * 7 + 3);
  return p;
}

inline constexpr Opcode kAllOpcodes[] = {
    Opcode::kWriteFirst,   Opcode::kWriteMiddle,  Opcode::kWriteLast,  Opcode::kWriteOnly,
    Opcode::kWriteLastImm, Opcode::kWriteOnlyImm, Opcode::kAck,        Opcode::kNack,
    Opcode::kProbeRequest, Opcode::kProbeReply,   Opcode::kPortStatus,
};

// Builds a whole frame (headers, payload copy, ICRC).
inline std::vector<uint8_t> build(const FrameSpec& f, const Transport& t,
                                  const std::vector<uint8_t>& payload,
                                  TxMarking marking = {26, kEcnEct0}) {
  std::vector<uint8_t> out(kMaxHeaderLen + payload.size() + kIcrcLen);
  const size_t n = build_packet(f, make_ev(), marking, t, payload, out);
  out.resize(n);
  return out;
}

}  // namespace softmrc::wire::testing
